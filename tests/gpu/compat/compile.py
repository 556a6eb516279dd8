"""compile: torch.compile (Inductor, fresh cache) of a small model vs eager; exit 77: no Triton."""

import os
import sys
import tempfile


def main(cache):
    # A cache of its own, so that every run compiles (under gpumem too), not only the first one.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    try:
        import triton  # noqa: F401
    except ImportError as error:
        print(f"skipped: triton is not importable ({error})", file=sys.stderr)
        return 77
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 16)
    ).cuda()
    compiled = torch.compile(model)
    generator = torch.Generator().manual_seed(1)
    total = 0.0
    matches = True
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(32, 64, generator=generator).cuda()
            fast = compiled(x)
            matches &= torch.allclose(fast, model(x), rtol=1e-3, atol=1e-3)
            total += fast.double().sum().item()
    print(f"compiled forward, 3 batches: sum of outputs {total:.3f}")
    print(f"matches eager: {matches}")
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="gpumem-", ignore_cleanup_errors=True) as cache_dir:
        status = main(cache_dir)
    sys.exit(status)
