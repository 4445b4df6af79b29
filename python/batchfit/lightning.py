"""A Lightning callback that trains at the batch size batchfit found.

    from batchfit.lightning import BatchSizeFromBatchfit
    trainer = L.Trainer(callbacks=[BatchSizeFromBatchfit("batchfit.json")])

or, with LightningCLI:

    python train.py fit --trainer.callbacks+=batchfit.lightning.BatchSizeFromBatchfit \\
        --trainer.callbacks.init_args.result batchfit.json

At setup for fit it reads the result (a file from `batchfit search --json`, a
run id or "latest"), refuses when it does not stand for this run (another
script or a changed one, other arguments, another GPU; see batchfit.apply),
and sets the batch size where Lightning's own BatchSizeFinder would: the
attribute batch_arg_name of the LightningModule, its hparams or the
datamodule.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from lightning.pytorch.utilities.parsing import lightning_getattr, lightning_hasattr, lightning_setattr

from batchfit import apply

__all__ = ["BatchSizeFromBatchfit"]


class BatchSizeFromBatchfit(Callback):
    """Sets the batch size batchfit found before fit builds its data loaders.

    result: a file written by `batchfit search --json`, a run id, or "latest".
    batch_arg_name: the attribute that holds the batch size ("batch_size").
    use: "answer" (the largest that ran) or "margin" (the largest with
    memory left free). force: use the result even when it does not match.
    """

    def __init__(self, result: str = "latest", batch_arg_name: str = "batch_size", use: str = "answer",
                 force: bool = False) -> None:
        super().__init__()
        self.result, self.batch_arg_name, self.use, self.force = result, batch_arg_name, use, force
        self.batch_size: int | None = None

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage != "fit":
            return
        run = apply.load(self.result)
        device = None
        root = trainer.strategy.root_device
        if root.type == "cuda":
            import torch

            props = torch.cuda.get_device_properties(root)
            device = (props.name, props.total_memory)
        for note in apply.check(run, device=device, force=self.force):
            rank_zero_warn(f"batchfit: {note}")
        size = apply.batch_size(run, self.use)
        if not lightning_hasattr(pl_module, self.batch_arg_name):
            raise AttributeError(f"batchfit: neither the LightningModule, its hparams nor the datamodule has "
                                 f"{self.batch_arg_name!r}; pass batch_arg_name=")
        before = lightning_getattr(pl_module, self.batch_arg_name)
        lightning_setattr(pl_module, self.batch_arg_name, size)
        self.batch_size = size
        rank_zero_info(f"batchfit: {self.batch_arg_name} {before} -> {size} ({apply.describe(run)})")
