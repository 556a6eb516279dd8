"""torch.autograd of the fake torch: the gradients of the graph's leaves are allocated by the
"engine", a native thread named pt_autograd_0 (libfake_autograd_engine.so), with no Python frames
on it, as PyTorch's autograd device threads allocate theirs."""

import ctypes
import os

import torch
from torch import _C

_engine = []  # the loaded engine library, once


def _engine_allocate(sizes):
    if not _engine:
        engine = ctypes.CDLL(os.environ["FAKE_TORCH_ENGINE"])
        engine.fake_engine_allocate.argtypes = (
            ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_void_p), ctypes.c_int)
        _engine.append(engine)
    count = len(sizes)
    pointers = (ctypes.c_void_p * count)()
    if _engine[0].fake_engine_allocate((ctypes.c_size_t * count)(*sizes), pointers, count) != 0:
        raise RuntimeError("CUDA error: the autograd engine could not allocate the gradients")
    return list(pointers)


def _leaves(roots):
    leaves, seen, pending = [], set(), list(roots)
    while pending:
        tensor = pending.pop()
        if id(tensor) in seen or not tensor.requires_grad:
            continue
        seen.add(id(tensor))
        if tensor._parents:
            pending.extend(tensor._parents)
        else:
            leaves.append(tensor)
    return leaves


def _gradients(tensors):
    """New tensors shaped as `tensors`, their memory allocated on the engine's thread."""
    sizes = [tensor._size for tensor in tensors]
    pointers = _engine_allocate(sizes)
    gradients = []
    for tensor, pointer, size in zip(tensors, pointers, sizes):
        _C.allocator.adopt(size)
        gradients.append(torch.Tensor(tensor.shape, block=(pointer, size)))
    return gradients


def _as_tuple(tensors):
    return (tensors,) if isinstance(tensors, torch.Tensor) else tuple(tensors)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    """Computes the leaves' gradients into their .grad (kept there across passes, as PyTorch
    accumulates into it)."""
    leaves = _as_tuple(inputs) if inputs else _leaves(_as_tuple(tensors))
    for leaf, gradient in zip(leaves, _gradients(leaves)):
        if leaf.grad is None:
            leaf.grad = gradient


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs`, returned."""
    return tuple(_gradients(_as_tuple(inputs)))
