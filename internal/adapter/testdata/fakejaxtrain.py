# Trains with the stand-in JAX and optax (testdata/fakejaxsteps) in the ways the
# hook's step counting must tell apart. argv: MODE [STEPS]; it prints "step N"
# after each training step and "done" after its loop, with the stand-ins'
# counters.
import inspect
import sys

import jax
import optax

mode = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
tx = optax.sgd(0.1)
params = [1.0, 2.0]
opt_state = tx.init(params)


def train_step(params, opt_state):
    updates, opt_state = tx.update(params, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


other = optax.sgd(0.2)  # a second optimizer, a discriminator's say


def other_step(params, state):
    return other.update(params, state, params)


if mode == "jit":
    # A step function, a second optimizer's step function and an evaluation:
    # only the first one's calls count.
    step = jax.jit(train_step)
    step2 = jax.jit(other_step)
    evaluate = jax.jit(lambda p: p)
    other_state = other.init(params)
    for i in range(steps):
        params, opt_state = step(params, opt_state)
        _, other_state = step2(params, other_state)
        evaluate(params)
        print("step", i + 1)
elif mode == "rejit":
    # jax.jit made again every step reuses the first trace.
    for i in range(steps):
        params, opt_state = jax.jit(train_step)(params, opt_state)
        print("step", i + 1)
elif mode == "decorated":
    @jax.jit(static_argnames=("n",))
    def decorated(params, opt_state):
        return train_step(params, opt_state)

    for i in range(steps):
        params, opt_state = decorated(params, opt_state)
        print("step", i + 1)
elif mode == "pmap":
    step = jax.pmap(train_step, axis_name="devices")
    for i in range(steps):
        params, opt_state = step(params, opt_state)
        print("step", i + 1)
elif mode == "nested":
    # The update is traced inside an inner jitted function: the outer one,
    # called by the program, is the step.
    inner = jax.jit(train_step)
    outer = jax.jit(lambda p, s: inner(p, s))
    for i in range(steps):
        params, opt_state = outer(params, opt_state)
        print("step", i + 1)
elif mode == "eager":
    # Updates outside any jit: each outermost (chain) update is a step.
    for i in range(steps):
        params, opt_state = train_step(params, opt_state)
        print("step", i + 1)
elif mode == "traced":
    # An update under a trace the hook does not see (jax.grad, say) is not a
    # step; nor is a jitted function without an update.
    evaluate = jax.jit(lambda p: p)
    for i in range(steps):
        tx.update(jax.tree_util.tree_map(jax.core.Tracer, params), opt_state)
        evaluate(params)
        print("step", i + 1)
elif mode == "proxy":
    # What the program sees of a jitted function and of a transformation.
    step = jax.jit(train_step)

    class Model(object):
        scale = 2

        @jax.jit
        def apply(self, x):
            return x

    print("name:", step.__name__)
    print("unwraps to the function:", inspect.unwrap(step) is train_step)
    print("signature:", inspect.signature(step))
    print("lower:", step.lower(params, opt_state).as_text())
    print("cache size:", step._cache_size())
    print("method:", type(Model().apply(1.0)).__name__)
    print("same update each time:", tx.update is tx.update)
    print("class field:", type(optax.GradientTransformation.update).__name__)
    init, update = tx
    print("unpacked:", init is tx.init, inspect.unwrap(tx.update) is update)
    replaced = tx._replace(init=None)
    print("replaced:", inspect.unwrap(replaced.update) is update)
    try:
        tx.update = None
    except AttributeError:
        print("read-only: True")
print("done: traces", jax.traces, "blocked", jax.blocked, "updates", optax.updates)
