"""A few DistributedDataParallel steps of a small model, one process per GPU, for the GPU check
(tests/gpu/run.sh records it under `torchrun --nproc_per_node 2`): NCCL's communicator buffers
(cuMem* through cudaGetDriverEntryPoint, exported to and imported by the peer rank) next to
PyTorch's caching allocator. Prints one JSON line per rank with PyTorch's own peak.
"""
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> int:
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)
    ).cuda()
    ddp = DistributedDataParallel(model, device_ids=[local_rank])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for _ in range(5):
        optimizer.zero_grad()
        loss = ddp(torch.randn(256, 1024, device="cuda")).square().mean()
        loss.backward()
        optimizer.step()
    torch.cuda.synchronize()
    print(json.dumps({"rank": dist.get_rank(),
                      "max_memory_reserved": torch.cuda.max_memory_reserved()}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
