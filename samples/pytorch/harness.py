"""What the training samples share: PyTorch's own memory figures as one JSON line, an optional cap
on the caching allocator (--memory-limit), and a step loop that reports an out-of-memory error
instead of dying of it, so `gpumem whatif` can be checked against what really happened.
"""

import contextlib
import json
import os
import re
import sys
import time
import traceback

import torch


# The units of PyTorch's format_size(), in which its out-of-memory messages give the request.
_SIZE_UNITS = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def requested_bytes(message):
    """The request an out-of-memory message names, in bytes (as rounded there): "Tried to allocate
    1.00 GiB" (the native allocator), "Requested : 1.00 GiB" (cudaMallocAsync). None if neither."""
    match = re.search(r"(?:Tried to allocate|Requested\s*:)\s*([0-9.]+) (bytes|B|KiB|MiB|GiB|TiB)\b",
                      message)
    return round(float(match.group(1)) * _SIZE_UNITS[match.group(2)]) if match else None


def print_out_of_memory(error):
    """What oom.py and oom_capped.py print of the error they caught: its first line and the
    request it names (requested=<bytes>)."""
    print(f"caught torch.OutOfMemoryError: {(str(error).splitlines() or [''])[0]}")
    print(f"requested={requested_bytes(str(error))}")


def memory_report(**extra):
    """torch.cuda.memory_stats() figures, the allocator backend and its settings, as JSON."""
    stats = torch.cuda.memory_stats()
    report = {
        "allocation.all.allocated": stats.get("allocation.all.allocated", 0),
        "allocation.all.freed": stats.get("allocation.all.freed", 0),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "num_alloc_retries": stats.get("num_alloc_retries", 0),
        "num_ooms": stats.get("num_ooms", 0),
        "allocator_backend": torch.cuda.get_allocator_backend(),
        "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    }
    report.update(extra)
    return json.dumps(report, sort_keys=True)


def option(argv, name, default=None, kind=str):
    """The value after `name` in argv, or the default."""
    return kind(argv[argv.index(name) + 1]) if name in argv else default


def steps_argument(argv, default):
    return int(argv[1]) if len(argv) > 1 and not argv[1].startswith("-") else default


def apply_memory_limit(argv):
    """--memory-limit BYTES: torch.cuda.set_per_process_memory_fraction(BYTES / total memory),
    the cap `gpumem whatif --device-memory BYTES` models. Returns the limit and the cap PyTorch
    enforces (fraction x total in floating point, truncated: it can fall a byte short of BYTES),
    or (None, None)."""
    limit = option(argv, "--memory-limit", kind=int)
    if limit is None:
        return None, None
    total = torch.cuda.get_device_properties(0).total_memory
    fraction = limit / total
    torch.cuda.set_per_process_memory_fraction(fraction)
    return limit, int(fraction * total)


def step_numbers(steps, seconds=None):
    """0, 1, ..., steps - 1; with `seconds`, instead as many as start within that many seconds of
    the first (at least one)."""
    if seconds is None:
        yield from range(steps)
        return
    start = time.monotonic()
    step = 0
    while step == 0 or time.monotonic() - start < seconds:
        yield step
        step += 1


def run_steps(train_step, steps, script, seconds=None):
    """Runs train_step over step_numbers(steps, seconds); on torch.OutOfMemoryError stops and
    describes it: the step, the bytes PyTorch tried to allocate, and the innermost line of `script`
    in the traceback. With `seconds`, the outcome also holds the number of steps run (steps_run)."""
    ran = 0
    for step in step_numbers(steps, seconds):
        try:
            train_step(step)
        except torch.OutOfMemoryError as error:
            message = (str(error).splitlines() or [""])[0]
            requested = requested_bytes(str(error))
            lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__)
                     if os.path.basename(frame.filename) == os.path.basename(script)]
            outcome = {"oom": True, "oom_step": step, "oom_requested_bytes": requested,
                       "oom_line": lines[-1] if lines else None, "oom_message": message}
            return outcome if seconds is None else dict(outcome, steps_run=step + 1)
        ran += 1
    torch.cuda.synchronize()
    return {"oom": False} if seconds is None else {"oom": False, "steps_run": ran}


def train_main(make_training, script, context=None, **shape):
    """The command line of the training samples: [STEPS] (default 10) [--seconds S] (train until S
    seconds have passed instead: the JSON line's steps is then the number run, and it has seconds)
    [--memory-limit BYTES]; runs the steps (inside `context`, if given) and prints the JSON line,
    with the run's `shape` (its batch size, ...). Returns the exit code."""
    steps = steps_argument(sys.argv, 10)
    seconds = option(sys.argv, "--seconds", kind=float)
    limit, allocator_limit = apply_memory_limit(sys.argv)
    with context if context is not None else contextlib.nullcontext():
        outcome = run_steps(make_training(torch.device("cuda")), steps, script, seconds)
    length = {"steps": steps}
    if seconds is not None:
        length = {"steps": outcome.pop("steps_run"), "seconds": seconds}
    print(memory_report(**length, memory_limit=limit, allocator_limit=allocator_limit, **shape,
                        **outcome))
    return 0
