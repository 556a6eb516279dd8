# A training step that PyTorch would end with an out-of-memory error, for
# tests/integration/framework_oom_test.cc, on any CPython: weights allocated through the (fake)
# libcudart; PyTorch's start-up probe for fabric handles (a cuMemCreate the driver refuses with
# error 800); a backward pass whose allocations an autograd thread makes (native, named
# pt_autograd_0); then the allocator's out-of-memory observer and the error raised. The script
# notes the pass and the error itself, through gpumem's entry points, the way gpumem's Python
# observer does; the functions standing for PyTorch's own live in a file named as an installed
# package's, so that the user's lines below are the call sites.
# Usage: framework_oom.py FAKE_AUTOGRAD_ENGINE_LIBRARY [libcudart path]
import ctypes
import sys

helper = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
cudart = ctypes.CDLL(sys.argv[2] if len(sys.argv) > 2 else "libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
gpumem = ctypes.CDLL(None)
gpumem.gpumem_note_out_of_memory.argtypes = [
    ctypes.c_int32, ctypes.c_int32, ctypes.c_uint64, ctypes.c_int32, ctypes.c_uint64,
    ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p]
gpumem.gpumem_note_backward.argtypes = [ctypes.c_uint64, ctypes.c_int32]
helper.fake_engine_allocate.argtypes = [
    ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
helper.fake_engine_probe_fabric.argtypes = [ctypes.c_size_t]

MiB = 1 << 20
REQUESTED = 512 * MiB
ALLOCATED = 88 * MiB
RESERVED = 96 * MiB
LIMIT = 128 * MiB
DEVICE_FREE = 1900 * MiB
MESSAGE = (b"CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of "
           b"2.00 GiB of which 1.86 GiB is free. Of the allocated memory 88.00 MiB is allocated "
           b"by PyTorch, and 8.00 MiB is reserved by PyTorch but unallocated.\n"
           b"See documentation for Memory Management")

# PyTorch's side: the observer's frames (left out of the recorded stacks) and torch's own.
TORCH = '''
def observer_backward(gpumem, number, ended):
    gpumem.gpumem_note_backward(number, ended)


def backward(gpumem, helper):
    observer_backward(gpumem, 1, 0)
    sizes = (ctypes.c_size_t * 3)(*([8 << 20] * 3))
    pointers = (ctypes.c_void_p * 3)()  # kept: never freed
    made = 3 if helper.fake_engine_allocate(sizes, pointers, 3) == 0 else 0
    observer_backward(gpumem, 1, 1)
    return made


def observer_oom(gpumem, source, requested, from_message, message):
    gpumem.gpumem_note_out_of_memory(0, source, requested, from_message, ALLOCATED, RESERVED,
                                     LIMIT, DEVICE_FREE, message)


def allocate_too_much(gpumem):
    observer_oom(gpumem, 1, REQUESTED, 0, None)
    observer_oom(gpumem, 2, REQUESTED, 1, MESSAGE)
'''
torch = {"ctypes": ctypes, "ALLOCATED": ALLOCATED, "RESERVED": RESERVED, "LIMIT": LIMIT,
         "DEVICE_FREE": DEVICE_FREE, "REQUESTED": REQUESTED, "MESSAGE": MESSAGE}
exec(compile(TORCH, "/fake/site-packages/torch/_tensor.py", "exec"), torch)


def allocate(size):
    pointer = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(pointer), size) == 0  # line: allocate
    return pointer.value


def train():
    weights = allocate(64 * MiB)  # line: weights
    probe = helper.fake_engine_probe_fabric(20 * MiB)  # line: probe
    assert probe == 800, probe
    assert torch["backward"](gpumem, helper) == 3  # line: backward
    torch["allocate_too_much"](gpumem)  # line: oom
    return weights


train()
