"""ddp: DistributedDataParallel on 2 GPUs (torchrun --nproc_per_node 2); only rank 0 prints."""

import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


def main():
    rank, world = int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    torch.use_deterministic_algorithms(True)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)
    ).cuda()
    ddp = DistributedDataParallel(model, device_ids=[rank])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    for step in range(5):
        x = torch.randn(64, 32, generator=generator).cuda()
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(ddp(x), x[:, :1] * 2.0)
        loss.backward()
        optimizer.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        if rank == 0:
            print(f"step {step}: mean loss over {world} ranks {mean_loss.item() / world:.4f}")
    checksum = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum().reshape(1)
    checksums = [torch.zeros_like(checksum) for _ in range(world)]
    dist.all_gather(checksums, checksum)
    if rank == 0:
        equal = all(torch.equal(c, checksums[0]) for c in checksums)
        print(f"parameter checksum {checksum.item():.4f}, equal on all ranks: {equal}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
