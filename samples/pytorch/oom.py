"""oom: allocate until PyTorch raises torch.OutOfMemoryError, then recover.

Usage: python3 oom.py   (needs a CUDA device)

Chunks of 1/16 of the device's memory are kept in a list until an allocation fails. The script
prints `caught torch.OutOfMemoryError: <first line of the message>` and `requested=<bytes>` (the
request the message names, as rounded there), and exits 0; it exits 3 if the error never came. The OOM post-mortem should show the failed request and the live chunks.
"""

import sys

import torch

import harness


def main():
    _, total = torch.cuda.mem_get_info()
    chunk = total // 16
    kept = []
    try:
        for _ in range(64):  # 16 chunks cannot fit: the device also holds the context
            kept.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))  # line: oom
    except torch.OutOfMemoryError as error:
        print(f"allocated {len(kept)} chunks of {chunk} bytes", file=sys.stderr)
        kept.clear()
        torch.cuda.empty_cache()
        harness.print_out_of_memory(error)
        return 0
    print(f"no torch.OutOfMemoryError after {len(kept)} chunks of {chunk} bytes", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
