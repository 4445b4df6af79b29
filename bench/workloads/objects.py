"""A detector-style model whose memory grows with the number of objects in
a batch: a ResNet-18 backbone over 384 px images, and for every object box
RoIAlign features and a mask head (four 3x3 convolutions at 14x14, as Mask
R-CNN's), so that a batch's activations are the images' plus every
object's. Images hold 4 to 24 objects, one in ten 150 to 300; the loader
shuffles (seeded), and a batch's boxes are a list of tensors, one per image,
as torchvision's detection models take them. The whole program is one epoch
of --images images.

    python3 bench/workloads/objects.py --batch-size 16
"""

import argparse
import random

import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torchvision.ops import roi_align

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, required=True)
p.add_argument("--images", type=int, default=512)
p.add_argument("--image-size", type=int, default=384)
p.add_argument("--device", default="cuda")
a = p.parse_args()


class Scenes(torch.utils.data.Dataset):
    def __len__(self):
        return a.images

    def __getitem__(self, i):
        r = random.Random(i)
        n = r.randint(150, 300) if r.random() < 0.1 else r.randint(4, 24)
        g = torch.Generator().manual_seed(i)
        image = torch.rand(3, a.image_size, a.image_size, generator=g)
        xy = torch.rand(n, 2, generator=g) * (a.image_size - 64)
        boxes = torch.cat([xy, xy + 16 + torch.rand(n, 2, generator=g) * 48], dim=1)
        return image, boxes, torch.randint(0, 2, (n, 28, 28), generator=g).float()


def collate(items):
    images, boxes, masks = zip(*items)
    return torch.stack(images), list(boxes), list(masks)


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        r = torchvision.models.resnet18()
        self.backbone = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1, r.layer2, r.layer3)
        layers = []
        for _ in range(4):
            layers += [nn.Conv2d(256, 256, 3, padding=1), nn.ReLU()]
        self.mask_head = nn.Sequential(*layers, nn.ConvTranspose2d(256, 256, 2, 2), nn.ReLU(), nn.Conv2d(256, 1, 1))

    def forward(self, images, boxes):
        features = self.backbone(images)  # stride 16
        rois = roi_align(features.float(), boxes, output_size=14, spatial_scale=1 / 16, sampling_ratio=2)
        return self.mask_head(rois).squeeze(1)


torch.manual_seed(0)
loader = torch.utils.data.DataLoader(Scenes(), batch_size=a.batch_size, shuffle=True, collate_fn=collate,
                                     generator=torch.Generator().manual_seed(0))
model = Detector().to(a.device)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for step, (images, boxes, masks) in enumerate(loader, 1):
    images = images.to(a.device)
    boxes = [b.to(a.device) for b in boxes]
    target = torch.cat(masks).to(a.device)
    with torch.autocast(a.device, dtype=torch.bfloat16):
        logits = model(images, boxes)
    loss = F.binary_cross_entropy_with_logits(logits.float(), target)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print(f"step {step} objects {len(target)} loss {loss.item():.3f}", flush=True)
