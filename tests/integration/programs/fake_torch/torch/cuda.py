"""torch.cuda of the fake torch: lazy initialisation and the allocator's figures."""

import threading

from torch import _C
from torch._C import OutOfMemoryError

_initialized = False
_initialization_lock = threading.Lock()
_queued_calls = []  # callables to run at initialisation


class DeferredCudaCallError(Exception):
    pass


def is_initialized():
    return _initialized


def _lazy_call(callable_, **kwargs):
    with _initialization_lock:
        if _initialized:
            callable_()
        else:
            _queued_calls.append(callable_)


def _lazy_init():
    global _initialized
    if _initialized:
        return
    with _initialization_lock:
        if _initialized:
            return
        _C._cuda_init()
        _initialized = True  # (PyTorch sets it after the queued calls, under a flag of its own)
        for queued in _queued_calls:
            try:
                queued()
            except Exception as error:
                raise DeferredCudaCallError("CUDA call failed lazily at initialization: %s" % error)
        del _queued_calls[:]


def current_device():
    _lazy_init()
    return 0


def _check_device(device):
    if device not in (None, 0, "cuda", "cuda:0"):
        raise ValueError("Invalid device, the fake has one: %r" % (device,))


def memory_allocated(device=None):
    _check_device(device)
    return _C.allocator.allocated if _initialized else 0


def memory_reserved(device=None):
    _check_device(device)
    return _C.allocator.reserved if _initialized else 0


def mem_get_info(device=None):
    _check_device(device)
    _lazy_init()
    return _C.allocator.mem_get_info()


def empty_cache():
    if _initialized:
        _C.allocator.release_cache()


def set_per_process_memory_fraction(fraction, device=None):
    _check_device(device)
    _lazy_init()
    if not 0 <= fraction <= 1:
        raise ValueError("Invalid fraction value: %r. Allowed range: 0~1" % (fraction,))
    _C.allocator.fraction = fraction


def get_per_process_memory_fraction(device=None):
    _check_device(device)
    _lazy_init()
    return 1.0 if _C.allocator.fraction is None else _C.allocator.fraction


__all__ = ["OutOfMemoryError", "current_device", "empty_cache", "get_per_process_memory_fraction",
           "is_initialized", "mem_get_info", "memory_allocated", "memory_reserved",
           "set_per_process_memory_fraction"]
