"""The post-import hook: run a callback once the program has imported a
module, without ever importing it ourselves (torch, jax, optax, tensorflow)."""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any, Callable, Sequence

Callback = Callable[[ModuleType], Any]


class _PostImportFinder:
    """A meta path finder that answers only for the module names it watches:
    it finds the real spec through the finders after it and wraps the loader
    so that the name's callbacks run once the module has finished importing.
    It watches "torch", "jax", "optax" and "tensorflow" (so that none is ever
    imported by us) and, should torch not have imported it,
    "torch.optim.optimizer"."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callback]] = {}
        self._busy = False

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in self.callbacks or self._busy:
            return None
        self._busy = True
        try:
            spec = _find_real_spec(self, fullname, path, target)
            if spec is None or spec.loader is None:
                return None
            if not hasattr(spec.loader, "exec_module"):
                return None
            _wrap_loader(spec.loader, fullname)
            return spec
        except Exception:
            # Let the normal import machinery try, and fail, on its own.
            return None
        finally:
            self._busy = False

    def invalidate_caches(self) -> None:
        pass


_finder = _PostImportFinder()


def after_import(name: str, callback: Callback) -> None:
    """Run callback(module) now if name is imported, else once it is. A name
    may have several callbacks; they run in the order they were added."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    _finder.callbacks.setdefault(name, []).append(callback)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def _find_real_spec(me: _PostImportFinder, fullname: str, path: Sequence[str] | None,
                    target: ModuleType | None) -> ModuleSpec | None:
    for finder in list(sys.meta_path):
        if finder is me:
            continue
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        spec = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _wrap_loader(loader: Any, name: str) -> None:
    current: Any = getattr(loader, "exec_module", None)
    if getattr(current, "_batchfit_wrapped", False):
        return  # a loader shared between specs, wrapped already
    original = current

    def exec_module(module: ModuleType) -> None:
        try:
            original(module)
        finally:
            # An instance attribute shadowed the class's method; drop it so the
            # loader is as it was.
            try:
                del loader.exec_module
            except Exception:
                pass
        # One-shot: find_spec may run more often than the module is executed
        # (importlib.util.find_spec("torch"), as libraries do to probe).
        callbacks = _finder.callbacks.pop(name, [])
        if not _finder.callbacks:
            _remove_finder()
        for callback in callbacks:
            try:
                callback(module)
            except Exception:
                pass

    exec_module._batchfit_wrapped = True  # type: ignore[attr-defined]
    loader.exec_module = exec_module


def _remove_finder() -> None:
    try:
        sys.meta_path[:] = [f for f in sys.meta_path if f is not _finder]
    except Exception:
        pass
