"""oom_capped: a batch that grows until PyTorch refuses it under a memory cap, with no failing
driver call: the caching allocator enforces set_per_process_memory_fraction by itself.

Usage: python3 oom_capped.py [FRACTION]   (needs a CUDA device; FRACTION default 0.05)

Caps the process at FRACTION of the device, then keeps batches of 2, 4, 8, ... MiB (powers of
two: PyTorch's message gives each exactly) in a list until torch.OutOfMemoryError. Prints
`caught torch.OutOfMemoryError: <first line of the message>` and `requested=<bytes>` (the request
the message names), and exits 0; it exits 3 if the error never came. gpumem's Python observer
records the error (`framework_oom` in `gpumem dump`) with that request, at the line marked below.
"""

import sys

import torch

import harness

MIB = 1 << 20


def grow(kept):
    size = 2 * MIB
    while size <= torch.cuda.mem_get_info()[1]:
        kept.append(torch.empty(size, dtype=torch.uint8, device="cuda"))  # line: oom
        size *= 2


def main():
    fraction = float(sys.argv[1]) if len(sys.argv) > 1 else 0.05
    torch.cuda.set_per_process_memory_fraction(fraction)
    kept = []
    try:
        grow(kept)
    except torch.OutOfMemoryError as error:
        print(f"kept {len(kept)} batches under a cap of {fraction} of the device", file=sys.stderr)
        harness.print_out_of_memory(error)
        return 0
    print(f"no torch.OutOfMemoryError under a cap of {fraction}", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
