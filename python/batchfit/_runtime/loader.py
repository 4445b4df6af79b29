"""The worst batches first: a torch DataLoader over a map-style dataset whose
batches vary in shape serves its largest batches at the start of the trial,
so that BATCHFIT_STEPS steps meet the memory the whole epoch needs. The
order of the data does not change what a trial measures.

DataLoader.__iter__ and the iterators' __next__ are wrapped at class level
(subclasses such as accelerate's DataLoaderShard and Lightning's loaders go
through them). Before the trial's first step, a new iterator's loader is
scanned on the CPU, once a loader, bounded in time (BATCHFIT_SCAN_SECONDS,
default 20):

- 16 items spread over the dataset are read; when their tensors have
  equal shapes, more are read, spread over the whole dataset, for up to
  2 s once a search (the verdict kept in the search's log folder for its
  later trials): all of one shape, the loader is left alone (fixed-shape
  programs run as before, at the cost of those reads);
- else the loader's own batch_sampler lists one epoch's batches, every item
  is read once for its tensor sizes, each batch's padded size is estimated
  (its length times its longest item, per tensor) and summed (its items'
  sizes), and the largest candidates by either are collated for real with
  the loader's collate_fn, so that the padding is what training sees; a
  partial batch (shorter than the rest) is no shape of its own;
- the iterator then yields its own first batch (as training starts: step
  1 makes the optimizer's state), then the largest (the one measured, or a
  copy of it) until step 2 has run, then the next largest until the
  trial's last step, which takes a batch of the loader's own, so that a
  step after the largest shows whether memory still rises there; then the
  loader's own epoch. The steps are the hook's count, so that gradient
  accumulation meets the largest at step 2 too (step 1's other batches
  are the largest: the adapter cannot tell them from a fetcher's batch
  ahead); the batches a step takes, seen by step 2, place the trial's
  last step for a fetcher a batch ahead (Lightning's, accelerate's), which
  asks for each batch a step early. At most 64 are served; a trial of one
  step takes the largest at once. In a soak (BATCHFIT_SOAK=1) it yields
  the whole epoch, its first batch, then the largest, then the rest
  largest first, of the epoch's own length (the repeats replace its
  smallest batches). A program run to its end (BATCHFIT_STEPS unset or 0)
  meets every batch anyway and is left alone.

The plan belongs to the loader: the last one iterated before the first
step is the one whose batches the steps take (batches.new_loader).

The random state of torch, random, numpy and the loader's and samplers'
generators is put back after the scan, so that the program's own batches
and augmentations are what they were; a generator a dataset keeps of its
own (a numpy Generator drawn from in __getitem__) is not, and has moved on
by the items read. Each batch a DataLoader iterator
yields is noted for its step (batches).
"""

from __future__ import annotations

import copy
import hashlib
import heapq
import itertools
import json
import math
import os
import random
import sys
import time
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Callable, Iterator

from batchfit._runtime import batches, report
from batchfit._runtime.state import state

SCAN_SECONDS_ENV = "BATCHFIT_SCAN_SECONDS"
SOAK_ENV = "BATCHFIT_SOAK"
DEFAULT_SCAN_SECONDS = 20.0
DEFAULT_FIRST = 3  # the largest batches a soak measures before its first step
_OWN = object()  # served: the loader's own next batch
_SAMPLE = 16  # items read to tell a fixed-shape dataset, every trial
ONE_SHAPE_SECONDS = 2.0  # reading more of a dataset that looks fixed, once a search
_CANDIDATES = 4  # batches collated per batch served first
_MAX_SERVED = 64  # batches served first, at most, outside a soak
_scanned_datasets = 0  # datasets read on in this process: part of a verdict's key
# A loader's scan: what serves its first batches (or None) and what the
# scan left in the log (batches.loader_record).
_SCANNED = "_batchfit_scanned"


def dataloader_imported(module: ModuleType) -> None:
    """torch.utils.data.dataloader is imported: wrap its loader's __iter__
    and its iterators' __next__, once."""
    loader_cls = getattr(module, "DataLoader", None)
    iter_cls = getattr(module, "_BaseDataLoaderIter", None)
    if not isinstance(loader_cls, type) or not isinstance(iter_cls, type):
        return
    iterable = getattr(module, "IterableDataset", None)
    original_iter = loader_cls.__dict__.get("__iter__")
    original_next = iter_cls.__dict__.get("__next__")
    if not callable(original_iter) or not callable(original_next):
        return
    if getattr(original_iter, "_batchfit_wrapped", False):
        return
    orig_iter: Callable[..., Any] = original_iter
    orig_next: Callable[..., Any] = original_next

    def __iter__(self: Any) -> Any:
        it = orig_iter(self)
        try:
            # A persistent workers' iterator is the same object each epoch.
            it.__dict__.pop("_batchfit_first", None)
            it.__dict__.pop("_batchfit_whole", None)
            _prepare(self, it, iterable)
        except Exception:
            pass
        return it

    def __next__(self: Any) -> Any:
        first = self.__dict__.get("_batchfit_first")
        if first is not None:
            try:
                batch = next(first)
            except StopIteration:
                self.__dict__.pop("_batchfit_first", None)
                if self.__dict__.pop("_batchfit_whole", False):
                    raise
            except Exception as e:
                self.__dict__.pop("_batchfit_first", None)
                # A collate_fn that builds the batch on the GPU can run out
                # of memory making one: that is the trial's answer, not an
                # error of ours to pass over.
                if report.caused_by_oom(e):
                    raise
            else:
                if batch is _OWN:
                    batch = orig_next(self)
                _note(batch, True)
                return batch
        batch = orig_next(self)
        _note(batch, False)
        return batch

    __iter__._batchfit_wrapped = True  # type: ignore[attr-defined]
    for name, fn, orig in (("__iter__", __iter__, orig_iter), ("__next__", __next__, orig_next)):
        fn.__name__ = name
        fn.__qualname__ = getattr(orig, "__qualname__", name)
        fn.__doc__ = getattr(orig, "__doc__", None)
    setattr(loader_cls, "__iter__", __iter__)
    setattr(iter_cls, "__next__", __next__)


def _note(batch: Any, worst: bool) -> None:
    """Note a batch the loader yielded. One that shows no tensors (a graph
    library's Batch object) is not noted, so that the module's arguments it
    becomes are read instead."""
    try:
        shapes = batches.shapes_of(batch)
        if shapes:
            batches.note(shapes, "dataloader", worst)
    except Exception:
        pass


def _prepare(loader: Any, it: Any, iterable: Any) -> None:
    """Arrange for it to yield loader's largest batches first, where it can;
    else say why not (batches.log.why_not)."""
    soak = os.environ.get(SOAK_ENV) == "1"
    if state.steps > 0 or state.path is None:
        return  # batches after the trial's first step, or no trial
    scanned = loader.__dict__.get(_SCANNED)
    batches.new_loader(scanned[1] if scanned else None)
    if state.stop_at <= 0 and not soak:
        # A program run to its end meets every batch anyway, and batches
        # served before its own would lengthen its epoch (a learning-rate
        # schedule counted in steps could overrun).
        return
    log = batches.log
    if not batches.worst_case_on():
        return
    dataset = getattr(loader, "dataset", None)
    if isinstance(iterable, type) and isinstance(dataset, iterable):
        log.why_not = "iterable dataset"
        return
    sampler = getattr(loader, "batch_sampler", None)
    if sampler is None:
        log.why_not = "no batch sampler"
        return
    try:
        len(sampler)
    except Exception:
        log.why_not = "sampler not sized"
        return
    # One scan a loader: a program may take a batch to look at (next(iter(
    # loader))) before it trains, and every iterator gets the same plan.
    if scanned:
        serve = scanned[0]
    else:
        bound = batches.env_number(SCAN_SECONDS_ENV, DEFAULT_SCAN_SECONDS)
        # The batches measured: the largest, served at step 2 (step 1 takes
        # the epoch's own first), and the next largest for the steps after
        # it up to the last but one (the last takes one of the loader's
        # own, see _scan). A soak measures
        # a few and collates the rest of its epoch as it serves them.
        k = DEFAULT_FIRST if soak else min(max(state.stop_at - 2, 1), _MAX_SERVED)
        kept = _random_state(loader, sampler)
        try:
            serve = _scan(loader, dataset, sampler, k, bound, soak)
        except Exception as e:
            log.why_not = f"scan failed: {type(e).__name__}"
            serve = None
        finally:
            _restore_random(kept)
        loader.__dict__[_SCANNED] = (serve, batches.loader_record())
    if serve is None:
        return
    it.__dict__["_batchfit_first"] = serve()
    if soak:
        it.__dict__["_batchfit_whole"] = True


class _TimedOut(Exception):
    pass


def _scan(loader: Any, dataset: Any, sampler: Any, k: int, bound: float,
          soak: bool) -> Callable[[], Iterator[Any]] | None:
    """What makes the batches to serve first, or None (the log says why)."""
    log = batches.log
    start = time.monotonic()
    deadline = start + bound

    def item_sizes(index: Any) -> dict[str, int]:
        # Not kept: an epoch's plan reads each item once, and a dataset may
        # be large.
        if time.monotonic() > deadline:
            raise _TimedOut()
        shapes = batches.shapes_of(dataset[index], items=True)
        return {key: batches.numel(dims) for key, dims in shapes.items()}

    try:
        n = len(dataset)
        if n > 0:
            sample = [item_sizes(i * n // min(n, _SAMPLE)) for i in range(min(n, _SAMPLE))]
            if all(s == sample[0] for s in sample):
                read = _one_shape(dataset, n, sample[0], item_sizes, min(deadline, start + ONE_SHAPE_SECONDS))
                if read:
                    log.why_not = log.why_not or f"{read} of {n} items read, of one shape"
                    return None  # items of one shape: the batches are too
        plan: list[list[Any]] = []
        for b in sampler:
            plan.append(list(b))
            if len(plan) % 1024 == 0 and time.monotonic() > deadline:
                raise _TimedOut()
        # Two estimates of a batch's collated size: padded (its length times
        # its longest item, per tensor: a padding collate_fn) and summed
        # (its items' sizes: a collate_fn that keeps one tensor per item,
        # a detection batch's boxes). The candidates come from both.
        estimates: list[tuple[int, tuple[Any, ...]]] = []
        summed: list[int] = []
        for b in plan:
            longest: dict[str, int] = {}
            total = 0
            for index in b:
                for key, value in item_sizes(index).items():
                    total += value
                    if value > longest.get(key, 0):
                        longest[key] = value
            estimates.append((len(b) * sum(longest.values()), (len(b), tuple(sorted(longest.items())))))
            summed.append(total)
    except _TimedOut:
        log.why_not = f"scan timed out after {bound:g} s"
        log.scan_seconds = time.monotonic() - start
        return None
    log.scan_seconds = time.monotonic() - start
    log.scanned_batches = len(plan)
    # A partial batch (the epoch's last) is not a shape of its own: only
    # full-length batches tell whether the shapes vary.
    full = max((len(b) for b in plan), default=0)
    if len({shape for b, (_, shape) in zip(plan, estimates) if len(b) == full}) < 2:
        log.why_not = log.why_not or "planned batches of one shape"
        return None
    order = sorted(range(len(plan)), key=lambda i: -estimates[i][0])
    by_sum = sorted(range(len(plan)), key=lambda i: -summed[i])
    n_candidates = max(k * _CANDIDATES, 8)
    candidates = list(dict.fromkeys(order[:n_candidates] + by_sum[:n_candidates]))
    collate = loader.collate_fn
    # Only the k largest so far are kept, a heap of (size, -position, i,
    # batch) whose ties keep the earlier candidate: a collated batch may be
    # large.
    heap: list[tuple[int, int, int, Any]] = []
    for seq, i in enumerate(candidates):
        if heap and time.monotonic() > deadline:
            break
        batch = collate([dataset[index] for index in plan[i]])
        heapq.heappush(heap, (batches.size(batches.shapes_of(batch)), -seq, i, batch))
        if len(heap) > k:
            heapq.heappop(heap)
        del batch
    top = [(n, i, batch) for n, _, i, batch in sorted(heap, key=lambda m: (-m[0], -m[1]))]
    del heap
    largest = batches.shapes_of(top[0][2])
    # A collate_fn that pads to a fixed length makes items of any length
    # one shape: the smallest full-length planned batch by either estimate
    # tells.
    smallest = dict.fromkeys(next(i for i in reversed(ranked) if len(plan[i]) == full) for ranked in (order, by_sum))
    one_shape = all(
        batches.same_shape(batches.shapes_of(collate([dataset[index] for index in plan[i]])), largest, full)
        for i in smallest)
    log.scan_seconds = time.monotonic() - start
    if one_shape:
        log.why_not = log.why_not or "planned batches of one shape"
        return None
    log.planned_varied = True
    log.planned_largest = largest
    pin = _pinner(loader)
    fresh = {m[1]: m[2] for m in top}
    # The next largest: the measured ones, then the rest of the plan by its
    # estimate, collated as they are served.
    following = [m[1] for m in top[1:]]
    taken = {top[0][1], *following}
    # The largest batch as measured, for its repeats: collated afresh, an
    # item's random crop or augmentation would make step 2's batch another
    # one, and a program may change a batch in place (pop its labels).
    # None where it cannot be copied, or where collate_fn put it on a
    # device: a copy held there for the trial would add to its peak.
    pristine = _copy(top[0][2]) if _on_cpu(top[0][2]) else None

    def largest_batch(measured: dict[int, Any]) -> Any:
        batch = measured.pop(top[0][1], None)
        if batch is None and pristine is not None:
            batch = _copy(pristine)
        return batch if batch is not None else make(top[0][1], measured)

    def make(i: int, measured: dict[int, Any]) -> Any:
        batch = measured.pop(i, None)
        return batch if batch is not None else collate([dataset[index] for index in plan[i]])

    def serve() -> Iterator[Any]:
        # The batches measured go to the first iterator, once each; a
        # later iterator gets them collated afresh (the largest copied), as
        # a program may change a batch in place.
        measured = dict(fresh)
        fresh.clear()
        served = 0
        # A soak's epoch keeps its length (a schedule counted in steps,
        # OneCycleLR, would step past its end): the repeats of the largest
        # replace the epoch's smallest batches.
        limit = len(plan) if soak else _MAX_SERVED
        # Step 1 takes the epoch's own first batch, as training starts,
        # and the largest follows until step 2 has run: it then meets the
        # optimizer's state (Adam's moments, as large as the weights twice
        # over) in a cache that a batch of the loader's own has shaped. The
        # order matters because the caching allocator's free blocks do:
        # the largest at step 1 leaves freed blocks of its activations that
        # the optimizer's state is carved from, and step 2 can then fail at
        # a size training runs; a smaller batch first and the largest after
        # it is what training meets (docs/design/largest-batches-first.md).
        # One batch of the loader's own, not one step's: a fetcher that
        # takes a batch ahead (Lightning's, accelerate's under the HF
        # Trainer) asks for the second before step 1 has run, and would
        # otherwise meet the largest at the trial's last step only; with
        # gradient accumulation step 1's other batches are the largest. It
        # goes by the steps counted, not the batches served, so that step 2
        # takes only the largest; bounded (_MAX_SERVED) for a program whose
        # steps are never counted. A trial of one step takes the largest
        # at once.
        if (soak or state.stop_at >= 2) and state.steps < 1 and served < limit:
            yield _OWN  # the iterator's own: with workers, its sampler has drawn the epoch
            served += 1
        # How many batches were asked for when the steps were first seen to
        # have passed 1 and 2: their difference is the batches a step takes.
        seen: dict[int, int] = {}

        def see() -> None:
            for k in (1, 2):
                if state.steps >= k and k not in seen:
                    seen[k] = served

        see()
        while state.steps < 2 and served < limit:
            yield pin(largest_batch(measured))
            served += 1
            see()
        # Then the next largest until the trial's last step, which takes a
        # batch of the loader's own, so that a step after them shows
        # whether memory still rises; in a soak, the rest of the epoch. The
        # batches a step takes tell which step the next one is for (a
        # fetcher a batch ahead asks for it a step early); where the steps
        # were never seen, by the steps counted.
        for i in itertools.chain(following, (i for i in order if i not in taken)):
            see()
            if len(seen) == 2:
                per_step = max(seen[2] - seen[1], 1)
                last = -(-(served + 1) // per_step) >= state.stop_at
            else:
                last = state.steps >= state.stop_at - 1
            if served >= limit or (not soak and last):
                return
            yield pin(make(i, measured))
            served += 1

    return serve


def _one_shape(dataset: Any, n: int, sizes: dict[str, int], item_sizes: Callable[[Any], dict[str, int]],
               until: float) -> int:
    """How many of dataset's items were read and found of one shape
    (sizes), or 0 when one is not: then the loader is scanned in full.

    16 items spread over a dataset miss an item of another length that one
    in a thousand is (a few long documents among fixed-length chunks), and
    an answer measured without it would fail where training meets it. So
    items are read on, spread over the whole dataset, until every one is
    or until a short time has passed, once a search: the verdict is kept
    beside the trial's report, in the search's log folder, for its later
    trials."""
    folder = os.path.dirname(state.path or "")
    # Two datasets of one type and length (a validation and a training
    # Subset of one dataset) are told apart by the order the trial scans
    # them in, as the program makes the same loaders in the same order in
    # every trial, and by a Subset's indices or a ConcatDataset's parts.
    global _scanned_datasets
    _scanned_datasets += 1
    parts = getattr(dataset, "indices", None)
    if parts is None:
        parts = getattr(dataset, "cumulative_sizes", None)
    try:
        parts = list(parts) if parts is not None else None
    except TypeError:
        parts = None
    key = hashlib.sha256(repr((type(dataset).__module__, type(dataset).__qualname__, n, sorted(sizes.items()),
                               _scanned_datasets, parts)).encode()).hexdigest()[:16]
    kept = os.path.join(folder, f"items-{key}.json") if folder and os.path.isdir(folder) else None
    if kept:
        try:
            with open(kept, encoding="utf-8") as f:
                return int(json.load(f)["read"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        finally:
            # The verdict is batchfit's, not an input of the program's: were
            # it among the files the program read (sources.opened_files), the
            # history would check it, which goes with the search's log
            # folder, and never answer the search again.
            state.opened.pop(os.path.abspath(kept), None)
    read = 0
    # A stride of n over the golden ratio, made coprime with n: item
    # (j * stride) % n visits every item, each read landing in the largest
    # gap the earlier ones left, from the first reads on.
    stride = max(round(n * 0.6180339887), 1)
    while math.gcd(stride, n) != 1:
        stride += 1
    try:
        for j in range(n):
            if time.monotonic() > until:
                break
            if item_sizes((j * stride) % n) != sizes:
                return 0
            read += 1
    except _TimedOut:
        pass
    read = max(read, min(n, _SAMPLE))
    if kept:
        try:
            tmp = f"{kept}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"read": read, "of": n}, f)
            os.replace(tmp, kept)
        except OSError:
            pass
    return read


def _copy(batch: Any) -> Any:
    """A deep copy of batch, or None where it cannot be made."""
    try:
        return copy.deepcopy(batch)
    except Exception:
        return None


def _on_cpu(batch: Any) -> bool:
    """Whether every tensor of batch found within the walk's bounds is in
    host memory: a torch tensor's .device, JAX's and others' alike, is
    "cpu" by its type or str."""
    nodes = [0]

    def walk(x: Any, depth: int) -> bool:
        nodes[0] += 1
        if nodes[0] > 256 or depth > 6:
            return True
        device = getattr(x, "device", None)
        if device is not None and not isinstance(x, type):
            return str(getattr(device, "type", device)).startswith("cpu")
        if isinstance(x, Mapping):
            return all(walk(v, depth + 1) for v in list(x.values())[:256])
        if isinstance(x, (list, tuple)):
            return all(walk(v, depth + 1) for v in x[:256])
        return True

    try:
        return walk(batch, 0)
    except Exception:
        return False


def _pinner(loader: Any) -> Callable[[Any], Any]:
    """Pin a batch in page-locked memory as the loader's iterator would."""
    torch: Any = sys.modules.get("torch")
    try:
        if not loader.pin_memory or not torch.cuda.is_available():
            return lambda batch: batch
        from torch.utils.data._utils.pin_memory import pin_memory
    except Exception:
        return lambda batch: batch

    def pin(batch: Any) -> Any:
        try:
            return pin_memory(batch)
        except Exception:
            return batch

    return pin


def _random_state(loader: Any, sampler: Any) -> list[tuple[Callable[[Any], Any], Any]]:
    """The random states the scan may move (a sampler's shuffle, an item's
    augmentation), each with what puts it back."""
    kept: list[tuple[Callable[[Any], Any], Any]] = [(random.setstate, random.getstate())]
    for owner in (loader, sampler, getattr(sampler, "sampler", None)):
        generator: Any = getattr(owner, "generator", None)
        try:
            kept.append((generator.set_state, generator.get_state()))
        except Exception:
            pass
    torch: Any = sys.modules.get("torch")
    try:
        kept.append((torch.set_rng_state, torch.get_rng_state()))
    except Exception:
        pass
    np_random: Any = sys.modules.get("numpy.random")
    try:
        kept.append((np_random.set_state, np_random.get_state()))
    except Exception:
        pass
    return kept


def _restore_random(kept: list[tuple[Callable[[Any], Any], Any]]) -> None:
    for restore, value in kept:
        try:
            restore(value)
        except Exception:
            pass
