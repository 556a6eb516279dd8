import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(rank)
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda(), device_ids=[rank])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(20):
    x = torch.randn(128, 512, device="cuda")
    loss = model(x).square().mean()
    opt.zero_grad(); loss.backward(); opt.step()
dist.all_reduce(loss)
if rank == 0: print(f"loss {loss.item():.5f}")
print(f"rank {rank} peak_reserved {torch.cuda.max_memory_reserved()}", flush=True)
dist.destroy_process_group()
