"""The shapes of the batches a trial's steps consumed, and whether they
varied: the exit event's "batches" object. A batch is noted where the
program takes it (a torch DataLoader iterator's batch, the outermost
module's forward arguments, a jitted JAX step's arguments) and bound to the
step that counts next.

A trial whose shapes vary and whose largest batches could not be run first
(see loader) is not stopped at BATCHFIT_STEPS: it goes on until the largest
batch seen has not grown for BATCHFIT_SHAPE_PATIENCE steps, or
BATCHFIT_SHAPE_SECONDS have passed since the stop was due, since its first
steps alone would understate the memory it needs. A trial of several
processes that step together (DDP, multi-process JAX) is never extended:
they must all stop at the same step."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any, Dict, List

WORST_CASE_ENV = "BATCHFIT_WORST_CASE"
PATIENCE_ENV = "BATCHFIT_SHAPE_PATIENCE"
SECONDS_ENV = "BATCHFIT_SHAPE_SECONDS"
BATCH_SIZE_ENV = "BATCHFIT_BATCH_SIZE"
DEFAULT_PATIENCE = 20
DEFAULT_SECONDS = 120.0

# Bounds that keep one event a reasonable single write and the walk over a
# batch cheap whatever it holds.
MAX_BATCHES = 1000
MAX_TENSORS = 16
_MAX_DEPTH = 6
_MAX_NODES = 256

Shapes = Dict[str, List[int]]


class BatchLog:
    """What the trial saw of its batches. One per process (log); a plain
    class for the reason State is one."""

    def __init__(self) -> None:
        self.source: str | None = None  # "dataloader", "forward" or "jit"
        self.pending: Shapes | None = None  # the batch the next step consumes
        self.pending_worst = False  # whether it is one of the loader's largest
        self.loader_fed = False  # see fed_by_loader
        self.loader_taken = False  # whether a step consumed a DataLoader batch
        self.step_source: str | None = None  # the source of the last step's batch
        self.shapes: list[Shapes] = []
        self.first: Shapes | None = None
        self.largest: Shapes | None = None
        self.largest_size = -1
        self.varied = False
        self.grew_at_step = 0
        # Set by loader: the largest batch it planned and whether its
        # planned batches vary.
        self.planned_largest: Shapes | None = None
        self.planned_varied = False
        self.worst_first = False  # whether a step consumed one of them
        self.worst_steps = 0
        self.why_not: str | None = None
        self.scan_seconds: float | None = None
        self.scanned_batches = 0
        self.extend_from: float | None = None  # when the stop was due
        self.extend_at = 0  # the step at which it was due
        self.bound: str | None = None


log = BatchLog()


def worst_case_on() -> bool:
    """BATCHFIT_WORST_CASE: anything but "0" (unset included) is on."""
    return os.environ.get(WORST_CASE_ENV, "1").strip() != "0"


def env_number(name: str, default: float) -> float:
    """A positive number from the environment, else default."""
    try:
        value = float(os.environ.get(name, "").strip())
    except ValueError:
        return default
    return value if value > 0 else default


def shapes_of(batch: Any, root: str = "batch", prefix: str = "", items: bool = False,
              limit: int = MAX_TENSORS) -> Shapes:
    """The shapes of the tensors in batch by their path: dict keys as they
    are, list and tuple positions as "0", "1", nested with "." after prefix;
    a bare tensor is prefix, or root without one. Anything with a tuple
    .shape is a tensor (torch, numpy, JAX), so no framework is imported.
    With items (a dataset's item before collation), a list of numbers counts
    as a 1-D tensor of its length, and so does a string in an item that
    holds no tensor and no list of numbers. At most limit tensors."""
    out: Shapes = {}
    strings: Shapes = {}
    nodes = [0]

    def walk(x: Any, path: str, depth: int) -> None:
        if len(out) >= limit or nodes[0] >= _MAX_NODES or depth > _MAX_DEPTH:
            return
        nodes[0] += 1
        shape = getattr(x, "shape", None)
        if isinstance(shape, tuple) and not isinstance(x, type):
            try:
                out[path or root] = [int(d) for d in shape]
            except (TypeError, ValueError):
                pass
            return
        if items and isinstance(x, list) and x and isinstance(x[0], (int, float)):
            out[path or root] = [len(x)]
            return
        if items and isinstance(x, str):
            if len(strings) < limit:
                strings[path or root] = [len(x)]
            return
        if isinstance(x, Mapping):
            for key in list(x.keys())[:_MAX_NODES]:
                walk(x[key], f"{path}.{key}" if path else str(key), depth + 1)
        elif isinstance(x, (list, tuple)):
            merged = None if items else _per_sample(x)
            if merged is not None:
                out[path or root] = merged
                return
            for i, item in enumerate(x[:_MAX_NODES]):
                walk(item, f"{path}.{i}" if path else str(i), depth + 1)

    walk(batch, prefix, 0)
    # A string beside tensors or lists of numbers is a label or a file name
    # that collation keeps as it is; only an item of strings alone (raw
    # text that collate_fn tokenizes) is sized by them.
    return out or strings


def _per_sample(x: list[Any] | tuple[Any, ...]) -> list[int] | None:
    """The shape of a list that holds one tensor per sample of the batch
    (a detection batch's boxes, one tensor of a varying number of rows per
    image, as torchvision's detection models take them), as one tensor:
    concatenated along the first dimension, the largest of each other. Its
    positions, one entry each, would say nothing of the batch as a whole,
    and would crowd out its other tensors. A list is one per sample when
    it is as long as the trial's batch size (BATCHFIT_BATCH_SIZE) and
    holds tensors of one rank; None otherwise."""
    n = batch_size()
    if n < 2 or len(x) != n:
        return None
    shapes: list[tuple[Any, ...]] = []
    for item in x:
        shape = getattr(item, "shape", None)
        if not isinstance(shape, tuple) or not shape:
            return None
        shapes.append(shape)
    rank = len(shapes[0])
    if any(len(shape) != rank for shape in shapes):
        return None
    try:
        dims = [[int(d) for d in shape] for shape in shapes]
    except (TypeError, ValueError):
        return None
    return [sum(d[0] for d in dims)] + [max(d[i] for d in dims) for i in range(1, rank)]


def batch_size() -> int:
    """The trial's batch size (BATCHFIT_BATCH_SIZE), or 0 when not known."""
    try:
        return max(int(os.environ.get(BATCH_SIZE_ENV, "").strip()), 0)
    except ValueError:
        return 0


def same_shape(a: Shapes, b: Shapes, batch: int | None = None) -> bool:
    """Whether two batches have one shape: equal, or apart only in the
    leading dimension, where the smaller is less than the batch size
    (default the trial's) and one value for every tensor that differs. That
    is a partial batch (an epoch's last, of len(dataset) % batch_size
    items), which needs less memory than a full one, not a varying shape."""
    if a == b:
        return True
    n = batch_size() if batch is None else batch
    if n < 2 or a.keys() != b.keys():
        return False
    partial = set()
    for key, x in a.items():
        y = b[key]
        if x == y:
            continue
        if len(x) != len(y) or not x or x[1:] != y[1:] or min(x[0], y[0]) >= n:
            return False
        partial.add(min(x[0], y[0]))
    return len(partial) == 1


def numel(dims: list[int]) -> int:
    """A tensor's elements."""
    n = 1
    for d in dims:
        n *= d
    return n


def arguments_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Shapes:
    """The shapes of a call's arguments, "arg0", "arg1.0", ..., keyword
    arguments by name. An argument with more than MAX_TENSORS tensors is
    left out: it is a model's parameters or an optimizer's state, not the
    batch, and would crowd the batch out."""
    out: Shapes = {}
    named = [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    for name, value in named:
        found = shapes_of(value, prefix=name, limit=MAX_TENSORS + 1)
        if len(found) > MAX_TENSORS:
            continue
        for key, dims in found.items():
            if len(out) < MAX_TENSORS:
                out[key] = dims
    return out


def size(shapes: Shapes) -> int:
    """A batch's total elements over its tensors."""
    return sum(numel(dims) for dims in shapes.values())


def note(shapes: Shapes, source: str, worst: bool = False) -> None:
    """The program took a batch of these shapes from source; the next step
    consumes it. Of the batches taken between two steps the largest is the
    step's: with gradient accumulation a step takes several, and a loader
    that fetches one ahead (accelerate's) hands over the next batch before
    the step. A DataLoader's batch outranks what it becomes: a module's
    forward arguments, a jitted JAX step's (a JAX program fed by a torch
    DataLoader). Only a DataLoader batch taken since the last step does:
    a DataLoader looked at before training (a validation loader) says
    nothing of batches the program slices itself."""
    if log.source == "dataloader" and log.pending is not None and source != "dataloader":
        return
    # A batch from a new source replaces what another left (a forward call
    # before the program's first DataLoader batch: a warm-up, a summary).
    if log.pending is None or log.source != source or size(shapes) >= size(log.pending):
        log.pending = shapes
    log.source = source
    # Sticky until the step: with gradient accumulation a step takes several.
    log.pending_worst = log.pending_worst or worst


# What a loader's scan leaves in the log (see loader).
LOADER_FIELDS = ("planned_largest", "planned_varied", "why_not", "scan_seconds", "scanned_batches")


def new_loader(record: Dict[str, Any] | None = None) -> None:
    """A DataLoader iterator was made before the trial's first counted step.
    The last loader iterated before that step is the one the steps draw
    from: one iterated earlier (Lightning's sanity check of the validation
    loader) trains nothing. What an earlier loader left is forgotten, its
    batch and its plan, and record (what this loader's scan left, or None)
    is put back."""
    fresh = BatchLog()
    log.pending = None
    log.pending_worst = False
    for name in LOADER_FIELDS:
        setattr(log, name, (record or {}).get(name, getattr(fresh, name)))


def loader_record() -> Dict[str, Any]:
    """What the scan of the loader being prepared left in the log."""
    return {name: getattr(log, name) for name in LOADER_FIELDS}


def waiting_for_forward() -> bool:
    """Whether the next module call's arguments are the batch: no batch has
    been noted since the last step."""
    return log.pending is None


def fed_by_loader() -> bool:
    """Whether the steps take their batches from a DataLoader: a step after
    the first consumed one. Step 1's may come from a loader iterated before
    training (a validation loader's sanity check) where training has none."""
    return log.loader_fed


def on_step(step: int) -> None:
    """Step number step has finished: it consumed the pending batch."""
    shapes, log.pending = log.pending, None
    worst, log.pending_worst = log.pending_worst, False
    if shapes is None:
        return
    log.step_source = log.source
    if log.source == "dataloader":
        log.loader_fed = log.loader_fed or step > 1
        log.loader_taken = True
    if worst:
        # Counted as a step consumes them, not as a loader plans them: a
        # loader scanned before training (Lightning's sanity check of the
        # validation loader) runs no training step.
        log.worst_first = True
        log.worst_steps += 1
    if len(log.shapes) < MAX_BATCHES:
        # Aligned with step_peaks: pad steps that saw no batch.
        while len(log.shapes) < step - 1:
            log.shapes.append({})
        log.shapes.append(shapes)
    if log.first is None:
        log.first = shapes
    elif not same_shape(shapes, log.first):
        log.varied = True
    n = size(shapes)
    if n > log.largest_size:
        log.largest, log.largest_size = shapes, n
        log.grew_at_step = step


def keep_going(steps: int, stop_at: int) -> bool:
    """Whether a trial due to stop after this step (steps >= stop_at) goes
    on: its shapes vary, its largest batches did not come first, and the
    largest has grown within BATCHFIT_SHAPE_PATIENCE steps and
    BATCHFIT_SHAPE_SECONDS."""
    try:
        if not log.varied or log.worst_first or not worst_case_on() or _distributed():
            return False
        now = time.monotonic()
        if log.extend_from is None:
            log.extend_from, log.extend_at = now, steps
        if steps - log.grew_at_step >= int(env_number(PATIENCE_ENV, DEFAULT_PATIENCE)):
            log.bound = "steps"
            return False
        if now - log.extend_from >= env_number(SECONDS_ENV, DEFAULT_SECONDS):
            log.bound = "time"
            return False
        return True
    except Exception:
        return False


def _distributed() -> bool:
    """Whether the trial is one of several processes that step together
    (torchrun's WORLD_SIZE, a multi-process JAX): each would judge growth by
    its own batches, and a process that stopped while another went on
    would leave that one waiting in its next collective. Such a trial stops
    at BATCHFIT_STEPS, as every process does."""
    try:
        if int(os.environ.get("WORLD_SIZE", "1").strip()) > 1:
            return True
    except ValueError:
        pass
    count = getattr(sys.modules.get("jax"), "process_count", None)
    try:
        return callable(count) and int(count()) > 1
    except Exception:
        return False


def event_fields(steps: int) -> dict[str, Any]:
    """The exit event's "batches" object, or nothing when no batch was seen.
    The batch of a step that did not finish (out of memory) is seen: it
    counts for "largest" (not "shapes", which are the counted steps'), and,
    when it is one of the loader's largest, for "worst_first"."""
    if log.first is None and log.pending is None and log.planned_largest is None:
        return {}
    out: dict[str, Any] = {"source": log.source or "dataloader", "shapes": list(log.shapes)}
    varied = log.varied or log.planned_varied
    worst_first = log.worst_first or log.pending_worst
    largest = log.largest
    if log.pending is not None and size(log.pending) > log.largest_size:
        largest = log.pending
    if worst_first and log.planned_largest:
        largest = log.planned_largest
    out["largest"] = largest or {}
    out["varied"] = varied
    out["worst_first"] = worst_first
    out["worst_steps"] = log.worst_steps
    if varied and not worst_first:
        out["why_not"] = _why_not()
    if log.scan_seconds is not None:
        out["scan_seconds"] = round(log.scan_seconds, 3)
        out["scanned_batches"] = log.scanned_batches
    extended = steps - log.extend_at if log.extend_from is not None else 0
    out["extended_steps"] = max(extended, 0)
    if log.grew_at_step:
        out["grew_at_step"] = log.grew_at_step
    if log.extend_from is not None:
        out["bound"] = log.bound or "end"
    return out


def _why_not() -> str:
    if not worst_case_on():
        return "off"
    # A loader's reason is not the steps' when they went on to batches of
    # their own after one of its batches.
    if log.why_not and not (log.loader_taken and log.step_source in ("forward", "jit")):
        return log.why_not
    if (log.step_source or log.source) == "jit":
        return "jax input pipeline"
    if (log.step_source or log.source) == "forward":
        return "no DataLoader"
    return "not scanned"


def reset() -> None:
    """Forget every batch (a test's fresh start); the same object stays, as
    modules hold it."""
    log.__init__()  # type: ignore[misc]
