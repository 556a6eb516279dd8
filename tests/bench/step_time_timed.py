"""A training sample's steps, timed for the benchmarks: samples/pytorch/train_mlp.py (--model mlp,
the default) or samples/pytorch/train_transformer.py (--model transformer; --amp: its bfloat16
autocast).

Usage: python3 tests/bench/step_time_timed.py [STEPS] [--model mlp|transformer] [--amp]
           [--window N] [--recorders [--seconds S]] [--dry-run]
       (default 20 steps; windows of 25 steps for the MLP, 10 for the transformer; needs a CUDA
       device, but for --dry-run)

The last line of output is the sample's JSON line plus the step times: the mean step after step 0
(which pays for lazy initialisation), the median of the windows (each timed apart between two
synchronizes, so a burst of noise moves one window, not the figure), the main thread's CPU time per
step and all threads' (PyTorch's autograd thread runs the backward pass).

Under the benchmarks' build of gpumem (libgpumem_bench.so preloaded, tests/bench/
run_step_time_toggle.sh) the windows alternate recording off, on, on, off, ... (ABBA: each adjacent
pair holds one of each, so a drift of the machine cancels) and the line also carries each pair's
ratio on / off; GPUMEM_BENCH_TOGGLE_AA=1 keeps the "on" windows paused too: the method's own bias
(A/A control). Under tests/bench/pc_sampler.cc (PC_SAMPLER_GATED=1) only the steps are sampled.

--recorders (tests/bench/run_recorders_side_by_side.sh) compares gpumem with PyTorch's own memory
recorder in one process, in four conditions: A nothing (gpumem paused), B gpumem recording, C
torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="all") with gpumem
paused, D the same with stacks="python". After one untimed window in each, the windows come in
blocks of four, in the orders of a Williams design (ABDC, BCAD, CDBA, DACB, again and again: each
condition follows each other equally often, so what one leaves behind reaches all alike); each
block gives B/A, C/A and D/A of its own windows. The recorder is turned off after each window
(enabled=None). A condition that cannot be entered (PyTorch's recorder raises, as under
backend:cudaMallocAsync; B without libgpumem_bench.so) is left out of every block and named with
its reason. STEPS bounds the timed steps (whole blocks), or --seconds S: blocks until S seconds
have passed. GPUMEM_BENCH_TOGGLE_AA=1 keeps B paused too (the A/A control). The line carries
recorder_blocks, recorder_wall_ratios and recorder_cpu_ratios ({"B": [...], "C": ..., "D": ...}),
recorder_window_ms (each condition's median window, per step), recorder_unavailable ({condition:
why}) and aa_control.

--dry-run runs all of it without torch or a GPU: a step is a short sleep whose length depends on
the condition, PyTorch's recorder raises under backend:cudaMallocAsync as the real one does, and
gpumem's switch is a stand-in (for the tests of the scripts around this one).
"""

import argparse
import contextlib
import ctypes
import json
import os
import statistics
import sys
import time

SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples",
                       "pytorch")
WINDOW_STEPS = {"mlp": 25, "transformer": 10}  # the transformer's step takes ~10x the MLP's
# A Williams design for four conditions: in these four orders every condition comes once in each
# place and follows every other exactly once.
WILLIAMS_ORDERS = ("ABDC", "BCAD", "CDBA", "DACB")
TORCH_STACKS = {"C": "all", "D": "python"}  # the conditions with PyTorch's recorder on


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="step_time_timed.py",
                                     description="a training sample's steps, timed")
    parser.add_argument("steps", nargs="?", type=int, default=20, metavar="STEPS")
    parser.add_argument("--model", choices=sorted(WINDOW_STEPS), default="mlp")
    parser.add_argument("--amp", action="store_true",
                        help="the transformer under bfloat16 autocast")
    parser.add_argument("--window", type=int, help="steps per timed window")
    parser.add_argument("--recorders", action="store_true",
                        help="gpumem against PyTorch's recorder, four conditions")
    parser.add_argument("--seconds", type=float, help="with --recorders: blocks for S seconds")
    parser.add_argument("--dry-run", action="store_true", help="no torch, no GPU: a stand-in step")
    args = parser.parse_args(argv)
    if args.amp and args.model != "transformer":
        parser.error("--amp: only with --model transformer")
    if args.seconds is not None and not args.recorders:
        parser.error("--seconds: only with --recorders")
    if args.seconds is not None and args.seconds <= 0:
        parser.error("--seconds: must be positive")
    if args.window is None:
        args.window = WINDOW_STEPS[args.model]
    if args.window < 1 or args.steps < 1:
        parser.error("STEPS and --window: at least 1")
    return args


def recording_switch():
    """Under libgpumem_bench.so: a function that pauses (False) and resumes (True) recording; None
    under the shipped libgpumem.so (it has no switch) or without gpumem."""
    setter = getattr(ctypes.CDLL(None), "gpumem_bench_set_recording", None)
    if setter is None:
        return None
    setter.argtypes = [ctypes.c_int]
    setter.restype = None
    return lambda on: setter(1 if on and not aa_control() else 0)


def aa_control():
    return os.environ.get("GPUMEM_BENCH_TOGGLE_AA") == "1"


def profiler_gate():
    """Under tests/bench/pc_sampler.cc: its switch, so that only the steps are sampled, not the
    import of torch; a no-op otherwise."""
    gate = getattr(ctypes.CDLL(None), "pc_sampler_enable", None)
    if gate is None:
        return lambda on: None
    gate.argtypes = [ctypes.c_int]
    return lambda on: gate(1 if on else 0)


def torch_recorder(torch):
    """PyTorch's memory recorder as one switch: stacks "all" or "python" turns it on (raises where
    the allocator has none), None off."""
    record = torch.cuda.memory._record_memory_history

    def switch(stacks):
        if stacks is None:
            record(enabled=None)
        else:
            record(enabled="all", context="all", stacks=stacks)

    return switch


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


# ----- the A/B toggle (run_step_time_toggle.sh) -----

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


def timed_steps(train_step, steps, window_steps, switch, synchronize, gate):
    """Runs the steps (`gate` on after step 0); returns the whole run's per-step times (from step
    1) and each window's."""
    train_step(0)  # lazy initialisation, not timed
    synchronize()
    if switch:
        switch(recording_in_window(0))
    gate(True)
    whole = window = Clock()
    windows = []
    for step in range(1, steps):
        train_step(step)
        if step % window_steps == 0:
            synchronize()
            windows.append(dict(window.per_step_ms(window_steps),
                                on=recording_in_window(len(windows))))
            if switch:
                switch(recording_in_window(len(windows)))
            window = Clock()
    synchronize()
    gate(False)
    return whole.per_step_ms(max(steps - 1, 1)), windows


def measure_toggle(args, train_step, synchronize, switch, gate=lambda on: None):
    run, windows = timed_steps(train_step, args.steps, args.window, switch, synchronize, gate)
    window_ms = sorted(w["ms"] for w in windows)
    median_ms = window_ms[len(window_ms) // 2] if window_ms else run["ms"]
    extra = toggle_figures(windows) if switch else {}
    return dict(steps=args.steps, step_ms=round(run["ms"], 4),
                step_ms_median_window=round(median_ms, 4),
                step_cpu_ms=round(run["thread_cpu_ms"], 4),
                step_process_cpu_ms=round(run["cpu_ms"], 4), **extra)


# ----- gpumem against PyTorch's recorder (run_recorders_side_by_side.sh) -----

class Conditions:
    """Puts the process in one of the conditions A-D, and remembers those it could not enter."""

    def __init__(self, gpumem_switch, recorder):
        self.gpumem_switch = gpumem_switch  # None: no libgpumem_bench.so
        self.recorder = recorder
        self.recorder_on = False
        self.unavailable = {}
        if gpumem_switch is None:
            self.unavailable["B"] = ("no gpumem_bench_set_recording (libgpumem_bench.so not "
                                     "preloaded)")

    def enter(self, condition):
        """Switches to `condition`; False, with everything off, where it cannot be entered."""
        if self.recorder_on:
            self.recorder(None)
            self.recorder_on = False
        if self.gpumem_switch:
            self.gpumem_switch(condition == "B")
        if condition in self.unavailable:
            return False
        if condition in TORCH_STACKS:
            try:
                self.recorder(TORCH_STACKS[condition])
            except Exception as error:  # PyTorch raises RuntimeError; it need not stay so
                self.unavailable[condition] = first_line(error)
                return False
            self.recorder_on = True
        return True


def first_line(error):
    lines = str(error).strip().splitlines()
    return lines[0][:200] if lines else type(error).__name__


def run_blocks(train_step, window_steps, conditions, synchronize, more_blocks):
    """One untimed window in each condition (which finds those that cannot be entered), then
    blocks of windows in the Williams orders while more_blocks(blocks done, seconds since the first
    began) says so. Returns the blocks ({condition: per-step figures}) and the steps run."""
    step = 1  # step 0 ran before: lazy initialisation

    def window_in(condition):
        nonlocal step
        if not conditions.enter(condition):
            return None
        synchronize()
        clock = Clock()
        for _ in range(window_steps):
            train_step(step)
            step += 1
        synchronize()
        return clock.per_step_ms(window_steps)

    for condition in "ABCD":
        window_in(condition)
    blocks = []
    began = time.perf_counter()
    while more_blocks(len(blocks), time.perf_counter() - began):
        order = WILLIAMS_ORDERS[len(blocks) % len(WILLIAMS_ORDERS)]
        figures = {condition: window_in(condition) for condition in order}
        blocks.append({condition: f for condition, f in figures.items() if f is not None})
    conditions.enter("A")
    return blocks, step


def block_budget(args):
    """more_blocks for run_blocks: STEPS in whole blocks (at least one), or --seconds."""
    if args.seconds is not None:
        return lambda done, elapsed: done == 0 or elapsed < args.seconds
    blocks = max(1, args.steps // (len(WILLIAMS_ORDERS[0]) * args.window))
    return lambda done, elapsed: done < blocks


def recorder_figures(blocks, unavailable):
    """Per condition B-D, each block's window / the same block's A window (wall and process CPU),
    and every condition's median window."""
    wall = {condition: [] for condition in "BCD" if condition not in unavailable}
    cpu = {condition: [] for condition in wall}
    for block in blocks:
        base = block.get("A")
        for condition in wall:
            if base is not None and condition in block:
                wall[condition].append(round(block[condition]["ms"] / base["ms"], 4))
                if base["cpu_ms"] > 0:
                    cpu[condition].append(round(block[condition]["cpu_ms"] / base["cpu_ms"], 4))
    window_ms = {}
    for condition in "ABCD":
        times = [block[condition]["ms"] for block in blocks if condition in block]
        if times:
            window_ms[condition] = round(statistics.median(times), 4)
    return {"recorder_blocks": len(blocks), "recorder_wall_ratios": wall,
            "recorder_cpu_ratios": cpu, "recorder_window_ms": window_ms,
            "recorder_unavailable": dict(sorted(unavailable.items())), "aa_control": aa_control()}


def measure_recorders(args, train_step, synchronize, switch, recorder, gate=lambda on: None):
    conditions = Conditions(switch, recorder)
    train_step(0)  # lazy initialisation, not timed
    synchronize()
    gate(True)
    blocks, steps = run_blocks(train_step, args.window, conditions, synchronize,
                               block_budget(args))
    gate(False)
    return dict(steps=steps, **recorder_figures(blocks, conditions.unavailable))


# ----- the run -----

class DryRun:
    """What --dry-run puts in torch's place: a step is a sleep, longer with a recorder on."""
    STEP_S = {"A": 0.0002, "B": 0.000204, "C": 0.0003, "D": 0.00024}

    def __init__(self):
        self.condition = "A"
        self.gpumem_on = False
        self.torch_stacks = None

    def train_step(self, step):
        del step
        key = "B" if self.gpumem_on else {"all": "C", "python": "D"}.get(self.torch_stacks, "A")
        time.sleep(self.STEP_S[key])

    def gpumem_switch(self, on):
        self.gpumem_on = on and not aa_control()

    def recorder(self, stacks):
        if "backend:cudaMallocAsync" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
            raise RuntimeError("cudaMallocAsync does not yet support recordHistory. If you need "
                               "it, please file an issue describing your use case.")
        self.torch_stacks = stacks

    def report(self, **figures):
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        return json.dumps(dict(figures, dry_run=True, PYTORCH_CUDA_ALLOC_CONF=conf), sort_keys=True)


def sample_training(args, torch):
    """The model's step function and the context its runs use."""
    device = torch.device("cuda")
    if args.model == "transformer":
        import train_transformer
        return (train_transformer.make_training(device, amp=args.amp),
                train_transformer.math_attention())
    import train_mlp
    return train_mlp.make_training(device), contextlib.nullcontext()


def main(argv):
    args = parse_arguments(argv)
    shape = dict(model=args.model, amp=args.amp, window_steps=args.window)
    if args.dry_run:
        dry = DryRun()
        figures = (measure_recorders(args, dry.train_step, lambda: None, dry.gpumem_switch,
                                     dry.recorder) if args.recorders else
                   measure_toggle(args, dry.train_step, lambda: None, dry.gpumem_switch))
        print(dry.report(**dict(shape, **figures)))
        return 0
    import torch
    sys.path.insert(0, SAMPLES)
    from harness import memory_report
    train_step, context = sample_training(args, torch)
    with context:
        if args.recorders:
            figures = measure_recorders(args, train_step, torch.cuda.synchronize,
                                        recording_switch(), torch_recorder(torch), profiler_gate())
        else:
            figures = measure_toggle(args, train_step, torch.cuda.synchronize, recording_switch(),
                                     profiler_gate())
    print(memory_report(**dict(shape, **figures)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
