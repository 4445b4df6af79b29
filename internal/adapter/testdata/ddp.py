# DDP on the CPU (gloo) for the step limit: every rank trains "forever" and
# prints a marker after its loop that must never appear when the adapter
# stops the ranks; argv[1] is the number of steps (default 1000). Started once
# per rank with RANK, WORLD_SIZE and INIT_METHOD (a file:// URL) set.
import os
import sys

import torch
import torch.distributed as dist

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
dist.init_process_group("gloo", init_method=os.environ["INIT_METHOD"],
                        rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
rank = dist.get_rank()
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 8)
for step in range(steps):
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()
    print("rank %d step %d" % (rank, step + 1))
print("rank %d after loop" % rank)
dist.destroy_process_group()
