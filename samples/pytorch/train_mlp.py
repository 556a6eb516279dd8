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

import sys

import torch
import torch.nn.functional as F

from harness import memory_report, option, steps_argument  # leak_train.py takes memory_report here

BATCH = 64
INPUTS = 512
HIDDEN = 1024
CLASSES = 10


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
    steps = steps_argument(sys.argv, 20)
    summary_file = option(sys.argv, "--summary")
    train_step = make_training(torch.device("cuda"))
    for step in range(steps):
        train_step(step)
    torch.cuda.synchronize()
    if summary_file:
        with open(summary_file, "w") as out:
            out.write(torch.cuda.memory_summary())
    print(memory_report(steps=steps))


if __name__ == "__main__":
    main()
