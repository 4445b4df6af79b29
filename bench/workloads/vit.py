"""A vision transformer (timm's ViT-B/16, untrained) trained for a few steps
on random images: the batch size is --batch-size."""

import argparse
import os

import timm
import torch

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, required=True)
p.add_argument("--steps", type=int, default=int(os.environ.get("BATCHFIT_STEPS") or 3))
a = p.parse_args()
model = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=1000).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(a.batch_size, 3, 224, 224, device="cuda")
y = torch.randint(0, 1000, (a.batch_size,), device="cuda")
for _ in range(a.steps):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
