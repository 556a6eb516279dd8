"""kernel_count: how many kernels train_mlp.py's steps launch, as torch.profiler counts them.

Usage: python3 kernel_count.py STEPS [--profile FIRST LAST]

Runs STEPS training steps of train_mlp.py. With --profile, torch.profiler (CUDA activity, i.e.
CUPTI through Kineto) records steps FIRST..LAST-1 and the last line of output is one JSON object
with the number of GPU kernels it saw in them. Without it, the script just runs, so that gpumem's
launch events of a run of LAST steps minus those of a run of FIRST steps can be set against the
profiler's count (the steps are deterministic, so each launches the same kernels).
"""

import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from train_mlp import make_training


def is_kernel(event):
    """A GPU kernel, not a memcpy or memset (which gpumem does not count as launches)."""
    if event.device_type != torch.autograd.DeviceType.CUDA:
        return False
    return not event.name.startswith(("Memcpy", "Memset", "Memory"))


def main():
    steps = int(sys.argv[1])
    first = last = None
    if len(sys.argv) == 5 and sys.argv[2] == "--profile":
        first, last = int(sys.argv[3]), int(sys.argv[4])
    device = torch.device("cuda")
    train_step = make_training(device)
    kernels = None
    step = 0
    while step < steps:
        if step == first:
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as profiler:
                for _ in range(last - first):
                    train_step(step)
                    step += 1
                torch.cuda.synchronize()
            kernels = sum(1 for event in profiler.events() if is_kernel(event))
            continue
        train_step(step)
        step += 1
    torch.cuda.synchronize()
    print(json.dumps({"steps": steps, "profiled_steps": [first, last], "profiler_kernels": kernels}))


if __name__ == "__main__":
    main()
