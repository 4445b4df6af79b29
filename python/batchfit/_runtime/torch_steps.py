"""torch's training steps: the steps of the first optimizer that steps,
each timed to the end of its device work, and the batches they consume
(a DataLoader's, see loader; else the outermost module's arguments)."""

from __future__ import annotations

import functools
import sys
from types import ModuleType
from typing import Any, Callable

from batchfit._runtime import batches, loader
from batchfit._runtime.imports import after_import
from batchfit._runtime.state import state
from batchfit._runtime.steps import count_step, owns_steps


def torch_imported(torch: ModuleType) -> None:
    """Once the program has imported torch, time its optimizer steps and
    note their batches."""
    after_import("torch.optim.optimizer", _optimizer_module_imported)
    after_import("torch.utils.data.dataloader", loader.dataloader_imported)
    _watch_forward(torch)


def _watch_forward(torch: ModuleType) -> None:
    """Where no DataLoader hands the batch over, the batch is the arguments
    of the first module called after a step (the outermost one: a module's
    pre-hook runs before its children's). A module called with keyword
    arguments only shows none to a global pre-hook; its first child that
    takes a tensor does. The hook goes once the steps are seen to take
    their batches from a DataLoader (batches.fed_by_loader), and is never
    there while torch._dynamo is loaded: torch.compile traces
    global hooks into the compiled module's frames and warns of them, so
    that a compiled program would not run as it does without us."""
    module = getattr(getattr(torch, "nn", None), "modules", None)
    register = getattr(getattr(module, "module", None), "register_module_forward_pre_hook", None)
    if not callable(register) or "torch._dynamo" in sys.modules:
        return
    handle: list[Any] = []

    def drop(_: Any = None) -> None:
        try:
            while handle:
                handle.pop().remove()
        except Exception:
            pass

    def pre_hook(mod: Any, args: Any) -> None:
        try:
            if batches.fed_by_loader():
                drop()
                return
            if not batches.waiting_for_forward():
                return
            shapes = batches.arguments_of(tuple(args), {})
            if shapes:
                batches.note(shapes, "forward")
        except Exception:
            pass

    try:
        handle.append(register(pre_hook))
    except Exception:
        return
    after_import("torch._dynamo", drop)


def _optimizer_module_imported(module: ModuleType) -> None:
    # torch.optim deletes its "optimizer" attribute (torch 2), so the module
    # comes from sys.modules or the import hook, never torch.optim.optimizer.
    if state.timing:
        return
    state.timing = True
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if callable(register):  # torch >= 2.0
        register(_step_post_hook)
        return
    _patch_old_optimizer(getattr(module, "Optimizer", None))


def _step_post_hook(optimizer: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    _on_step(optimizer)


def _patch_old_optimizer(optimizer_class: Any) -> None:
    """Before torch 2.0 there is no global step hook. Every Optimizer calls
    _hook_for_profile() from __init__, where torch wraps the class's step() for
    the profiler; we wrap it once more, the same way, to time it."""
    found = getattr(optimizer_class, "_hook_for_profile", None)
    if found is None:
        return
    original: Callable[..., Any] = found

    def _hook_for_profile(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        try:
            _time_step_of(type(self))
        except Exception:
            pass
        return result

    optimizer_class._hook_for_profile = _hook_for_profile


def _time_step_of(cls: type) -> None:
    found = getattr(cls, "step", None)
    if found is None or getattr(found, "_batchfit_timed", False):
        return
    step: Callable[..., Any] = found

    @functools.wraps(step)
    def timed_step(*args: Any, **kwargs: Any) -> Any:
        # Only the outermost call counts: a subclass's step() may call
        # super().step(), which may be timed too.
        state.depth += 1
        try:
            result = step(*args, **kwargs)
        finally:
            state.depth -= 1
        if state.depth == 0 and args:
            _on_step(args[0])
        return result

    timed_step._batchfit_timed = True  # type: ignore[attr-defined]
    setattr(cls, "step", timed_step)


def _on_step(optimizer: object) -> None:
    """A torch optimizer stepped (torch's global post-hook, or our wrapper of
    step() before torch 2.0)."""
    try:
        if not owns_steps(id(optimizer)):
            return
        peak = None
        cuda = getattr(sys.modules.get("torch"), "cuda", None)
        if cuda is not None and cuda.is_initialized():
            cuda.synchronize()
            # The peak since the start, so the list rises while memory does;
            # a host-side counter, no device work.
            peak = int(cuda.max_memory_allocated())
        count_step(peak)
    except Exception:
        pass
