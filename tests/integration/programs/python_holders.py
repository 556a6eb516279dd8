# A training loop's planted leak, for tests/integration/python_holders_test.cc: every iteration
# allocates a buffer through the (fake) libcudart and appends it to a list that is never cleared.
# Mode "note": the script reports each append to gpumem itself, the way gpumem's Python observer
# (interpose/python/sitecustomize.py) does; any CPython. Mode "observer": it appends objects that
# look like CUDA tensors to a plain list and leaves the rest to the observer (CPython 3.12+).
# Usage: python_holders.py note|observer [libcudart path]
import ctypes
import sys
import types

cudart = ctypes.CDLL(sys.argv[2] if len(sys.argv) > 2 else "libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
SIZE = 262144
STEPS = 12


def allocate(size):
    pointer = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(pointer), size) == 0  # line: allocate
    return pointer.value


def observer_stand_in(address, size):
    """One Python frame, as the observer's callback is: gpumem leaves it out of the stack."""
    note = ctypes.CDLL(None).gpumem_note_python_holder
    note.argtypes = (ctypes.c_uint64, ctypes.c_uint64)
    note(address, size)


# What the observer recognises as a CUDA tensor: torch.Tensor of a module named torch. Appends
# while the module is still being set up (no Tensor yet, as inside `import torch`) must pass.
torch = types.ModuleType("torch")
sys.modules["torch"] = torch
half_imported = []
for value in range(3):
    half_imported.append(value)


class Tensor:
    is_cuda = True

    def __init__(self, address, size):
        self.address, self.size = address, size

    def untyped_storage(self):
        return types.SimpleNamespace(data_ptr=lambda: self.address, nbytes=lambda: self.size)


torch.Tensor = Tensor
sys.modules["torch"] = torch


# A library's code (its file under sys.prefix, as an installed package's is) that also keeps the
# tensors in a list: the observer looks at the program's own code only.
library = {}
exec(compile("def keep(kept, item):\n    kept.append(item)\n",
             sys.prefix + "/lib/fake_library.py", "exec"), library)


def train(mode):
    history = []
    library_list = []
    for step in range(STEPS):
        hidden = allocate(SIZE)  # line: hidden
        if mode == "note":
            history.append(hidden)
            observer_stand_in(hidden, SIZE)  # line: note
        else:
            history.append(Tensor(hidden, SIZE))  # line: append
            library["keep"](library_list, history[-1])
        history.append(step)  # not a tensor: nothing to note
    return history


train(sys.argv[1])
