"""leak_train: train_mlp.py with the classic planted leak.

Usage: python3 leak_train.py [STEPS]   (default 20; needs a CUDA device)

Each step appends the hidden activation (BATCH x HIDDEN float32 = 256 KiB, still attached to the
autograd graph) to a list "to look at later", so device memory grows by 262144 bytes per step and
none of it is released until the script ends. The fix is `history.append(hidden.detach().cpu())`
or `loss.item()`. The last line of output is train_mlp's JSON plus the leak's size.
"""

import sys

import torch
import torch.nn.functional as F

from train_mlp import BATCH, HIDDEN, make_batch, make_model, memory_report


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    torch.backends.cudnn.benchmark = False
    device = torch.device("cuda")
    body, head = make_model(device)
    params = list(body.parameters()) + list(head.parameters())
    optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    history = []
    for step in range(steps):
        x, y = make_batch(step, device)
        optimizer.zero_grad(set_to_none=True)
        hidden = body(x)
        loss = F.cross_entropy(head(hidden), y)
        loss.backward()
        optimizer.step()
        history.append(hidden)  # the leak: a device tensor kept for every step
    torch.cuda.synchronize()
    leaked = sum(t.numel() * t.element_size() for t in history)
    print(
        memory_report(
            steps=steps,
            history_len=len(history),
            leaked_bytes=leaked,
            leaked_bytes_per_step=BATCH * HIDDEN * 4,
        )
    )


if __name__ == "__main__":
    main()
