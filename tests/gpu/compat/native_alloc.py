"""native_alloc: cudaMalloc/cudaMemset/cudaMemcpy/cudaFree through ctypes beside PyTorch tensors."""

import ctypes
import ctypes.util
import glob
import os
import sys

import torch

HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE = 1, 2, 3


def runtime_candidates():
    """PyTorch's own libcudart first (already mapped once CUDA is up), then its lib folders."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith("libcudart.so"):
                yield fields[5].strip()
    site = os.path.dirname(os.path.dirname(torch.__file__))
    for folder in [os.path.join(os.path.dirname(torch.__file__), "lib")] + sorted(
            glob.glob(os.path.join(site, "nvidia", "*", "lib"))):
        yield from sorted(glob.glob(os.path.join(folder, "libcudart.so*")))
    name = ctypes.util.find_library("cudart")
    if name:
        yield name


def load_runtime():
    for path in runtime_candidates():
        try:
            runtime = ctypes.CDLL(path)
        except OSError:
            continue
        runtime.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        runtime.cudaMemset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
        runtime.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.c_int]
        runtime.cudaFree.argtypes = [ctypes.c_void_p]
        return runtime
    return None


def checked(status, what):
    if status != 0:
        raise RuntimeError(f"{what} failed with CUDA error {status}")


def native_malloc(runtime, size):
    pointer = ctypes.c_void_p()
    checked(runtime.cudaMalloc(ctypes.byref(pointer), size), f"cudaMalloc({size})")
    return pointer.value


def main():
    torch.zeros(1, device="cuda")  # PyTorch initialises CUDA (and loads its runtime) first
    runtime = load_runtime()
    if runtime is None:
        print("skipped: no libcudart found beside PyTorch", file=sys.stderr)
        return 77
    size = 1 << 20
    buffer = native_malloc(runtime, size)
    checked(runtime.cudaMemset(buffer, 0x5A, size), "cudaMemset")
    host = (ctypes.c_ubyte * size)()
    checked(runtime.cudaMemcpy(host, buffer, size, DEVICE_TO_HOST), "cudaMemcpy to host")
    print(f"cudaMemset: {bytes(host).count(0x5A)} of {size} bytes read back as 0x5a")

    pattern_bytes = (bytes(range(251)) * (size // 251 + 1))[:size]
    pattern = (ctypes.c_ubyte * size).from_buffer_copy(pattern_bytes)
    checked(runtime.cudaMemcpy(buffer, pattern, size, HOST_TO_DEVICE), "cudaMemcpy to device")
    as_tensor = torch.empty(size, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    checked(runtime.cudaMemcpy(as_tensor.data_ptr(), buffer, size, DEVICE_TO_DEVICE), "D2D")
    expected = torch.arange(size, dtype=torch.int64).remainder(251).to(torch.uint8)
    equal = torch.equal(as_tensor.cpu(), expected)
    print(f"host bytes via a native buffer into a tensor: equal {equal}")

    tensor = torch.arange(4096, dtype=torch.float32, device="cuda") * 0.5
    torch.cuda.synchronize()
    checked(runtime.cudaMemcpy(buffer, tensor.data_ptr(), tensor.nbytes, DEVICE_TO_DEVICE), "D2D")
    back = torch.empty_like(tensor)
    checked(runtime.cudaMemcpy(back.data_ptr(), buffer, tensor.nbytes, DEVICE_TO_DEVICE), "D2D")
    torch.cuda.synchronize()
    equal = torch.equal(back, tensor)
    print(f"tensor via a native buffer: sum {back.sum().item():.1f}, equal {equal}")
    checked(runtime.cudaFree(buffer), "cudaFree")

    # Native buffers and tensors interleaved, freed in the other order.
    buffers, tensors = [], []
    for i in range(8):
        buffers.append(native_malloc(runtime, (i + 1) * 3 << 18))
        tensors.append(torch.full((1024 * (i + 1),), float(i), device="cuda"))
    for buffer in reversed(buffers):
        checked(runtime.cudaFree(buffer), "cudaFree")
    tensor_sum = sum(t.sum().item() for t in tensors)
    print(f"8 native buffers freed beside 8 tensors: tensor sum {tensor_sum:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
