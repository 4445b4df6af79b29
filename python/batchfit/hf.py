"""A Hugging Face TrainerCallback that trains at the batch size batchfit
found.

    from batchfit.hf import BatchSizeFromBatchfit
    trainer = Trainer(model, args, train_dataset=ds, callbacks=[BatchSizeFromBatchfit("batchfit.json")])

It reads the result (a file from `batchfit search --json`, a run id or
"latest") when it is made, refuses when the result does not stand for this
run (another script or a changed one, other arguments, another GPU; see
batchfit.apply), and sets per_device_train_batch_size. The Trainer fixes its
batch size in __init__ just before it calls on_init_end, so the callback
also sets it on the Trainer that is calling it; on_train_begin checks that
the data loader really uses it and stops the run otherwise, so a run never
trains at a size nobody chose.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from transformers import TrainerCallback

from batchfit import apply

__all__ = ["BatchSizeFromBatchfit"]


class BatchSizeFromBatchfit(TrainerCallback):
    """result: a file written by `batchfit search --json`, a run id, or
    "latest". use: "answer" (the largest that ran) or "margin" (the largest
    with memory left free). force: use the result even when it does not
    match."""

    def __init__(self, result: str = "latest", use: str = "answer", force: bool = False) -> None:
        self.run = apply.load(result)
        self.use, self.force = use, force
        self.batch_size = apply.batch_size(self.run, use)

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        device = None
        import torch

        if torch.cuda.is_available() and args.device.type == "cuda":
            props = torch.cuda.get_device_properties(args.device)
            device = (props.name, props.total_memory)
        for note in apply.check(self.run, device=device, force=self.force):
            print(f"batchfit: {note}", file=sys.stderr)
        before = args.per_device_train_batch_size
        args.per_device_train_batch_size = self.batch_size
        trainer = _calling_trainer()
        if trainer is not None:
            trainer._train_batch_size = args.train_batch_size
        if state.is_world_process_zero:
            print(f"batchfit: per_device_train_batch_size {before} -> {self.batch_size} ({apply.describe(self.run)})",
                  file=sys.stderr)

    def on_train_begin(self, args: Any, state: Any, control: Any, train_dataloader: Any = None, **kwargs: Any) -> None:
        got = _loader_batch_size(train_dataloader)
        if got is not None and got != self.batch_size:
            raise RuntimeError(f"batchfit: the Trainer's data loader uses batch size {got}, not {self.batch_size}: "
                               f"pass per_device_train_batch_size={self.batch_size} in TrainingArguments")


def _calling_trainer() -> Any:
    """The transformers Trainer whose __init__ is calling on_init_end, found
    on the stack: the Trainer copies the batch size from its arguments
    before it calls any callback."""
    from transformers import Trainer

    f: FrameType | None = sys._getframe(1)
    while f is not None:
        obj = f.f_locals.get("self")
        if isinstance(obj, Trainer):
            return obj
        f = f.f_back
    return None


def _loader_batch_size(loader: Any) -> int | None:
    if loader is None:
        return None
    for obj in (loader, getattr(loader, "batch_sampler", None), getattr(getattr(loader, "batch_sampler", None), "batch_sampler", None)):
        size = getattr(obj, "batch_size", None)
        if isinstance(size, int):
            return size
    return None
