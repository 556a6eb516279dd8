"""growing_list: a training loop that keeps every step's logits on the device "to look at later".

Usage: python3 growing_list.py [STEPS] [--fixed]   (default 100 steps; needs a CUDA device)

Each step appends the batch's logits (BATCH x CLASSES float32 = 12 MiB, still attached to the
autograd graph) to `history`, so device memory grows by 12 MiB a step and none of it is released
until the script ends: about 1.2 GiB after 100 steps. --fixed keeps `logits.detach().cpu()`
instead, the fix a user would make: each step's device logits are then freed when `logits` is
bound to the next step's. Both modes run the same lines; `# advise:` marks the two a check names
(the line that allocates what is kept, and the line that keeps it). The last line of output is one
JSON object with PyTorch's own memory figures.
"""

import sys

import torch
import torch.nn.functional as F

from harness import memory_report, steps_argument

BATCH = 1024
FEATURES = 256
HIDDEN = 1024
CLASSES = 3072


def make_batch(step, device):
    """The same batch for the same step in every run, generated on the host."""
    generator = torch.Generator().manual_seed(step)
    x = torch.randn(BATCH, FEATURES, generator=generator)
    y = torch.randint(0, CLASSES, (BATCH,), generator=generator)
    return x.to(device), y.to(device)


def main():
    steps = steps_argument(sys.argv, 100)
    fixed = "--fixed" in sys.argv
    # What the loop keeps of each step's logits: the device tensor itself, or a copy on the host.
    keep = (lambda logits: logits.detach().cpu()) if fixed else (lambda logits: logits)
    torch.manual_seed(0)
    device = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES)
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    history = []
    for step in range(steps):
        x, y = make_batch(step, device)
        optimizer.zero_grad(set_to_none=True)
        logits = model(x)  # advise: allocating line
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        history.append(keep(logits))  # advise: holder line
    torch.cuda.synchronize()
    kept = sum(t.numel() * t.element_size() for t in history if t.is_cuda)
    print(memory_report(steps=steps, fixed=fixed, kept_device_bytes=kept,
                        bytes_per_step=BATCH * CLASSES * 4))


if __name__ == "__main__":
    main()
