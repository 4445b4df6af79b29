"""What XLA's compile says of a JAX step before it runs.

The first call of a jitted step function with new argument shapes
is compiled ahead of the call (jitted.lower(...).compile(): jax keeps the
trace, the lowering and the executable, so the call that follows reuses
them), and the executable's memory_analysis() says what the step will
allocate in the pool beyond what it is given: its outputs, less those that
reuse a donated argument's buffer, and one temporary buffer. What the pool
already holds (bytes_in_use: the arguments, the parameters and optimizer
state among them) stays held while the step runs, so

    need = outputs - aliased + temp

must fit in what the pool has free. A step whose need exceeds the free
memory by more than PLAN_SLACK of the pool cannot run: the trial ends at
once as out of memory (status 1, as XLA's error would end it), with the
plan's figures as its refused request, and the execution and the error's
own handling are not waited for. Within the slack the step runs and the
pool decides: memory_stats() can count a buffer whose deletion waits for
work still on the device. The exit event carries the largest plan seen
("plan"), which batchfit records with the trial.

Only step functions are judged (those whose trace called an optax update,
jax_steps), in the process that installed the hook, and only where the
backend keeps memory statistics (not the CPU). Anything that fails here is
left to the program's own call.

No compile cache is used: with jax's persistent compilation cache on, XLA
planned the same step differently from the user's run, which has none
(docs/design/jax-step-plan.md).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

from batchfit._runtime.state import state

# The share of the pool by which a plan must overrun the free memory to be
# stopped before it runs.
PLAN_SLACK = 0.005
# Begins the line the adapter writes to stderr for a stopped plan.
PLAN_STOPPED = "batchfit adapter: XLA's plan does not fit: "

# Signatures judged per step function, at most: a function retraced for
# every call is left alone after these.
_MAX_SIGNATURES = 64
# Functions judged, at most: a program that jits a new function every step
# is left alone after these.
_MAX_FUNCTIONS = 256

_judged: dict[int, set[Any]] = {}  # signatures judged, by id() of the jitted function's Python function
_largest: dict[str, int] | None = None


def before_call(jitted: Any, fun: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                is_step: Callable[[], bool]) -> None:
    """Judge the plan of jitted, made from fun, for these arguments before it
    is called, the first time fun is called with their shapes (jax.jit(f)
    made again shares f's trace and executable); is_step says, after the
    compile has traced it, whether it is a training step."""
    if state.path is None or os.getpid() != state.pid:
        return
    try:
        if id(fun) not in _judged and len(_judged) >= _MAX_FUNCTIONS:
            return
        seen = _judged.setdefault(id(fun), set())
        if len(seen) >= _MAX_SIGNATURES:
            return
        signature = _signature(args, kwargs)
        if signature is None or signature in seen:
            return
        seen.add(signature)
        pools = _pools()
        if not pools:
            return
        analysis = jitted.lower(*args, **kwargs).compile().memory_analysis()
        if not is_step():
            return
        plan = _plan(analysis, pools)
    except Exception:
        return
    if plan is None:
        return
    _keep(plan)
    if plan["need"] > plan["free"] + PLAN_SLACK * plan["limit"]:
        _stop(plan)


def event_fields() -> dict[str, Any]:
    """The exit event's "plan": the largest step plan judged."""
    return {"plan": dict(_largest)} if _largest else {}


def _signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What jax compiles anew for: the tree's structure and each array's
    shape and dtype; other leaves by value (static arguments, Python
    scalars' types). None when a leaf cannot be told by a hashable key."""
    tree_util = sys.modules.get("jax.tree_util")
    if tree_util is None:
        return None
    leaves, tree = tree_util.tree_flatten((args, kwargs))
    key: list[Any] = [tree]
    for leaf in leaves:
        shape = getattr(leaf, "shape", None)
        dtype = getattr(leaf, "dtype", None)
        if shape is not None and dtype is not None:
            key.append((tuple(shape), str(dtype), bool(getattr(leaf, "weak_type", False))))
        elif isinstance(leaf, (bool, int, float, complex, str, type(None))):
            key.append((type(leaf), leaf if isinstance(leaf, (bool, str, type(None))) else None))
        else:
            try:
                hash(leaf)
            except TypeError:
                return None
            key.append(leaf)
    return tuple(key)


def _pools() -> list[tuple[int, int]]:
    """(bytes_in_use, bytes_limit) of each local device that keeps memory
    statistics, once the program has started the backend."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    started = getattr(bridge, "backends_are_initialized", None)
    jax = sys.modules.get("jax")
    if jax is None or not callable(started) or not started():
        return []
    pools = []
    for device in jax.local_devices():
        stats = device.memory_stats()
        if stats and stats.get("bytes_limit"):
            pools.append((int(stats.get("bytes_in_use", 0)), int(stats["bytes_limit"])))
    return pools


def _plan(analysis: Any, pools: list[tuple[int, int]]) -> dict[str, int] | None:
    """The plan's figures against the device with the least free memory
    (an SPMD step's analysis is each device's)."""
    if analysis is None:
        return None

    def size(name: str) -> int:
        value = getattr(analysis, name, None)
        return int(value) if isinstance(value, (int, float)) and value > 0 else 0

    arguments = size("argument_size_in_bytes")
    outputs = size("output_size_in_bytes")
    alias = size("alias_size_in_bytes")
    temp = size("temp_size_in_bytes")
    if not (arguments or outputs or temp):
        return None
    in_use, limit = min(pools, key=lambda p: p[1] - p[0])
    plan = {
        "arguments": arguments, "outputs": outputs, "alias": alias, "temp": temp,
        "need": max(outputs - alias, 0) + temp, "in_use": in_use, "limit": limit,
        "free": max(limit - in_use, 0),
    }
    return plan


def _keep(plan: dict[str, int]) -> None:
    global _largest
    if _largest is None or plan["need"] + plan["in_use"] >= _largest["need"] + _largest["in_use"]:
        _largest = plan


def _stop(plan: dict[str, int]) -> None:
    """End the trial as out of memory, as XLA's error would, before the
    step runs (steps.leave): its exception says why, and its refused
    request is the plan's need against the pool's figures; status 1."""
    from batchfit._runtime import frameworks, steps

    gib = 1 << 30
    why = (f"RESOURCE_EXHAUSTED (XLA's plan, before the step ran): the step needs {plan['need'] / gib:.2f} GiB "
           f"more, the pool has {plan['free'] / gib:.2f} GiB free of {plan['limit'] / gib:.2f} GiB")
    try:
        frameworks.plan_refused(plan)
    except Exception:
        pass
    steps.leave({"exception": why, "oom": True, "plan_stopped": True}, 1, f"{PLAN_STOPPED}{why}\n")
