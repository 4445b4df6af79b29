"""Lightning callbacks that train at the batch size batchfit finds.

    from batchfit.lightning import BatchFit
    trainer = L.Trainer(callbacks=[BatchFit(memory_limit="24GiB")])

BatchFit searches this very program, as batchfit.batch_size() does, and
trains at the answer in the same run. BatchSizeFromBatchfit applies a
result found before:

    from batchfit.lightning import BatchSizeFromBatchfit
    trainer = L.Trainer(callbacks=[BatchSizeFromBatchfit("batchfit.json")])

or, with LightningCLI:

    python train.py fit --trainer.callbacks+=batchfit.lightning.BatchSizeFromBatchfit \\
        --trainer.callbacks.init_args.result batchfit.json

At setup for fit BatchSizeFromBatchfit reads the result (a file from
`batchfit search --json`, a run id or "latest"), refuses when it does not stand for this run (another
script or a changed one, other arguments, another GPU; see batchfit.apply),
and sets the batch size where Lightning's own BatchSizeFinder would: the
attribute batch_arg_name of the LightningModule, its hparams or the
datamodule. Both set it the same way.

BatchFit searches when it is made, not at setup: Lightning starts CUDA
before it calls any callback hook of fit. Trainer._run calls
strategy.setup_environment() first, whose CUDAAccelerator.setup_device
calls torch.cuda.set_device (which initialises CUDA) and, on Ampere and
later, torch.cuda.get_device_capability; the setup hook comes after. A
search from there would share the card with this process's CUDA context,
so batchfit.batch_size() refuses it. Making the Trainer starts nothing on
the GPU (Lightning counts GPUs through NVML): a callback made with it, or
by LightningCLI, searches on a GPU of its own
(docs/design/one-line-search.md).
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from lightning.pytorch.utilities.parsing import lightning_getattr, lightning_hasattr, lightning_setattr

from batchfit import apply, size

__all__ = ["BatchFit", "BatchSizeFromBatchfit"]


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
        self.batch_size = apply.batch_size(run, self.use)
        set_batch_size(pl_module, self.batch_arg_name, self.batch_size, apply.describe(run))


class BatchFit(Callback):
    """Searches this program's batch size with batchfit when it is made
    (batchfit.batch_size(): in a batchfit trial, the trial's size) and sets
    it at setup for fit, before the data loaders are built.

    batch_arg_name: the attribute that holds the batch size ("batch_size").
    memory_limit: the card to size for ("24GiB"); None for this GPU.
    steps: optimizer steps a trial runs (None: batchfit's default).
    Other options are batchfit search's, as batchfit.batch_size() takes
    them: BatchFit(memory_limit="24GiB", timeout=600). memory_limit and
    steps are named so that LightningCLI can pass them
    (--trainer.callbacks.init_args.memory_limit 24GiB).
    """

    def __init__(self, batch_arg_name: str = "batch_size", memory_limit: str | None = None, steps: int | None = None,
                 **options: Any) -> None:
        super().__init__()
        self.batch_arg_name = batch_arg_name
        self.batch_size: int = size.batch_size(memory_limit=memory_limit, steps=steps, **options)

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage == "fit":
            set_batch_size(pl_module, self.batch_arg_name, self.batch_size, "batchfit")


def set_batch_size(pl_module: Any, name: str, value: int, source: str) -> None:
    """Sets the batch size where Lightning's BatchSizeFinder does, through
    the same lightning_setattr: the attribute name on each of the
    LightningModule, its hparams, the datamodule and its hparams that
    has it."""
    if not lightning_hasattr(pl_module, name):
        raise AttributeError(f"batchfit: neither the LightningModule, its hparams nor the datamodule has "
                             f"{name!r}; pass batch_arg_name=")
    before = lightning_getattr(pl_module, name)
    lightning_setattr(pl_module, name, value)
    rank_zero_info(f"batchfit: {name} {before} -> {value} ({source})")
