"""The batches a torch DataLoader hands over: each batch its iterators
yield is noted for the step that consumes it (batches). The iterators'
__next__ is wrapped at class level, so that every loader's iterator goes
through it, subclasses' (accelerate's DataLoaderShard, Lightning's) too."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

from batchfit._runtime import batches


def dataloader_imported(module: ModuleType) -> None:
    """torch.utils.data.dataloader is imported: wrap its iterators'
    __next__, once."""
    iter_cls = getattr(module, "_BaseDataLoaderIter", None)
    if not isinstance(iter_cls, type):
        return
    original_next = iter_cls.__dict__.get("__next__")
    if not callable(original_next) or getattr(original_next, "_batchfit_wrapped", False):
        return
    orig_next: Callable[..., Any] = original_next

    def __next__(self: Any) -> Any:
        batch = orig_next(self)
        _note(batch, False)
        return batch

    __next__._batchfit_wrapped = True  # type: ignore[attr-defined]
    __next__.__qualname__ = getattr(orig_next, "__qualname__", "__next__")
    __next__.__doc__ = getattr(orig_next, "__doc__", None)
    setattr(iter_cls, "__next__", __next__)


def _note(batch: Any, worst: bool) -> None:
    try:
        batches.note(batches.shapes_of(batch), "dataloader", worst)
    except Exception:
        pass
