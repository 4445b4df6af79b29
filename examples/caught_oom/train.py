"""A PyTorch training script that can catch its own CUDA out-of-memory error.

What it does with the error is chosen by --on-oom:

    raise  let it escape: a traceback on stderr, exit status 1 (the default)
    exit0  skip the batch, as trainers that survive an OOM batch do: one line
           "step 2/3 batch 512 skipped" on stdout, nothing on stderr, and the
           run goes on and ends with exit status 0
    exit3  stop at once with exit status 3, printing nothing at all

The workload is a torchvision ResNet (resnet18 by default, weights=None) on
random uint8 224x224 images and random labels, fp16 autocast with a
GradScaler, AdamW, cross-entropy: the same kind of work as the SimCLR example,
smaller. A batch size that fits runs the same in all three forms; one that
does not is told apart only by the exit status and the streams above, so a
batch-size finder has to see the OOM itself to give the same answer for all
three.

    python train.py --batch-size 512 --steps 3 --on-oom exit0
    batchfit search -- python train.py --batch-size {} --on-oom exit3

The batch size defaults to $BATCHFIT_BATCH_SIZE and the step count to
$BATCHFIT_STEPS (else 3), which batchfit sets for every trial.
"""

import argparse
import contextlib
import os
import sys
import time

import torch
import torch.nn.functional as F
import torchvision

# ImageNet statistics, on the 0..255 scale of the uint8 images.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


def env_int(name, default):
    value = os.environ.get(name)
    return int(value) if value else default


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=int, default=env_int("BATCHFIT_BATCH_SIZE", None),
                   help="samples per step (default: $BATCHFIT_BATCH_SIZE)")
    p.add_argument("--steps", type=int, default=env_int("BATCHFIT_STEPS", 3),
                   help="optimizer steps (default: $BATCHFIT_STEPS, else 3)")
    p.add_argument("--on-oom", default="raise", choices=["raise", "exit0", "exit3"],
                   help="what to do with a CUDA out-of-memory error (default: raise)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   choices=["cuda", "cpu"], help="cuda when there is one, else cpu")
    p.add_argument("--arch", default="resnet18", choices=["resnet18", "resnet34", "resnet50"])
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--lr", type=float, default=1e-3)
    # For tests on a CPU, which cannot run out of GPU memory: raise
    # torch.cuda.OutOfMemoryError in every step whose batch is larger than N.
    p.add_argument("--simulate-oom-above", type=int, metavar="N", help=argparse.SUPPRESS)
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


def train_step(args, model, optimizer, scaler, autocast):
    """One optimizer step on a fresh random batch; returns the loss."""
    shape = (args.batch_size, 3, args.image_size, args.image_size)
    images = torch.randint(0, 256, shape, dtype=torch.uint8).to(args.device)
    labels = torch.randint(0, args.classes, (args.batch_size,)).to(args.device)
    if args.simulate_oom_above is not None and args.batch_size > args.simulate_oom_above:
        raise torch.cuda.OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate 2.00 GiB (simulated above batch size {args.simulate_oom_above})")
    mean = torch.tensor(MEAN, device=args.device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=args.device).view(1, 3, 1, 1)
    with autocast:
        loss = F.cross_entropy(model((images.float() - mean) / std), labels)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def main(argv=None):
    args = parse_args(argv)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("train.py: error: CUDA is not available (use --device cpu)")
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.arch)(weights=None, num_classes=args.classes).to(args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = make_scaler(enabled=cuda)
    # fp16 autocast on the GPU; CPU autocast knows only bf16, so the CPU runs
    # in float32.
    autocast = torch.autocast("cuda", dtype=torch.float16) if cuda else contextlib.nullcontext()
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        if args.on_oom == "raise":
            loss = train_step(args, model, optimizer, scaler, autocast)
        else:
            try:
                loss = train_step(args, model, optimizer, scaler, autocast)
            except torch.cuda.OutOfMemoryError:
                # Handled after the except block, so that the error's
                # traceback, and the tensors its frames hold, are gone first.
                loss = None
        if loss is None:
            if args.on_oom == "exit3":
                return 3
            optimizer.zero_grad(set_to_none=True)
            if cuda:
                torch.cuda.empty_cache()
            print(f"step {step}/{args.steps} batch {args.batch_size} skipped", flush=True)
            continue
        print(f"step {step}/{args.steps} batch {args.batch_size} loss {loss:.4f} {time.perf_counter() - start:.3f}s",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
