# Trains with the fake torch: two optimizers (only the first one's steps are
# timed), then optionally ends on torch.OutOfMemoryError. "probe" first looks
# for torch the way libraries check that it is installed.
import importlib.util
import sys

if "probe" in sys.argv:
    importlib.util.find_spec("torch")
    importlib.util.find_spec("torch")

import torch  # noqa: E402

a, b = torch.optim.Optimizer(), torch.optim.Optimizer()
for _ in range(3):
    a.step()
    b.step()
print("synchronized:", torch.cuda.synchronized)
if "oom" in sys.argv:
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB")
