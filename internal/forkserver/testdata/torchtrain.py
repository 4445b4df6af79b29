# A tiny real torch training loop: the adapter stops it after BATCHFIT_STEPS.
import sys

import torch

size = int(sys.argv[1])
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    loss = model(torch.randn(size, 8)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step", step, flush=True)
