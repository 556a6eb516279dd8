"""samples/pytorch/train_mlp.py's training steps, timed for the benchmarks.

Usage: python3 tests/bench/train_mlp_timed.py [STEPS]   (default 20; needs a CUDA device)

The last line of output is the sample's JSON line plus the step times: the mean step after step 0
(which pays for lazy initialisation), the median of 25-step windows (each timed apart between two
synchronizes, so a burst of noise moves one window, not the figure), the main thread's CPU time per
step and all threads' (PyTorch's autograd thread runs the backward pass).

Under the benchmarks' build of gpumem (libgpumem_bench.so preloaded, tests/bench/
run_step_time_toggle.sh) the windows alternate recording off, on, on, off, ... (ABBA: each adjacent
pair holds one of each, so a drift of the machine cancels) and the line also carries each pair's
ratio on / off; GPUMEM_BENCH_TOGGLE_AA=1 keeps the "on" windows paused too: the method's own bias
(A/A control). Under tests/bench/pc_sampler.cc (PC_SAMPLER_GATED=1) only the steps are sampled.
"""

import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples",
                                "pytorch"))

import torch  # noqa: E402

from harness import memory_report, steps_argument  # noqa: E402
from train_mlp import make_training  # noqa: E402

WINDOW = 25  # steps per timed window


def recording_switch():
    """Under libgpumem_bench.so: a function that pauses (False) and resumes (True) recording; None
    under the shipped libgpumem.so (it has no switch) or without gpumem."""
    setter = getattr(ctypes.CDLL(None), "gpumem_bench_set_recording", None)
    if setter is None:
        return None
    setter.argtypes = [ctypes.c_int]
    setter.restype = None
    control = os.environ.get("GPUMEM_BENCH_TOGGLE_AA") == "1"
    return lambda on: setter(1 if on and not control else 0)


def profiler_gate():
    """Under tests/bench/pc_sampler.cc: its switch, so that only the steps are sampled, not the
    import of torch; a no-op otherwise."""
    gate = getattr(ctypes.CDLL(None), "pc_sampler_enable", None)
    if gate is None:
        return lambda on: None
    gate.argtypes = [ctypes.c_int]
    return lambda on: gate(1 if on else 0)


def recording_in_window(index):
    return index % 4 in (1, 2)  # off, on, on, off, off, on, on, off, ...


def toggle_figures(windows):
    """The ratio on / off of each adjacent pair of windows (2k, 2k+1), wall and process CPU."""
    ratios = {"wall": [], "cpu": []}
    for k in range(0, len(windows) - 1, 2):
        first, second = windows[k], windows[k + 1]
        on, off = (first, second) if first["on"] else (second, first)
        ratios["wall"].append(on["ms"] / off["ms"])
        ratios["cpu"].append(on["cpu_ms"] / off["cpu_ms"])
    return {
        "toggle_pairs": len(ratios["wall"]),
        "toggle_wall_ratios": [round(r, 4) for r in ratios["wall"]],
        "toggle_cpu_ratios": [round(r, 4) for r in ratios["cpu"]],
    }


class Clock:
    """Wall, main-thread CPU and process CPU time since a start."""

    def __init__(self):
        self.wall = time.perf_counter()
        self.thread_cpu = time.thread_time()
        self.process_cpu = time.process_time()

    def per_step_ms(self, steps):
        return {
            "ms": (time.perf_counter() - self.wall) * 1000 / steps,
            "thread_cpu_ms": (time.thread_time() - self.thread_cpu) * 1000 / steps,
            "cpu_ms": (time.process_time() - self.process_cpu) * 1000 / steps,
        }


def timed_steps(train_step, steps, switch, profile):
    """Runs the steps; returns the whole run's per-step times (from step 1) and each window's."""
    train_step(0)  # lazy initialisation, not timed
    torch.cuda.synchronize()
    if switch:
        switch(recording_in_window(0))
    profile(True)
    whole = window = Clock()
    windows = []
    for step in range(1, steps):
        train_step(step)
        if step % WINDOW == 0:
            torch.cuda.synchronize()
            windows.append(dict(window.per_step_ms(WINDOW), on=recording_in_window(len(windows))))
            if switch:
                switch(recording_in_window(len(windows)))
            window = Clock()
    torch.cuda.synchronize()
    profile(False)
    return whole.per_step_ms(max(steps - 1, 1)), windows


def main():
    steps = steps_argument(sys.argv, 20)
    switch = recording_switch()
    run, windows = timed_steps(make_training(torch.device("cuda")), steps, switch,
                               profiler_gate())
    window_ms = sorted(w["ms"] for w in windows)
    median_ms = window_ms[len(window_ms) // 2] if window_ms else run["ms"]
    extra = toggle_figures(windows) if switch else {}
    print(memory_report(steps=steps, step_ms=round(run["ms"], 4),
                        step_ms_median_window=round(median_ms, 4),
                        step_cpu_ms=round(run["thread_cpu_ms"], 4),
                        step_process_cpu_ms=round(run["cpu_ms"], 4), **extra))


if __name__ == "__main__":
    main()
