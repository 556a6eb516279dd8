"""gpumem's Python observer: which line keeps CUDA memory alive, and what PyTorch did.

`gpumem record` puts this directory first on PYTHONPATH, so Python imports this file at start-up.
Under gpumem (libgpumem.so preloaded) it tells gpumem, through libgpumem.so's entry points:

- which `list.append` keeps a CUDA tensor (CPython 3.12+, sys.monitoring): the classic
  training-loop leak (`history.append(loss)`) is then reported at the line of the append, besides
  the line that allocated the memory. GPUMEM_PYTHON_HOLDERS=0 leaves this off.
- once the program imports torch (never imported here: a finder on sys.meta_path waits for it),
  PyTorch's out-of-memory errors and backward passes; GPUMEM_PYTHON_TORCH=0 leaves this off.
  An out-of-memory error is seen twice where it can be: by the caching allocator's
  out-of-memory observer hook (the request and the limit, also when no driver call failed, as
  under a set_per_process_memory_fraction cap), and as the torch.OutOfMemoryError raised (its
  message, and the stack it was raised in): on CPython 3.12+ when the error is made, caught or
  not; before 3.12 only an uncaught one, through sys.excepthook and threading.excepthook. Each torch.autograd.backward / grad call is noted when it begins (the
  line that called it, e.g. `loss.backward()`) and ends: PyTorch's autograd threads, which
  allocate the gradients, carry no Python frames.

Anywhere else it does nothing. Then it runs the sitecustomize this one shadows, if there is one.

Cost: every call site is looked at once and switched off unless it calls list.append in the
program's own code (not the standard library's, not an installed package's); an append site that
has not appended a CUDA tensor in its first 64 calls is switched off too. PyTorch's hooks cost
nothing to other exceptions (tests/bench/run_python_raise_cost.sh) and two calls into gpumem per
backward pass.
"""

import sys

_MAX_REPLAYED_FRAMES = 128  # as many Python frames as gpumem keeps per stack
_SIZE_UNITS = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _warn(text):
    sys.stderr.write("gpumem: warning: %s\n" % text)


def _entry_point(name, argument_types):
    """libgpumem.so's exported function `name` through ctypes, or None when not under gpumem."""
    import ctypes

    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argument_types
    function.restype = None
    return function


def _watch_list_appends():
    import ctypes

    if sys.version_info < (3, 12):
        return  # sys.monitoring is 3.12's
    note = _entry_point("gpumem_note_python_holder", (ctypes.c_uint64, ctypes.c_uint64))
    if note is None:
        return  # not under gpumem
    monitoring = sys.monitoring
    tool = None
    for candidate in (4, 3):  # ids no standard tool claims (debugger 0, coverage 1, profiler 2)
        try:
            monitoring.use_tool_id(candidate, "gpumem")
            tool = candidate
            break
        except ValueError:
            continue
    if tool is None:
        return
    append = list.append
    disable = monitoring.DISABLE
    # Only the program's own code: lists that libraries fill and drop every step (the optimizer's
    # lists of parameters and gradients) are not the leak a user looks for, and each report costs.
    import os
    import site

    library_dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    try:
        library_dirs.update(site.getsitepackages())
        library_dirs.add(site.getusersitepackages())
    except AttributeError:  # a virtualenv's old site.py
        pass
    library_dirs = tuple(os.path.join(os.path.abspath(d), "") for d in library_dirs if d)
    own_code = {}  # code object -> whether it is the program's own

    def is_own(code):
        own = own_code.get(code)
        if own is None:
            name = code.co_filename
            own = not name.startswith("<") and not os.path.abspath(name).startswith(library_dirs)
            own_code[code] = own
        return own

    appends_without_tensor = {}  # (code, offset) -> count, until a CUDA tensor is seen there
    give_up_after = 64

    def list_of(callable_, arg0):
        if callable_ is append:
            return arg0  # history.append(x): the descriptor, the list first
        if getattr(callable_, "__self__", None).__class__ is list and callable_.__name__ == "append":
            return callable_.__self__  # f = history.append; f(x)
        return None

    # Both callbacks swallow every error: an exception raised here would surface in the program
    # (e.g. while torch is half imported, torch.Tensor does not exist yet).
    def on_call(code, offset, callable_, arg0):
        try:
            if list_of(callable_, arg0) is None or not is_own(code):
                return disable  # not list.append in the program's own code: never look again
            if appends_without_tensor.get((code, offset), 0) >= give_up_after:
                return disable
        except Exception:
            return disable
        return None

    def on_c_return(code, offset, callable_, arg0):
        try:
            target = list_of(callable_, arg0)
            # (A call site's first call still returns here after on_call disabled the site.)
            if not target or not is_own(code):
                return None
            tensor_type = getattr(sys.modules.get("torch"), "Tensor", None)
            item = target[-1]
            key = (code, offset)
            if tensor_type is not None and isinstance(item, tensor_type) and item.is_cuda:
                storage = item.untyped_storage()
                note(storage.data_ptr(), storage.nbytes())
                appends_without_tensor.pop(key, None)
            else:
                appends_without_tensor[key] = appends_without_tensor.get(key, 0) + 1
        except Exception:  # a tensor without storage (meta, sparse), a list emptied meanwhile
            pass
        return None

    events = monitoring.events
    monitoring.register_callback(tool, events.CALL, on_call)
    monitoring.register_callback(tool, events.C_RETURN, on_c_return)
    # C_RETURN comes only with C_RAISE (no callback: an append that raised took no reference).
    monitoring.set_events(tool, events.CALL | events.C_RETURN | events.C_RAISE)


class _TorchImportWatcher(object):
    """On sys.meta_path: finds `torch` as the finders after it would, and has `on_import(torch)`
    run as soon as torch's own import has finished (never when it failed). Every other import
    costs one string comparison."""

    def __init__(self, on_import):
        self.on_import = on_import
        self.searching = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self.searching:
            return None
        import importlib.util

        self.searching = True
        try:
            spec = importlib.util.find_spec(name)  # the rest of sys.meta_path, as import does
        finally:
            self.searching = False
        loader = getattr(spec, "loader", None)
        if loader is not None:
            try:
                self.run_after(loader)
            except Exception:  # a loader that takes no attribute: torch imports unobserved
                pass
        return spec

    def run_after(self, loader):
        exec_module = loader.exec_module
        watcher = self

        def exec_module_then_hook(module):
            exec_module(module)
            try:
                del loader.exec_module  # the loader's own method again
                sys.meta_path.remove(watcher)
            except (AttributeError, ValueError):
                pass
            watcher.on_import(module)

        # Named as importlib's own frames, so that a traceback of a failed `import torch` is cut
        # as it would be without this frame (Python trims importlib's frames).
        exec_module_then_hook.__code__ = exec_module_then_hook.__code__.replace(
            co_filename="<frozen importlib._bootstrap_external>")
        loader.exec_module = exec_module_then_hook


def _watch_torch():
    import ctypes

    if sys.version_info < (3, 8):
        return  # no PyTorch there (and code.replace() is 3.8's)
    c = ctypes
    note_oom = _entry_point(
        "gpumem_note_out_of_memory",
        (c.c_int32, c.c_int32, c.c_uint64, c.c_int32, c.c_uint64, c.c_uint64, c.c_uint64,
         c.c_uint64, c.c_char_p))
    note_backward = _entry_point("gpumem_note_backward", (c.c_uint64, c.c_int32))
    if note_oom is None or note_backward is None:
        return  # not under gpumem

    def hook(torch):
        _hook_torch(torch, note_oom, note_backward)

    if "torch" in sys.modules:
        hook(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportWatcher(hook))


def _hook_torch(torch, note_oom, note_backward):
    """Right after `import torch`: each hook on its own, any failure a warning at most."""
    hooks = (
        ("the allocator's out-of-memory observer", lambda: _attach_oom_observer(torch, note_oom)),
        ("out-of-memory errors", lambda: _watch_oom_errors(torch, note_oom)),
        ("backward passes", lambda: _wrap_backward(torch, note_backward)),
    )
    for what, install in hooks:
        try:
            install()
        except Exception as error:
            _warn("%s of PyTorch will not be recorded: %s" % (what, error))


def _attach_oom_observer(torch, note_oom):
    """PyTorch's native caching allocator calls its out-of-memory observers with (device, bytes
    requested, the fraction cap or else the device's total, the driver's free bytes) right before
    it raises OutOfMemoryError, its lock released: asking it for its figures is safe there."""
    cuda = torch.cuda
    attach = torch._C._cuda_attach_out_of_memory_observer
    memory_allocated, memory_reserved = cuda.memory_allocated, cuda.memory_reserved

    def on_out_of_memory(device, requested, limit, device_free):
        # An error escaping from here would replace the OutOfMemoryError: none may.
        try:
            allocated, reserved = memory_allocated(device), memory_reserved(device)
        except Exception:
            allocated = reserved = 0
        try:
            note_oom(device, 1, requested, 0, allocated, reserved, limit, device_free, None)
        except Exception:
            pass

    def attach_observer():
        try:
            attach(on_out_of_memory)
        except Exception:
            pass  # the cudaMallocAsync backend has no observers: its errors are seen raised

    # Attaching initialises CUDA: wait until the program does (run at once if it did already).
    # A queued call that raised would fail the program's CUDA initialisation: this one cannot.
    cuda._lazy_call(attach_observer)


def _watch_oom_errors(torch, note_oom):
    oom_type = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError

    def details(error):
        return _oom_error_details(torch.cuda, error)

    if sys.version_info >= (3, 12):
        _watch_created(oom_type, details, note_oom)
    else:
        _watch_uncaught(oom_type, details, note_oom)


def _watch_created(oom_type, details, note_oom):
    """From 3.12 on, CPython makes the exception object where it is raised (PyErr_SetString from
    C++ too), so OutOfMemoryError's __init__ runs under the stack that raised it, caught or not:
    noted there. Every other exception costs nothing (sys.monitoring's RAISE events would cost
    each one a callback in every frame it unwinds through: tests/bench/run_python_raise_cost.sh).
    One made otherwise (unpickled, copied) is noted too."""
    import functools

    initialize = oom_type.__init__

    @functools.wraps(initialize)
    def __init__(self, *args, **kwargs):
        initialize(self, *args, **kwargs)
        try:
            note_oom(*details(self))
        except Exception:
            pass

    oom_type.__init__ = __init__


def _watch_uncaught(oom_type, details, note_oom):
    """Before 3.12: an OutOfMemoryError that ends the program or a thread, through the exception
    hooks (chained to those in place). The stack it was raised in is gone by then: it is replayed
    from the traceback (_replay_traceback) for gpumem to read."""
    import threading

    def note_uncaught(error, traceback):
        arguments = details(error)

        def note_replayed(chain, depth):
            note_oom(*arguments)

        _replay_traceback(traceback, note_replayed)

    def excepthook(kind, error, traceback):
        if kind is oom_type:
            try:
                note_uncaught(error, traceback)
            except Exception:
                pass
        previous_excepthook(kind, error, traceback)

    def thread_excepthook(arguments):
        if arguments.exc_type is oom_type:
            try:
                note_uncaught(arguments.exc_value, arguments.exc_traceback)
            except Exception:
                pass
        previous_thread_excepthook(arguments)

    previous_excepthook = sys.excepthook
    previous_thread_excepthook = threading.excepthook
    sys.excepthook = excepthook
    threading.excepthook = thread_excepthook


# One replayed frame: calls the next function of the chain (a lambda: its call is on its first line).
_REPLAY_STEP = (lambda chain, depth: chain[depth](chain, depth + 1)).__code__


def _replay_traceback(traceback, last):
    """Calls last(chain, depth) under one Python frame per entry of `traceback` (innermost on top,
    at most _MAX_REPLAYED_FRAMES), each running a code object with that entry's file, function
    and line, so that the stack gpumem reads is the one the error was raised in."""
    import types

    frames = []
    while traceback is not None:
        code = traceback.tb_frame.f_code
        fields = {"co_filename": code.co_filename, "co_name": code.co_name,
                  "co_firstlineno": max(1, traceback.tb_lineno or code.co_firstlineno)}
        if hasattr(code, "co_qualname"):  # what gpumem reads as the function from 3.11 on
            fields["co_qualname"] = code.co_qualname
        frames.append(types.FunctionType(_REPLAY_STEP.replace(**fields), {}))
        traceback = traceback.tb_next
    chain = frames[-_MAX_REPLAYED_FRAMES:] + [last]
    chain[0](chain, 1)


def _oom_error_details(cuda, error):
    """gpumem_note_out_of_memory's arguments for a raised OutOfMemoryError, best effort: the
    request and device from its message ("Tried to allocate 1.00 GiB. GPU 0 ...", or the
    cudaMallocAsync backend's "device 0 ... Requested : 1.00 GiB"), the rest from torch.cuda."""
    import re

    message = str(error)
    size = re.search(r"(?:Tried to allocate|Requested\s*:)\s*([0-9.]+) (bytes|B|KiB|MiB|GiB|TiB)\b",
                     message)
    requested = int(round(float(size.group(1)) * _SIZE_UNITS[size.group(2)])) if size else 0
    device = re.search(r"\b(?:GPU|device) (\d+)", message)
    device = int(device.group(1)) if device else -1
    allocated = reserved = limit = free = 0
    # Only where CUDA is initialised already: asking would initialise it (an error raised by hand).
    try:
        if cuda.is_initialized():
            if device < 0:
                device = cuda.current_device()
            allocated, reserved = cuda.memory_allocated(device), cuda.memory_reserved(device)
            free, total = cuda.mem_get_info(device)
            fraction = getattr(cuda, "get_per_process_memory_fraction", None)
            limit = int(total * fraction(device)) if fraction else total
    except Exception:
        pass
    return (device, 2, requested, 1 if size else 0, allocated, reserved, limit, free,
            message.encode("utf-8", "replace")[:2048])


def _wrap_backward(torch, note_backward):
    """torch.autograd.backward and .grad (Tensor.backward calls the former by attribute lookup),
    wrapped to note each pass's begin, called straight from the wrapper so that the stack gpumem
    records ends at the caller's line, and its end, also when it raised."""
    import functools
    import itertools

    passes = itertools.count(1)  # next() of it is atomic under the GIL: threads get their own

    def noted(run):
        @functools.wraps(run)
        def run_noted(*args, **kwargs):
            number = next(passes)
            note_backward(number, 0)
            try:
                return run(*args, **kwargs)
            finally:
                note_backward(number, 1)

        return run_noted

    autograd = torch.autograd
    autograd.backward = noted(autograd.backward)
    autograd.grad = noted(autograd.grad)


def _install_observer():
    import os

    for switch, install in (("GPUMEM_PYTHON_HOLDERS", _watch_list_appends),
                            ("GPUMEM_PYTHON_TORCH", _watch_torch)):
        if os.environ.get(switch) == "0":
            continue
        try:
            install()
        except Exception as error:
            _warn("the Python observer is off (%s): %s" % (switch, error))


def _run_shadowed_sitecustomize():
    """Runs the sitecustomize.py that this one hides (Debian's, a virtualenv's), if any."""
    import os

    try:
        import importlib.machinery
        import importlib.util
    except ImportError:
        return  # Python 2: nothing to chain to

    here = os.path.dirname(os.path.abspath(__file__))
    others = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


# Never break the program being recorded (plain syntax: any Python may read this file).
try:
    _install_observer()
except Exception as error:
    _warn("the Python observer is off: %s" % error)
_run_shadowed_sitecustomize()
