# One side of run_python_frames_cost.sh: cudaMalloc + cudaFree through ctypes, called from a
# Python stack DEPTH frames deep, timed over ITERATIONS pairs. Prints ns_per_pair=N.
# Usage: python_frames_cost.py [ITERATIONS] [DEPTH] [libcudart]
import ctypes
import sys
import time

iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
depth = int(sys.argv[2]) if len(sys.argv) > 2 else 20
cudart = ctypes.CDLL(sys.argv[3] if len(sys.argv) > 3 else "libcudart.so.13")
malloc = cudart.cudaMalloc
malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
free = cudart.cudaFree
free.argtypes = [ctypes.c_void_p]


def loop():
    pointer = ctypes.c_void_p()
    ref = ctypes.byref(pointer)
    for _ in range(1000):  # warm-up: stacks interned, caches filled
        malloc(ref, 256)
        free(pointer)
    start = time.perf_counter_ns()
    for _ in range(iterations):
        malloc(ref, 256)
        free(pointer)
    return time.perf_counter_ns() - start


def nest(level):
    # The loop runs `depth` Python frames deep: nest() depth - 1 times, then loop().
    if level <= 1:
        return loop()
    return nest(level - 1)


elapsed = nest(depth - 1)  # plus <module>: `depth` frames in all
print(f"ns_per_pair={elapsed // iterations}")
