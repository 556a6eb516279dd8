"""train_cnn: a small deterministic convolutional network trained on random images.

Usage: python3 train_cnn.py [STEPS] [--batch N] [--memory-limit BYTES] [--seconds S]
       (default 10 steps of batch 32; --seconds: train for S seconds instead; needs a CUDA device)

Fixed seed, fixed shapes, cuDNN in deterministic mode without autotuning, so two runs ask for the
same tensors (cuDNN may still pick workspaces by free memory: compare the runs' figures before
trusting that). The last line of output is one JSON object with PyTorch's own memory figures and,
when --memory-limit capped the allocator and it ran out, where.
"""

import sys

import torch
import torch.nn.functional as F

from harness import option, train_main

BATCH = 32
CLASSES = 10


def make_training(device, batch=BATCH):
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(64, 128, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(128 * 16 * 16, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, CLASSES),
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train_step(step):
        generator = torch.Generator().manual_seed(step)
        x = torch.randn(batch, 3, 64, 64, generator=generator).to(device)
        y = torch.randint(0, CLASSES, (batch,), generator=generator).to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)  # line: forward
        loss.backward()
        optimizer.step()

    return train_step


def main():
    batch = option(sys.argv, "--batch", BATCH, int)
    return train_main(lambda device: make_training(device, batch), __file__, batch=batch)


if __name__ == "__main__":
    sys.exit(main())
