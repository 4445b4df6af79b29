"""JAX's training steps, told from jax.jit (or pmap) and optax's updates.

JAX has no optimizer object that steps. A training step is a function made
by jax.jit (or jax.pmap) that computes gradients and applies an optax
update, called once per step. jax.jit and jax.pmap are wrapped once jax is
imported, and the update of optax's GradientTransformation once optax is;
neither is imported by us. A step is:

- one call of a jitted (or pmapped) function whose trace called an optax
  update (the update of any GradientTransformation: an optimizer, a chain,
  flax's TrainState.apply_gradients). The call counts when it returns to
  the program; a call made while another jitted function is being traced
  is part of that function, not a step. A jitted function that runs several
  steps inside (lax.scan, fori_loop) counts as one.
- one call of an optax update made outside any trace (eager). Only the
  outermost update counts: a chain's inner transformations are part of it.

Not counted: updates traced by a transformation the adapter does not see
(an update inside jax.grad or lax.scan without jit is traced once, not run
per step), calls of ahead-of-time compiled functions
(f.lower(...).compile()), and programs without optax. As for torch, the
first step function (or eager optimizer) that steps owns the count. Each
counted step waits for its outputs (jax.block_until_ready), so that step
times cover the device work and the last step has run before the program
is stopped.
"""

from __future__ import annotations

import functools
import sys
import threading
import types
import weakref
from typing import Any, Callable, Hashable

from batchfit._runtime import batches, jax_plan
from batchfit._runtime.steps import count_step, owns_steps

_jax_local = threading.local()  # .calls: jitted functions being called; .depth: of optax updates
_step_functions: weakref.WeakSet[Any] = weakref.WeakSet()  # functions whose trace called an optax update


def _jax_calls() -> list[_Traced]:
    calls: list[_Traced] | None = getattr(_jax_local, "calls", None)
    if calls is None:
        calls = _jax_local.calls = []
    return calls


def jax_imported(jax: types.ModuleType) -> None:
    for name in ("jit", "pmap"):
        transform = getattr(jax, name, None)
        if callable(transform) and not getattr(transform, "_batchfit_wrapped", False):
            setattr(jax, name, _counting_transform(transform))


def _counting_transform(transform: Callable[..., Any]) -> Callable[..., Any]:
    """jax.jit (or pmap) that hands back the jitted function behind a
    _Traced proxy."""

    @functools.wraps(transform)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        made = transform(*args, **kwargs)
        if args:
            return _traced(made, args[0])
        if callable(made):
            # jax.jit(static_argnames=...) as a decorator factory (JAX 0.8.1+).
            @functools.wraps(made)
            def decorate(fun: Any, *more: Any, **kw: Any) -> Any:
                return _traced(made(fun, *more, **kw), fun)

            return decorate
        return made

    wrapper._batchfit_wrapped = True  # type: ignore[attr-defined]
    return wrapper


def _traced(made: Any, fun: Any) -> Any:
    if not callable(made) or not callable(fun):
        return made
    try:
        return _Traced(made, fun)
    except Exception:
        return made


class _Traced:
    """A jitted (or pmapped) function as the program sees it. Calls go through
    to it, and count as steps once its trace has called an optax update;
    every other attribute (lower, trace, eval_shape, __wrapped__, ...) is the
    jitted function's own. As a class attribute it binds like a method, as
    jax's jitted functions do."""

    def __init__(self, jitted: Callable[..., Any], fun: Any) -> None:
        self._batchfit_jitted = jitted
        # Keyed by the function, not this proxy: jax.jit(f) made again (each
        # epoch, say) reuses f's trace without running f, so a new proxy
        # would never see the update.
        self._batchfit_fun = getattr(fun, "__func__", fun)
        self._batchfit_step = False
        functools.update_wrapper(self, jitted, updated=())

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_batchfit_"):
            raise AttributeError(name)
        return getattr(self._batchfit_jitted, name)

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __repr__(self) -> str:
        return repr(self._batchfit_jitted)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        calls = _jax_calls()
        outermost = not calls
        calls.append(self)
        try:
            if outermost:
                jax_plan.before_call(self._batchfit_jitted, self._batchfit_fun, args, kwargs, self._batchfit_is_step)
            out = self._batchfit_jitted(*args, **kwargs)
        finally:
            calls.pop()
        if not calls and self._batchfit_is_step():
            _jax_step(("jax", id(self._batchfit_fun)), out, (args, kwargs))
        return out

    def _batchfit_is_step(self) -> bool:
        if not self._batchfit_step:
            try:
                self._batchfit_step = self._batchfit_fun in _step_functions
            except TypeError:
                pass
        return self._batchfit_step

    def _batchfit_mark(self) -> None:
        self._batchfit_step = True
        try:
            _step_functions.add(self._batchfit_fun)
        except TypeError:
            pass


def optax_imported(optax: types.ModuleType) -> None:
    for name in ("GradientTransformation", "GradientTransformationExtraArgs"):
        cls = getattr(optax, name, None)
        if not isinstance(cls, type):
            continue
        field = cls.__dict__.get("update")
        # The NamedTuple's field descriptor; subclasses inherit it.
        if field is None or isinstance(field, _UpdateField) or not hasattr(field, "__get__"):
            continue
        setattr(cls, "update", _UpdateField(field))


class _UpdateField:
    """The update field of optax's GradientTransformation: it reads as the
    transformation's update function inside a step counter. Reading through
    the field, rather than wrapping at construction, covers every
    transformation, those made before optax was hooked and by _replace()
    included."""

    def __init__(self, field: Any) -> None:
        self._field = field
        self.__doc__ = getattr(field, "__doc__", None)

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        fn = self._field.__get__(obj, objtype)
        if obj is None or not callable(fn):
            return fn
        return _counted_update(fn)

    def __set__(self, obj: object, value: Any) -> None:
        self._field.__set__(obj, value)

    def __delete__(self, obj: object) -> None:
        self._field.__delete__(obj)


# For update functions without a __dict__.
_update_wrappers: weakref.WeakKeyDictionary[Any, Callable[..., Any]] = weakref.WeakKeyDictionary()


def _counted_update(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn inside a step counter, the same wrapper every time it is read:
    jax.jit(tx.update) called in a loop must hit jax's cache, keyed by the
    function. The wrapper is kept on fn itself where it can be, so both go
    when the transformation does."""
    if getattr(fn, "_batchfit_update", False):
        return fn
    wrapped: Callable[..., Any] | None = getattr(fn, "_batchfit_counted", None)
    if wrapped is None:
        try:
            wrapped = _update_wrappers.get(fn)
        except TypeError:
            wrapped = None
    if wrapped is not None:
        return wrapped
    try:
        wrapped = _make_counted_update(fn)
    except Exception:
        return fn
    try:
        fn._batchfit_counted = wrapped  # type: ignore[attr-defined]
    except Exception:
        try:
            _update_wrappers[fn] = wrapped
        except TypeError:
            pass
    return wrapped


def _make_counted_update(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def update(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_jax_local, "depth", 0)
        _jax_local.depth = depth + 1
        try:
            out = fn(*args, **kwargs)
        finally:
            _jax_local.depth = depth
        if depth == 0:
            _update_returned(fn, args, kwargs, out)
        return out

    update._batchfit_update = True  # type: ignore[attr-defined]
    return update


def _update_returned(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
    """An outermost optax update returned: inside a jitted function's trace,
    that function (the outermost one being called) is a step function;
    outside any trace, the call itself was a step."""
    try:
        calls = _jax_calls()
        if calls:
            calls[0]._batchfit_mark()
        elif not _has_tracer((args, kwargs)):
            _jax_step(("optax", id(fn)), out)
    except Exception:
        pass


def _has_tracer(tree: Any) -> bool:
    """Whether tree holds a JAX tracer: the update is being traced by
    something the adapter does not see (jax.grad, lax.scan, a jit it did not
    make), so this call is not a step."""
    core = sys.modules.get("jax._src.core") or sys.modules.get("jax.core")
    tracer = getattr(core, "Tracer", None)
    leaves = getattr(sys.modules.get("jax.tree_util"), "tree_leaves", None)
    if not isinstance(tracer, type) or not callable(leaves):
        return False
    return any(isinstance(leaf, tracer) for leaf in leaves(tree))


def _jax_step(key: Hashable, out: Any, called: tuple[tuple[Any, ...], dict[str, Any]] | None = None) -> None:
    """A JAX step returned out: wait for it, then count it. called holds a
    jitted step's arguments: their shapes are its batch's (a retrace for
    each new shape)."""
    try:
        if not owns_steps(key):
            return
        if called is not None:
            try:
                batches.note(batches.arguments_of(called[0], called[1]), "jit")
            except Exception:
                pass
        jax: Any = sys.modules.get("jax")
        block = getattr(jax, "block_until_ready", None)
        if callable(block):
            block(out)
        else:
            for leaf in jax.tree_util.tree_leaves(out):
                getattr(leaf, "block_until_ready", lambda: None)()
    except Exception:
        # The step failed on the device (out of memory, say): not a step.
        # The program meets the error itself when it reads the result.
        return
    try:
        count_step(_jax_peak(jax))
    except Exception:
        pass


def _jax_peak(jax: Any) -> int | None:
    """The largest peak_bytes_in_use of the local devices; None where the
    backend keeps no such statistics (the CPU)."""
    try:
        peaks = []
        for device in jax.local_devices():
            stats = device.memory_stats()
            if stats and "peak_bytes_in_use" in stats:
                peaks.append(int(stats["peak_bytes_in_use"]))
        return max(peaks) if peaks else None
    except Exception:
        return None
