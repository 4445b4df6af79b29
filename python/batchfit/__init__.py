"""batchfit's Python side: the PyTorch adapter of the batchfit batch-size finder.

The batchfit binary embeds this package and, for every trial, puts its start-up
hook (batchfit/_hook/sitecustomize.py) on PYTHONPATH; a trial needs no code
change. This module holds the small public API that trial code may use; it
imports only the standard library, never torch.

Every trial imports this module, so it imports nothing but os: the API that
runs the batchfit binary from Python (batchfit.search, demo, doctor and their
result types, in batchfit.api) is imported on first use, and so is
batchfit.batch_size (batchfit.size), the one line a training script adds to
search itself and train at the answer.
"""

import os

# The annotations below are strings and typing is imported for type checkers
# only (mypy takes any TYPE_CHECKING as true): importing batchfit in a trial
# loads nothing but os.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, List
del TYPE_CHECKING

__all__ = [
    "__version__", "REPORT_ENV", "report_path", "in_trial", "batch_size",
    "search", "demo", "doctor", "Result", "Run", "Trial", "Peaks", "GPU", "Margin", "Throughput",
    "DoctorReport", "Finding", "BatchfitError",
]

# A source tree's; scripts/wheel writes the release's version here in its
# PEP 440 form (docs/versions.md).
__version__ = "0.0.0.dev0"

#: The environment variable that names a trial's private report file.
REPORT_ENV = "BATCHFIT_REPORT"


def report_path() -> "str | None":
    """The report file of the current batchfit trial, or None when the process
    does not run as a batchfit trial."""
    return os.environ.get(REPORT_ENV) or None


def in_trial() -> bool:
    """Whether the process runs as a batchfit trial."""
    return report_path() is not None


_API = frozenset(__all__[5:])


def __getattr__(name: str) -> "Any":
    if name == "batch_size":
        # A trial that calls it loads batchfit.size alone (os and sys).
        from batchfit import size

        return size.batch_size
    if name in _API:
        from batchfit import api

        return getattr(api, name)
    raise AttributeError(f"module 'batchfit' has no attribute {name!r}")


def __dir__() -> "List[str]":
    return sorted(set(globals()) | _API | {"batch_size"})
