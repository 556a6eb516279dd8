"""no_grad_eval: an evaluation loop without torch.no_grad() that keeps every batch's predictions.

Usage: python3 no_grad_eval.py [BATCHES] [--fixed]   (default 128 batches; needs a CUDA device)

Outside torch.no_grad() each forward records its autograd graph, and each prediction kept in
`preds` keeps that graph alive, with the activations it saved for a backward pass that never
comes: the hidden layer's output (BATCH x HIDDEN float32 = 16 MiB) per batch, about 2 GiB after
128 batches, idle until the script ends. --fixed runs the same loop under torch.no_grad(), the fix
a user would make: each batch's activations are freed as soon as the forward is done. Both modes
run the same lines; `# advise: forward line` marks the line that allocates what is kept. At the end
the predictions are used (torch.cat, argmax). The last line of output is one JSON object with
PyTorch's own memory figures.
"""

import contextlib
import sys

import torch

from harness import memory_report, steps_argument

BATCH = 1024
FEATURES = 16
HIDDEN = 4096
CLASSES = 10


def make_batch(index, device):
    """The same batch for the same index in every run, generated on the host."""
    generator = torch.Generator().manual_seed(index)
    return torch.randn(BATCH, FEATURES, generator=generator).to(device)


def main():
    batches = steps_argument(sys.argv, 128)
    fixed = "--fixed" in sys.argv
    torch.manual_seed(0)
    device = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES)
    ).to(device)
    model.eval()
    preds = []
    with torch.no_grad() if fixed else contextlib.nullcontext():
        for index in range(batches):
            x = make_batch(index, device)
            preds.append(model(x))  # advise: forward line
    classes = torch.cat(preds).argmax(dim=1)
    counts = torch.bincount(classes, minlength=CLASSES).tolist()
    torch.cuda.synchronize()
    print(memory_report(batches=batches, fixed=fixed, predicted_classes=counts))


if __name__ == "__main__":
    main()
