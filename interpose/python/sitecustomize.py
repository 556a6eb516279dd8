"""gpumem's Python observer: which line keeps CUDA memory alive.

`gpumem record` puts this directory first on PYTHONPATH, so Python imports this file at start-up.
Under gpumem (libgpumem.so preloaded) on CPython 3.12+, it watches `list.append` through
sys.monitoring and tells gpumem whenever a CUDA tensor is appended to a list: the classic
training-loop leak (`history.append(loss)`) is then reported at the line of the append, besides
the line that allocated the memory. Anywhere else it does nothing. Then it runs the
sitecustomize this one shadows, if there is one.

Cost: every call site is looked at once and switched off unless it calls list.append in the
program's own code (not the standard library's, not an installed package's); an append site that
has not appended a CUDA tensor in its first 64 calls is switched off too.
"""

import sys


def _install_observer():
    import os

    if sys.version_info < (3, 12) or os.environ.get("GPUMEM_PYTHON_HOLDERS") == "0":
        return  # sys.monitoring is 3.12's
    import ctypes

    try:
        note = ctypes.CDLL(None).gpumem_note_python_holder
    except (OSError, AttributeError):
        return  # not under gpumem
    note.argtypes = (ctypes.c_uint64, ctypes.c_uint64)
    note.restype = None
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
    sys.stderr.write("gpumem: warning: the Python observer is off: %s\n" % error)
_run_shadowed_sitecustomize()
