"""A stand-in for PyTorch, for tests of gpumem's Python observer (interpose/python/sitecustomize.py)
on machines without a GPU or PyTorch. Only what the observer relies on, and as PyTorch does it:

- `import torch` initialises no CUDA; `torch.cuda._lazy_call` queues until the first CUDA use,
  and a queued call that raises fails that use (DeferredCudaCallError);
- the caching allocator (torch._C) takes its memory from the (fake) libcudart through ctypes,
  keeps freed blocks, honours set_per_process_memory_fraction, and on a request it cannot meet
  (over the cap: no driver call; else a failed cudaMalloc) releases its cache, calls the
  observers attached by torch._C._cuda_attach_out_of_memory_observer with (device, request, cap
  or total, free), then raises torch.OutOfMemoryError with PyTorch's message;
- Tensor.backward calls torch.autograd.backward by attribute lookup; the gradients are allocated
  on a native thread named pt_autograd_0, with no Python frames, as PyTorch's autograd device
  threads do (libfake_autograd_engine.so, whose path is in FAKE_TORCH_ENGINE).

FAKE_TORCH_BROKEN=1 makes `import torch` fail, as an installation missing a part does.
"""

import os

if os.environ.get("FAKE_TORCH_BROKEN") == "1":
    from torch import _not_installed  # noqa: F401 (fails, as a missing part of PyTorch would)

from torch._C import OutOfMemoryError
from torch._tensor import Tensor, dtype, empty, float32, uint8, zeros
from torch import autograd, cuda

__all__ = ["OutOfMemoryError", "Tensor", "autograd", "cuda", "dtype", "empty", "float32", "uint8",
           "zeros"]
