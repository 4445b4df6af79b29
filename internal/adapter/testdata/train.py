# A tiny CPU training loop: AdamW steps on a small model, printing a line per
# step, deterministic so that its stdout can be compared byte for byte.
import sys

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
x = torch.randn(32, 8)
y = torch.randn(32, 1)
for step in range(steps):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print("step %d loss %.6f" % (step + 1, loss.item()))
print("cuda initialized:", torch.cuda.is_initialized())
