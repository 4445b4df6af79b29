# Trains with the fake torch: two optimizers (only the first one's steps are
# timed), then optionally ends on torch.OutOfMemoryError.
import sys

import torch

a, b = torch.optim.Optimizer(), torch.optim.Optimizer()
for _ in range(3):
    a.step()
    b.step()
print("synchronized:", torch.cuda.synchronized)
if sys.argv[1:] == ["oom"]:
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB")
