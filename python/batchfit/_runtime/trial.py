"""A user's Trial, as batchfit's warm worker runs it.

A Trial is either a class::

    class Trial:
        def setup(self): ...              # build model and optimizer once
        def step(self, batch_size): ...   # one training step at this size

or a module with ``setup()`` (returning any state) and ``step(state,
batch_size)``. It is named ``module:Attr``, ``module`` (functions), or
``path/to/file.py:Attr``.

This module knows how to load and build one, run its steps so that nothing of
a failed step outlives the trial, reset between trials, and measure what the
reset left behind. It imports torch only when the Trial has imported it, and
works without CUDA (then every memory figure is 0 and leaks are found by a
census of live tensors instead).
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import inspect
import os
import sys
import time
import traceback
import types
import weakref
from typing import Any, Callable, Iterable

from batchfit._runtime.report import caused_by_oom, describe

# How deep the search for optimizers, modules and tensors goes into the
# Trial's attributes (self.model, self.parts["opt"], state[0].optimizer ...).
_MAX_DEPTH = 4
# The longest traceback kept, from its end, where the error is.
_MAX_TRACEBACK = 64 << 10
# Optimizer state appears lazily; warm-up steps go on while it is still
# growing (a GradScaler skips steps whose gradients overflowed), up to this.
_MAX_WARMUP_STEPS = 8


class TargetError(Exception):
    """The target cannot be loaded, or is not a Trial."""


def load(target: str, cwd: str | None = None) -> Any:
    """Import the object a target names: "pkg.mod:Attr", "pkg.mod" or
    "path/to/file.py:Attr" (a file's folder goes first on sys.path, so that it
    can import its neighbours). Returns the object; a module when no
    attribute is named."""
    name, _, attr = target.partition(":")
    if not name:
        raise TargetError(f"no module in {target!r}: give MODULE:ATTR, e.g. mymodel:Trial")
    if name.endswith(".py") or os.sep in name or (os.altsep and os.altsep in name):
        path = os.path.abspath(os.path.join(cwd or os.getcwd(), name))
        if not os.path.isfile(path):
            raise TargetError(f"{name}: no such file")
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        modname = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(modname, path)
        if spec is None or spec.loader is None:
            raise TargetError(f"{name}: cannot be imported as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        spec.loader.exec_module(module)
    else:
        # "python -m" puts the working directory first on sys.path already;
        # a worker started any other way should find the same modules.
        here = cwd or os.getcwd()
        if here not in sys.path and "" not in sys.path:
            sys.path.insert(0, here)
        module = importlib.import_module(name)
    if not attr:
        return module
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"{name} has no attribute {attr!r}")
    return obj


class Runner:
    """A built Trial: step(batch_size) runs one training step. roots are the
    objects the reset searches for optimizers, modules and tensors."""

    def __init__(self, obj: Any, name: str = "trial") -> None:
        self.name = name
        self._instance: Any = None
        self._state: Any = None
        self._step: Callable[[int], Any]
        self.roots: list[Any]
        if inspect.isclass(obj):
            self._instance = obj()
            _call_setup(self._instance)
            self._step = _method(self._instance, "step", name)
            self.roots = [self._instance]
        elif isinstance(obj, types.ModuleType):
            step: Any = getattr(obj, "step", None)
            if not callable(step):
                raise TargetError(f"{name} has no step(state, batch_size) function")
            setup = getattr(obj, "setup", None)
            self._state = setup() if callable(setup) else None
            state = self._state

            def call(batch_size: int) -> None:
                step(state, batch_size)

            self._step = call
            # Module globals may hold the model when setup() puts it there.
            self.roots = [self._state, obj]
        elif callable(getattr(obj, "step", None)):
            self._instance = obj
            _call_setup(obj)
            self._step = obj.step
            self.roots = [obj]
        else:
            raise TargetError(
                f"{name} is not a Trial: give a class with setup() and step(batch_size), "
                "or a module with setup() and step(state, batch_size)")

    def step(self, batch_size: int) -> None:
        # The return value is dropped at once: a returned loss would keep the
        # step's autograd graph alive.
        self._step(batch_size)


def _call_setup(obj: Any) -> None:
    setup = getattr(obj, "setup", None)
    if callable(setup):
        setup()


def _method(obj: Any, attr: str, name: str) -> Callable[..., Any]:
    m = getattr(obj, attr, None)
    if not callable(m):
        raise TargetError(f"{name} has no {attr}() method")
    return m


def torch_module() -> Any:
    """torch, if the Trial imported it; batchfit never imports it first."""
    return sys.modules.get("torch")


def cuda_in_use(torch: Any) -> bool:
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    return bool(cuda is not None and cuda.is_available() and cuda.is_initialized())


# --- finding what the reset needs -----------------------------------------


def find(roots: Iterable[Any], torch: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """The optimizers, modules and grad-carrying tensors reachable from roots
    through attributes, dicts, lists and tuples, without descending into the
    torch objects themselves."""
    optimizers: list[Any] = []
    modules: list[Any] = []
    tensors: list[Any] = []
    if torch is None:
        return optimizers, modules, tensors
    optimizer_cls = getattr(getattr(torch, "optim", None), "Optimizer", None)
    module_cls = getattr(getattr(torch, "nn", None), "Module", None)
    tensor_cls = getattr(torch, "Tensor", None)
    seen: set[int] = set()
    stack = [(r, 0) for r in roots]
    while stack:
        obj, depth = stack.pop()
        if obj is None or id(obj) in seen:
            continue
        seen.add(id(obj))
        if optimizer_cls is not None and isinstance(obj, optimizer_cls):
            optimizers.append(obj)
            continue
        if module_cls is not None and isinstance(obj, module_cls):
            modules.append(obj)
            continue
        if tensor_cls is not None and isinstance(obj, tensor_cls):
            if obj.requires_grad:
                tensors.append(obj)
            continue
        if depth >= _MAX_DEPTH or isinstance(obj, (str, bytes, int, float, bool, type)):
            continue
        for child in _children(obj):
            stack.append((child, depth + 1))
    return optimizers, modules, tensors


def _children(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    if isinstance(obj, types.ModuleType):
        # Only the module's own globals that are torch objects or plain
        # containers; not the modules it imported.
        return [v for v in vars(obj).values() if not isinstance(v, (types.ModuleType, type, types.FunctionType))]
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        return list(d.values())
    return []


def optimizer_state(optimizers: Iterable[Any], torch: Any) -> tuple[int, int]:
    """(entries, bytes) of the optimizers' per-parameter state."""
    entries, total = 0, 0
    tensor_cls = getattr(torch, "Tensor", None)
    for opt in optimizers:
        try:
            state = opt.state
        except Exception:
            continue
        for per_param in list(state.values()):
            entries += 1
            values = per_param.values() if isinstance(per_param, dict) else [per_param]
            for v in values:
                if tensor_cls is not None and isinstance(v, tensor_cls):
                    total += v.numel() * v.element_size()
    return entries, total


# --- live tensor census -----------------------------------------------------


class Census:
    """The tensors Python can reach, and the bytes of their storages.

    torch's allocator counters exist for CUDA only. On the CPU the worker
    verifies its reset with this census instead: every tensor object the
    garbage collector tracks, its storage counted once. It cannot see tensors
    that exist only inside C++ (an autograd graph's saved tensors, reachable
    from Python only through a grad_fn), so a leak of a graph without any of
    its tensors shows on CUDA but not here."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.bytes, self._ids = self._take()

    def _take(self) -> tuple[int, dict[int, weakref.ref[Any]]]:
        tensor_cls = self.torch.Tensor
        storages: dict[Any, int] = {}
        ids: dict[int, weakref.ref[Any]] = {}
        for obj in gc.get_objects():
            if not isinstance(obj, tensor_cls):
                continue
            try:
                ids[id(obj)] = weakref.ref(obj)
            except TypeError:
                pass
            key, size = _storage(obj)
            if key is not None:
                storages[key] = max(storages.get(key, 0), size)
        return sum(storages.values()), ids

    def new_tensors(self, limit: int = 5) -> list[dict[str, Any]]:
        """The largest tensors alive now that were not alive at the census:
        a list of {shape, dtype, device, bytes}."""
        tensor_cls = self.torch.Tensor
        found: list[tuple[int, Any]] = []
        for obj in gc.get_objects():
            if not isinstance(obj, tensor_cls):
                continue
            ref = self._ids.get(id(obj))
            if ref is not None and ref() is obj:
                continue
            _, size = _storage(obj)
            found.append((size, obj))
        found.sort(key=lambda p: -p[0])
        out: list[dict[str, Any]] = []
        for size, t in found[:limit]:
            try:
                out.append({"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                            "device": str(t.device), "bytes": int(size)})
            except Exception:
                pass
        del found
        return out

    def retained(self) -> int:
        """Bytes of live tensor storage now, less at the census."""
        now, _ = self._take()
        return now - self.bytes


def _storage(t: Any) -> tuple[Any, int]:
    """(key, bytes) of a tensor's storage; key None when it has none that can
    be read (meta tensors, some subclasses)."""
    try:
        if hasattr(t, "untyped_storage"):
            s = t.untyped_storage()
        else:
            s = t.storage()
        return (str(t.device), s.data_ptr()), int(s.nbytes())
    except Exception:
        try:
            return (str(t.device), t.data_ptr()), int(t.numel() * t.element_size())
        except Exception:
            return None, 0


# --- one trial ----------------------------------------------------------------


class Failure:
    """What is kept of a failed step: strings only, never the exception."""

    def __init__(self, outcome: str, exception: str, traceback_text: str) -> None:
        self.outcome = outcome
        self.exception = exception
        self.traceback = traceback_text


def run_steps(runner: Runner, batch_size: int, steps: int, times: list[float], sync: Callable[[], None]) -> None:
    """The trial's frame: everything a step makes lives in frames under this
    one, and they are gone (or cleared) when it returns or raises."""
    for _ in range(steps):
        start = time.perf_counter()
        runner.step(batch_size)
        sync()
        times.append(time.perf_counter() - start)


def run_trial(runner: Runner, batch_size: int, steps: int,
              sync: Callable[[], None]) -> tuple[Failure | None, list[float]]:
    """Run steps at batch_size. Returns (failure or None, step times). The
    exception is caught here, outside the trial's frames, and taken apart
    before this function returns: its traceback's frames are cleared, its
    chain is cut, and only strings of it are kept."""
    times: list[float] = []
    failure = None
    try:
        run_steps(runner, batch_size, steps, times, sync)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # SystemExit from a step is its failure too
        outcome = "oom" if caused_by_oom(e) else "error"
        text = ""
        if outcome == "error":
            text = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-_MAX_TRACEBACK:]
        failure = Failure(outcome, describe(e), text)
        scrub(e)
    clear_last_exception()
    return failure, times


def scrub(exc: BaseException) -> None:
    """Make exc and everything chained to it let go of the frames they saw:
    clear the locals of every frame in their tracebacks (the failed step's
    batch, outputs and loss live there) and cut the links."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        tb = getattr(e, "__traceback__", None)
        if tb is not None:
            try:
                traceback.clear_frames(tb)
            except Exception:
                pass
        stack.append(getattr(e, "__cause__", None))
        stack.append(getattr(e, "__context__", None))
        try:
            sub = getattr(e, "exceptions", None)  # an ExceptionGroup's
            if isinstance(sub, (list, tuple)):
                stack.extend(s for s in sub if isinstance(s, BaseException))
        except Exception:
            pass
        for attr in ("__traceback__", "__cause__", "__context__"):
            try:
                setattr(e, attr, None)
            except Exception:
                pass


def clear_last_exception() -> None:
    """sys.last_* hold the last uncaught exception (and its frames) in an
    interactive session; a Trial run from a notebook may have set them."""
    for attr in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, attr):
            try:
                setattr(sys, attr, None)
            except Exception:
                pass


def reset(runner: Runner, torch: Any) -> None:
    """Put the process back to its post-setup state as far as memory goes:
    gradients dropped, garbage collected, the allocator's cache returned and
    its peak counters restarted."""
    optimizers, modules, tensors = find(runner.roots, torch)
    for opt in optimizers:
        try:
            opt.zero_grad(set_to_none=True)
        except Exception:
            pass
        for group in getattr(opt, "param_groups", []):
            for p in group.get("params", []):
                p.grad = None
    for m in modules:
        try:
            m.zero_grad(set_to_none=True)
        except Exception:
            for p in m.parameters():
                p.grad = None
    for t in tensors:
        try:
            t.grad = None
        except Exception:
            pass
    del optimizers, modules, tensors
    gc.collect()
    if cuda_in_use(torch):
        torch.cuda.synchronize()
        # cuBLAS keeps a workspace per handle and stream, allocated through
        # the caching allocator on first use. A trial that first uses a
        # stream or a kernel path the warm-up did not would leave one behind
        # and fail verification for no fault of the Trial's.
        clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if callable(clear):
            clear()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def sync() -> None:
    """Wait for the GPU, when the Trial uses CUDA, so that a step's time
    covers its kernels. Checked at each call: CUDA may start in the first
    step."""
    torch = torch_module()
    if cuda_in_use(torch):
        torch.cuda.synchronize()


def warm_up(runner: Runner, size: int, min_steps: int = 1) -> int:
    """Run steps at size until the optimizers' state exists and stopped
    growing (at least min_steps, at most _MAX_WARMUP_STEPS), so that state
    created lazily on the first real step is part of the baseline. Returns
    the number of steps. A failure propagates: the worker cannot start."""
    n = 0
    last: int | None = None
    while n < _MAX_WARMUP_STEPS:
        failure, _ = run_trial(runner, size, 1, sync)
        if failure is not None:
            raise WarmupError(size, failure)
        n += 1
        torch = torch_module()
        optimizers, _, _ = find(runner.roots, torch)
        entries = [len(getattr(o, "state", {})) for o in optimizers]
        _, total = optimizer_state(optimizers, torch) if torch is not None else (0, 0)
        del optimizers
        settled = all(e > 0 for e in entries) and total == last
        last = total
        if n >= min_steps and (settled or not entries):
            break
    return n


class WarmupError(Exception):
    def __init__(self, size: int, failure: Failure) -> None:
        super().__init__(f"warm-up step at batch size {size} failed: {failure.exception}")
        self.size = size
        self.failure = failure
