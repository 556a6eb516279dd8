# Allocates device memory through the (fake) libcudart from known Python functions and lines, for
# tests/integration/python_recording_test.cc. Each allocation's size names it; the test reads the
# lines it expects from the `# line:` markers below, so edits here need no edit there.
# Usage: python_allocs.py [libcudart path]
import ctypes
import sys
import threading

cudart = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]

SIMPLE_SIZE = 1000001
RECURSION_SIZE = 1000002
THREAD_SIZE = 1000003
UNICODE_SIZE = 1000004
MAP_SIZE = 1000005
RECURSION_DEPTH = 250


def allocate(size):
    pointer = ctypes.c_void_p()
    result = cudart.cudaMalloc(ctypes.byref(pointer), size)  # line: allocate
    assert result == 0, result
    return pointer


def make_buffer():
    buffer = allocate(SIMPLE_SIZE)  # line: make_buffer
    return buffer


class Model:
    def build(self):
        return make_buffer()  # line: Model.build


def recurse(depth):
    if depth == 0:
        return allocate(RECURSION_SIZE)  # line: recurse.bottom
    return recurse(depth - 1)  # line: recurse.call


def in_thread(out):
    out.append(allocate(THREAD_SIZE))  # line: in_thread


def ünïcode_函数():
    return allocate(UNICODE_SIZE)  # line: unicode


def from_map(size):
    return allocate(size)  # line: from_map


def via_map():
    # map() calls from_map from C: a C-level eval of its own (python_group 1 for via_map).
    return list(map(from_map, [MAP_SIZE]))[0]  # line: via_map


def main():
    buffers = [Model().build()]  # line: main.build
    buffers.append(recurse(RECURSION_DEPTH))  # line: main.recurse
    out = []
    thread = threading.Thread(target=in_thread, args=(out,))
    thread.start()
    thread.join()
    buffers.extend(out)
    buffers.append(ünïcode_函数())
    buffers.append(via_map())  # line: main.via_map
    for buffer in buffers:
        cudart.cudaFree(buffer)


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    main()  # line: module
