"""amp: float16 autocast training with torch.amp.GradScaler; prints each loss and the scale."""

import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def main():
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)
    ).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    # A short growth interval: the scale grows, and once the float16 gradients overflow, backs off.
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0**14, growth_interval=2)
    for step in range(10):
        generator = torch.Generator().manual_seed(step)
        x = torch.randn(128, 64, generator=generator).cuda()
        y = x[:, :1] * 3.0
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = F.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        print(f"step {step}: loss {loss.item():.4f} scale {scaler.get_scale():.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
