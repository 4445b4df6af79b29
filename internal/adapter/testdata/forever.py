# Trains "forever" (argv[1] steps, default 1000) on the CPU, printing a line
# after each optimizer step without flushing. Everything the adapter's stop
# after BATCHFIT_STEPS steps must skip prints a marker: the rest of the
# loop, a finally block, the code after the loop, the program's atexit
# handler.
import atexit
import sys

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
atexit.register(lambda: print("program atexit ran"))
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 8)
try:
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
        print("step", step + 1)
except BaseException as e:
    print("caught", type(e).__name__)
    raise
finally:
    print("finally ran")
print("after loop")
