# A stand-in for JAX with the few things the hook touches, so that its JAX
# step counting runs on a machine without JAX (no package for it here).
# jit and pmap trace a function once per (function, number of arguments), as
# jax caches traces by function, and afterwards return fresh arrays without
# running its Python. FAKE_JAX_PEAK=N makes every device report a peak of N
# bytes; without it memory_stats() is None, as on JAX's CPU backend. A pool
# holds 1000 bytes, 1 of them in use; FAKE_JAX_PLAN gives compiled functions
# a memory analysis.
import os
import types

from jax import core, tree_util  # noqa: F401
from jax._src import xla_bridge  # noqa: F401  (real jax imports it too)

__version__ = "0.99.0+fake"

traces = 0  # times a jitted function's Python ran
blocked = 0  # arrays waited for
_traced = {}  # (function, number of arguments) -> output of its trace


class Array(object):
    def block_until_ready(self):
        global blocked
        blocked += 1
        return self


class _Jitted(object):
    def __init__(self, fun):
        self.__wrapped__ = fun
        self.__name__ = getattr(fun, "__name__", "jitted")
        self.__doc__ = getattr(fun, "__doc__", None)

    def __call__(self, *args):
        return tree_util.tree_map(lambda _: Array(), self._trace(args))

    def _trace(self, args):
        global traces
        key = (self.__wrapped__, len(args))
        if key not in _traced:
            traces += 1
            _traced[key] = self.__wrapped__(*tree_util.tree_map(core.Tracer, args))
        return _traced[key]

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    def lower(self, *args):
        # As jax's, the trace is shared with the calls.
        self._trace(args)
        return _Lowered(self.__name__)

    def _cache_size(self):
        return len(_traced)


class _Lowered(object):
    def __init__(self, name):
        self.name = name

    def as_text(self):
        return "module @jit_" + self.name

    def compile(self):
        return _Compiled()


class _Compiled(object):
    def memory_analysis(self):
        """FAKE_JAX_PLAN=ARGUMENTS,OUTPUTS,ALIAS,TEMP: the compiled step's
        sizes in bytes; without it None, as on a backend without them."""
        plan = os.environ.get("FAKE_JAX_PLAN")
        if not plan:
            return None
        names = ("argument", "output", "alias", "temp")
        analysis = types.SimpleNamespace()
        for name, value in zip(names, plan.split(",")):
            setattr(analysis, name + "_size_in_bytes", int(value))
        return analysis


def jit(*args, **kwargs):
    if not args:
        # The decorator factory of JAX 0.8.1+.
        return lambda fun: _Jitted(fun)
    return _Jitted(args[0])


def pmap(fun, axis_name=None, **kwargs):
    return _Jitted(fun)


def block_until_ready(x):
    for leaf in tree_util.tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x


class _Device(object):
    def memory_stats(self):
        peak = os.environ.get("FAKE_JAX_PEAK")
        if not peak:
            return None
        return {"peak_bytes_in_use": int(peak), "bytes_in_use": 1, "bytes_limit": 1000, "pool_bytes": 1000}


def local_devices():
    return [_Device(), _Device()]
