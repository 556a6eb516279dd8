"""The native side of the fake torch: the CUDA context and the caching allocator."""

import ctypes

GRANULE = 512  # every block is rounded up to it, as PyTorch's kMinBlockSize


class OutOfMemoryError(RuntimeError):
    pass


def _format_size(size):
    """c10's format_size(), which PyTorch's out-of-memory message uses."""
    if size <= 1024:
        return "%d bytes" % size
    if size <= 1 << 20:
        return "%.2f KiB" % (size / 1024.0)
    if size <= 1 << 30:
        return "%.2f MiB" % (size / 1048576.0)
    return "%.2f GiB" % (size / 1073741824.0)


class _CachingAllocator(object):
    def __init__(self):
        self.cudart = None  # loaded by the CUDA initialisation
        self.observers = []
        self.fraction = None
        self.allocated = 0
        self.reserved = 0
        self.cached = {}  # size -> [pointer], freed blocks kept for reuse

    def init(self):
        if self.cudart is None:
            # Global, as PyTorch loads its CUDA libraries (torch._load_global_deps): the
            # engine's library (autograd.py) links libcudart and runs under gpumem's hooks.
            cudart = ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
            cudart.cudaMalloc.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t)
            cudart.cudaFree.argtypes = (ctypes.c_void_p,)
            cudart.cudaMemGetInfo.argtypes = (ctypes.POINTER(ctypes.c_size_t),) * 2
            cudart.cudaFree(None)  # creates the context, as CUDA's initialisation does
            self.cudart = cudart

    def mem_get_info(self):
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        if self.cudart.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) != 0:
            raise RuntimeError("CUDA error: cudaMemGetInfo failed")
        return free.value, total.value

    def malloc(self, nbytes):
        size = max(GRANULE, (nbytes + GRANULE - 1) // GRANULE * GRANULE)
        blocks = self.cached.get(size)
        pointer = blocks.pop() if blocks else self._new_block(size)
        if pointer is None:
            self.release_cache()
            pointer = self._new_block(size)
        if pointer is None:
            self._out_of_memory(size)
        self.allocated += size
        return pointer, size

    def adopt(self, size):
        """A block the driver gave another thread (the autograd engine's) for this allocator."""
        self.allocated += size
        self.reserved += size

    def free(self, pointer, size):
        self.allocated -= size
        self.cached.setdefault(size, []).append(pointer)

    def release_cache(self):
        for size, pointers in self.cached.items():
            for pointer in pointers:
                self.cudart.cudaFree(pointer)
                self.reserved -= size
        self.cached = {}

    def limit(self):
        return None if self.fraction is None else int(self.fraction * self.mem_get_info()[1])

    def _new_block(self, size):
        """A block from the driver; None where the cap or the driver refuses it."""
        limit = self.limit()
        if limit is not None and self.reserved + size > limit:
            return None  # refused without asking the driver
        pointer = ctypes.c_void_p()
        if self.cudart.cudaMalloc(ctypes.byref(pointer), size) != 0:
            return None
        self.reserved += size
        return pointer.value

    def _out_of_memory(self, size):
        free, total = self.mem_get_info()
        limit = self.limit()
        for observer in list(self.observers):
            observer(0, size, total if limit is None else limit, free)
        allowed = "" if limit is None else "%s allowed; " % _format_size(limit)
        _raise_from_native_code(OutOfMemoryError, (
            "CUDA out of memory. Tried to allocate %s. GPU 0 has a total capacity of %s of which "
            "%s is free. %sOf the allocated memory %s is allocated by PyTorch, and %s is reserved "
            "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
            "documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
            % (_format_size(size), _format_size(total), _format_size(free), allowed,
               _format_size(self.allocated), _format_size(self.reserved - self.allocated))))


def _raise_from_native_code(error_type, message):
    """Raises as PyTorch's bindings do, with PyErr_SetString: CPython makes the exception object
    (3.12+: at once; before: when a handler first needs it), no `raise` statement does."""
    set_error = ctypes.pythonapi.PyErr_SetString
    set_error.argtypes = (ctypes.py_object, ctypes.c_char_p)
    set_error.restype = None
    set_error(error_type, message.encode())  # ctypes raises the error it set
    raise SystemError("PyErr_SetString raised nothing")


allocator = _CachingAllocator()


def _cuda_init():
    allocator.init()


def _cuda_isInitialized():
    return allocator.cudart is not None


def _cuda_attach_out_of_memory_observer(observer):
    if not callable(observer):
        raise TypeError("an out-of-memory observer must be callable")
    allocator.init()  # as PyTorch's: attaching initialises CUDA
    allocator.observers.append(observer)
