"""train_mlp: a small deterministic PyTorch training run that reports torch's own memory numbers.

Usage: python3 train_mlp.py [STEPS] [--summary FILE]   (default 20; needs a CUDA device)

--summary FILE writes torch.cuda.memory_summary() at the end to FILE, for comparing with
`gpumem report --summary` of the same run.

Fixed seed, fixed shapes, no cuDNN autotuning: two runs allocate the same sequence of tensors, so
what gpumem records can be compared with what PyTorch counts itself. The last line of output is
one JSON object with torch.cuda.memory_stats() numbers, the allocator backend and
PYTORCH_CUDA_ALLOC_CONF. Under `backend:cudaMallocAsync` PyTorch leaves the allocation counts at 0
(they belong to its native allocator); gpumem then sees every tensor as cudaMallocAsync.
"""

import ctypes
import os
import sys
import time

import torch
import torch.nn.functional as F

from harness import memory_report  # noqa: F401 (leak_train.py takes it from here too)

BATCH = 64
INPUTS = 512
HIDDEN = 1024
CLASSES = 10
WINDOW = 25  # steps per timed window


def make_model(device):
    torch.manual_seed(0)
    body = torch.nn.Sequential(
        torch.nn.Linear(INPUTS, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.ReLU(),
    ).to(device)
    head = torch.nn.Linear(HIDDEN, CLASSES).to(device)
    return body, head


def make_batch(step, device):
    """The same batch for the same step in every run, generated on the host."""
    generator = torch.Generator().manual_seed(step)
    x = torch.randn(BATCH, INPUTS, generator=generator)
    y = torch.randint(0, CLASSES, (BATCH,), generator=generator)
    return x.to(device), y.to(device)


def recording_switch():
    """With GPUMEM_BENCH_TOGGLE=1 under gpumem: a function that pauses (False) and resumes (True)
    recording, for tests/bench/run_step_time_toggle.sh; None otherwise."""
    if os.environ.get("GPUMEM_BENCH_TOGGLE") != "1":
        return None
    try:
        setter = ctypes.CDLL(None).gpumem_bench_set_recording
    except AttributeError:
        return None
    setter.argtypes = [ctypes.c_int]
    # GPUMEM_BENCH_TOGGLE_AA=1: the "on" windows stay paused too: the method's own bias (A/A).
    control = os.environ.get("GPUMEM_BENCH_TOGGLE_AA") == "1"
    if setter(1) != 1:
        return None  # the library refuses: GPUMEM_BENCH_TOGGLE was not set when it started
    return lambda on: setter(1 if on and not control else 0)


def profiler_gate():
    """Under tests/bench/pc_sampler.cc (PC_SAMPLER_GATED=1): its switch, so that only the steps
    are sampled, not the import of torch; a no-op otherwise."""
    try:
        gate = ctypes.CDLL(None).pc_sampler_enable
    except AttributeError:
        return lambda on: None
    gate.argtypes = [ctypes.c_int]
    return lambda on: gate(1 if on else 0)


def toggle_figures(windows):
    """Windows alternate A B B A ... (recording off, on, on, off): each adjacent pair (2k, 2k+1)
    holds one of each, so a drift of the machine cancels; the ratio of each pair is on / off."""
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


def recording_in_window(index):
    return index % 4 in (1, 2)  # off, on, on, off, off, on, on, off, ...


def make_training(device):
    """The model, its optimizer and one training step, as every script here runs them."""
    torch.backends.cudnn.benchmark = False
    body, head = make_model(device)
    params = list(body.parameters()) + list(head.parameters())
    optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9)

    def train_step(step):
        x, y = make_batch(step, device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(head(body(x)), y)
        loss.backward()
        optimizer.step()

    return train_step


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else 20
    summary_file = sys.argv[sys.argv.index("--summary") + 1] if "--summary" in sys.argv else None
    device = torch.device("cuda")
    train_step = make_training(device)
    started = None
    cpu_started = 0.0
    process_cpu_started = 0.0
    # Windows of WINDOW steps, timed apart (a synchronize at each end): their median is what a
    # benchmark compares, so a burst of noise on the machine moves one window, not the result.
    window_started = 0.0
    window_cpu_started = 0.0
    windows_ms = []
    switch = recording_switch()
    profile = profiler_gate()
    toggled = []  # with a switch: each window's wall and process CPU time per step, and its mode
    for step in range(steps):
        if step == 1:  # time the steady state: step 0 pays for lazy initialisation
            torch.cuda.synchronize()
            if switch:
                switch(recording_in_window(0))
            profile(True)
            started = window_started = time.perf_counter()
            cpu_started = time.thread_time()
            process_cpu_started = window_cpu_started = time.process_time()
        train_step(step)
        if step >= 1 and step % WINDOW == 0:
            torch.cuda.synchronize()
            now = time.perf_counter()
            windows_ms.append((now - window_started) * 1000 / WINDOW)
            if switch:
                cpu_now = time.process_time()
                toggled.append({"on": recording_in_window(len(toggled)), "ms": windows_ms[-1],
                                "cpu_ms": (cpu_now - window_cpu_started) * 1000 / WINDOW})
                switch(recording_in_window(len(toggled)))
                window_cpu_started = time.process_time()
            window_started = time.perf_counter()
    torch.cuda.synchronize()
    profile(False)
    step_ms = (time.perf_counter() - started) * 1000 / (steps - 1) if started else 0.0
    # The main thread's own CPU time per step: what recording adds on the thread that launches,
    # without the time the machine gave to others.
    step_cpu_ms = (time.thread_time() - cpu_started) * 1000 / (steps - 1) if started else 0.0
    # All threads' CPU time per step: the autograd engine's thread runs the backward pass.
    step_process_cpu_ms = (time.process_time() - process_cpu_started) * 1000 / (steps - 1) if started else 0.0
    if summary_file:
        with open(summary_file, "w") as out:
            out.write(torch.cuda.memory_summary())
    windows_ms.sort()
    window_ms = windows_ms[len(windows_ms) // 2] if windows_ms else step_ms
    extra = toggle_figures(toggled) if switch else {}
    print(memory_report(steps=steps, step_ms=round(step_ms, 4), step_ms_median_window=round(window_ms, 4),
                        step_cpu_ms=round(step_cpu_ms, 4), step_process_cpu_ms=round(step_process_cpu_ms, 4),
                        **extra))


if __name__ == "__main__":
    main()
