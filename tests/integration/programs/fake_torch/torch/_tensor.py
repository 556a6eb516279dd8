"""torch.Tensor of the fake torch: float32 CUDA memory from the caching allocator, and just
enough of a graph (each result keeps its operands) for backward to find the leaves."""

import types

import torch
from torch import _C, cuda


class dtype(object):
    def __init__(self, itemsize):
        self.itemsize = itemsize


float32 = dtype(4)
uint8 = dtype(1)


class Tensor(object):
    is_cuda = True

    def __init__(self, shape, requires_grad=False, parents=(), block=None, dtype=float32):
        cuda._lazy_init()
        self.shape = tuple(shape)
        nbytes = dtype.itemsize
        for extent in self.shape:
            nbytes *= extent
        self._pointer, self._size = block or _C.allocator.malloc(nbytes)
        self.requires_grad = requires_grad or any(parent.requires_grad for parent in parents)
        self._parents = parents
        self.grad = None

    def __del__(self):
        try:
            _C.allocator.free(self._pointer, self._size)
        except (AttributeError, TypeError):  # the allocation failed; or the interpreter exits
            pass

    def untyped_storage(self):
        return types.SimpleNamespace(data_ptr=lambda: self._pointer, nbytes=lambda: self._size)

    def __matmul__(self, other):
        return Tensor((self.shape[0], other.shape[-1]), parents=(self, other))

    def sum(self):
        return Tensor((), parents=(self,))

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        # As PyTorch's: through the module attribute, which a profiler may wrap.
        torch.autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def empty(*shape, **options):
    """A CUDA tensor (`device` is taken to be "cuda")."""
    return Tensor(shape, options.get("requires_grad", False), dtype=options.get("dtype", float32))


zeros = empty
