"""What XLA's compile says of a jitted step before it runs, against what
the step then does: runs SCRIPT (a JAX training script) with jax.jit
wrapped so that the first call of each jitted function is timed and, in
mode aot, compiled ahead of the call first (lower().compile()) and its
memory_analysis() read. Prints one line, PROBE {...}: the pool's figures
before the call, the lowering's, compile's and first call's seconds, the
analysis, the peak after the first call and at the end, and the error of a
call that failed. Backs batchfit/_runtime/jax_plan.py (docs/design/
jax-step-plan.md): the call reuses the compile, and the analysis is the
step's memory. Set JAX_COMPILATION_CACHE_DIR or XLA_FLAGS to see what a
cache does to the plan.

    XLA_PYTHON_CLIENT_MEM_FRACTION=F python3 bench/probes/jax_step_plan.py aot \\
        examples/jax_optax/train.py --batch-size 671
"""

import json
import runpy
import sys
import time

import jax

mode, script, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
if mode not in ("plain", "aot"):
    sys.exit("usage: jax_step_plan.py plain|aot SCRIPT [ARGS...]")
facts = {"mode": mode, "jax": jax.__version__, "argv": argv}
real_jit = jax.jit


def peak():
    return (jax.local_devices()[0].memory_stats() or {}).get("peak_bytes_in_use")


def jit(*args, **kwargs):
    made = real_jit(*args, **kwargs)
    if not args:
        return made
    calls = [0]

    def call(*a, **kw):
        calls[0] += 1
        if calls[0] > 1 or "first_call_s" in facts:
            return made(*a, **kw)
        stats = jax.local_devices()[0].memory_stats() or {}
        facts["in_use_before"], facts["limit"] = stats.get("bytes_in_use"), stats.get("bytes_limit")
        if mode == "aot":
            t0 = time.perf_counter()
            lowered = made.lower(*a, **kw)
            t1 = time.perf_counter()
            analysis = lowered.compile().memory_analysis()
            facts["lower_s"], facts["compile_s"] = t1 - t0, time.perf_counter() - t1
            facts["analysis"] = {k: getattr(analysis, k) for k in dir(analysis)
                                 if not k.startswith("_") and isinstance(getattr(analysis, k), (int, float))}
        t = time.perf_counter()
        try:
            out = jax.block_until_ready(made(*a, **kw))
        except Exception as e:
            facts["error"] = str(e)[:300]
            raise
        finally:
            facts["first_call_s"] = time.perf_counter() - t
        facts["peak_after_first"] = peak()
        return out

    return call


jax.jit = jit
start = time.perf_counter()
sys.argv = [script] + argv
try:
    runpy.run_path(script, run_name="__main__")
finally:
    facts["total_s"] = time.perf_counter() - start
    try:
        facts["peak"] = peak()
    except Exception:
        pass
    print("PROBE " + json.dumps(facts), flush=True)
