"""dataloader: training fed by a DataLoader with 2 worker processes and pinned memory."""

import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402


class Synthetic(Dataset):
    """Sample i is the same in whichever worker makes it."""

    def __len__(self):
        return 256

    def __getitem__(self, index):
        x = torch.randn(16, generator=torch.Generator().manual_seed(index))
        return x, x.sum(0, keepdim=True) * 0.5


def main():
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)
    ).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(Synthetic(), batch_size=32, shuffle=True, num_workers=2, pin_memory=True,
                        generator=torch.Generator().manual_seed(0))
    pinned = True
    for epoch in range(2):
        total = 0.0
        for x, y in loader:
            pinned &= x.is_pinned() and y.is_pinned()
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch}: {len(loader)} batches, mean loss {total / len(loader):.4f}")
    print(f"batches pinned: {pinned}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
