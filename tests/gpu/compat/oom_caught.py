"""oom_caught: torch.OutOfMemoryError over a memory fraction and over the device, caught."""

import sys

import torch


def allocate(size, what):
    """Whether allocating `size` bytes raised torch.OutOfMemoryError (whose text is not printed)."""
    try:
        block = torch.empty(size, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        print(f"{what}: caught OutOfMemoryError")
        return True
    del block
    print(f"{what}: no OutOfMemoryError")
    return False


def main():
    _, total = torch.cuda.mem_get_info()
    torch.cuda.set_per_process_memory_fraction(0.05)
    allocate(total // 10, "over the memory fraction")  # refused by PyTorch's allocator itself
    torch.cuda.set_per_process_memory_fraction(1.0)
    torch.cuda.empty_cache()
    over_device = allocate(2 * total, "over the device")  # refused by the driver
    torch.cuda.empty_cache()
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(256, 256, generator=generator).cuda()
    b = torch.randn(256, 256, generator=generator).cuda()
    print(f"after the errors: matmul sum {(a @ b).double().sum().item():.2f}")
    return 0 if over_device else 1


if __name__ == "__main__":
    sys.exit(main())
