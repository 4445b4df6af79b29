"""A convolutional net whose cuDNN workspaces matter: torchvision's
ResNet-50 with cudnn.benchmark on, channels-last, in float16 autocast,
trained for a few steps on random images at --batch-size."""

import argparse
import os

import torch
import torchvision

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, required=True)
p.add_argument("--steps", type=int, default=int(os.environ.get("BATCHFIT_STEPS") or 3))
a = p.parse_args()
torch.backends.cudnn.benchmark = True
model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scaler = torch.amp.GradScaler()
x = torch.randn(a.batch_size, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (a.batch_size,), device="cuda")
for _ in range(a.steps):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
