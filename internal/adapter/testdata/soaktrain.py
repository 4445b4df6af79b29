# Trains until batchfit's SIGTERM ends a --soak: optimizer steps on the CPU
# (AdamW; with the stand-in torch, its Optimizer), a flushed line after each
# so that the test knows how far the program got. Everything the stop must
# skip prints a marker: the rest of the loop, a finally block, the code
# after the loop, the program's atexit handler.
import atexit

import torch

atexit.register(lambda: print("program atexit ran", flush=True))
if hasattr(torch, "nn"):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(16, 8)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
else:
    step = torch.optim.Optimizer().step

try:
    for n in range(10**7):
        step()
        print("step", n + 1, flush=True)
except BaseException as e:
    print("caught", type(e).__name__, flush=True)
    raise
finally:
    print("finally ran", flush=True)
print("after loop", flush=True)
