"""The workload of the batch-size question batchfit was built for: SimCLR-style
contrastive training of a ResNet-50.

Each sample is two uint8 224x224 views, made on the CPU with torch.randint and
copied to the GPU with .cuda(), turned into normalized floats inside the model
wrapper, run under fp16 autocast with a GradScaler, and trained with AdamW on
an NT-Xent loss. A CUDA out-of-memory error is not caught: it ends the process,
so batchfit (and its hook) see it.

    python train.py --batch-size 256 --steps 3
    batchfit search -- python train.py --batch-size {}

The batch size defaults to $BATCHFIT_BATCH_SIZE and the step count to
$BATCHFIT_STEPS (else 2), which batchfit sets for every trial.
"""

import argparse
import contextlib
import os
import sys
import time

import torch
import torch.nn.functional as F
import torchvision

# ImageNet statistics, on the 0..255 scale of the uint8 views.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


class ModelWrapper(torch.nn.Module):
    """ResNet-50 trunk plus the SimCLR projection head. Takes uint8 images and
    normalizes them itself, so the batch crosses to the GPU as bytes."""

    def __init__(self, out_dim=128):
        super().__init__()
        self.backbone = torchvision.models.resnet50(weights=None)
        features = self.backbone.fc.in_features
        self.backbone.fc = torch.nn.Identity()
        self.head = torch.nn.Sequential(
            torch.nn.Linear(features, features),
            torch.nn.ReLU(inplace=True),
            torch.nn.Linear(features, out_dim),
        )
        self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(STD).view(1, 3, 1, 1))

    def embed(self, images):
        x = (images.float() - self.mean) / self.std
        return self.head(self.backbone(x))

    def forward(self, batch):
        return self.embed(batch["aug1"]), self.embed(batch["aug2"])


def nt_xent(z1, z2, temperature=0.5):
    """The normalized temperature-scaled cross-entropy of SimCLR: each view's
    positive is the other view of the same sample, every other view in the
    batch is a negative."""
    z = F.normalize(torch.cat([z1, z2]).float(), dim=1)
    n = z1.shape[0]
    logits = z @ z.t() / temperature
    logits.fill_diagonal_(float("-inf"))
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)
    return F.cross_entropy(logits, targets)


def env_int(name, default):
    value = os.environ.get(name)
    return int(value) if value else default


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=int, default=env_int("BATCHFIT_BATCH_SIZE", None),
                   help="samples per step (default: $BATCHFIT_BATCH_SIZE)")
    p.add_argument("--steps", type=int, default=env_int("BATCHFIT_STEPS", 2),
                   help="optimizer steps (default: $BATCHFIT_STEPS, else 2)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cuda (default), or cpu for a smoke test")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--out-dim", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    args = p.parse_args(argv)
    if args.batch_size is None:
        p.error("--batch-size is required (or set BATCHFIT_BATCH_SIZE)")
    if args.batch_size < 1 or args.steps < 1:
        p.error("--batch-size and --steps must be positive")
    return args


def make_scaler(enabled):
    # torch.amp.GradScaler arrived in 2.3; torch.cuda.amp.GradScaler warns
    # from then on.
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


def main(argv=None):
    args = parse_args(argv)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("train.py: error: CUDA is not available (use --device cpu for a smoke test)")
    torch.manual_seed(0)
    # Under torchrun (--nproc_per_node=N) each rank trains on its own GPU with
    # DistributedDataParallel; --batch-size is per GPU.
    distributed = cuda and int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        torch.distributed.init_process_group("nccl")
    model = ModelWrapper(out_dim=args.out_dim).to(args.device)
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = make_scaler(enabled=cuda)
    shape = (args.batch_size, 3, args.image_size, args.image_size)
    # fp16 autocast on the GPU, as the original training script does; CPU autocast knows only
    # bf16, so a CPU smoke test runs in float32.
    autocast = torch.autocast("cuda", dtype=torch.float16) if cuda else contextlib.nullcontext()
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        batch = dict(
            aug1=torch.randint(0, 256, shape, dtype=torch.uint8),
            aug2=torch.randint(0, 256, shape, dtype=torch.uint8),
        )
        if cuda:
            batch = {k: v.cuda() for k, v in batch.items()}
        with autocast:
            z1, z2 = model(batch)
            loss = nt_xent(z1, z2)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scale = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        # The scaler skips the optimizer step when fp16 gradients overflowed;
        # say so, since AdamW's state then does not exist yet.
        skipped = " (step skipped: gradient overflow)" if scaler.get_scale() < scale else ""
        print("step %d/%d batch %d loss %.4f %.3fs%s" % (
            step, args.steps, args.batch_size, loss.item(), time.perf_counter() - start, skipped), flush=True)
    if distributed:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
