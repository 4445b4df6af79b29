# Trains with the stand-in JAX and optax (testdata/fakejaxsteps) on batches
# whose length varies from step to step, as a jitted step retraced for each
# new shape sees them; the parameters are plain numbers, not arrays.
import jax
import optax


class Batch(object):
    """An array of a shape."""

    def __init__(self, *shape):
        self.shape = shape


tx = optax.sgd(0.1)
params = [1.0, 2.0]
opt_state = tx.init(params)


def train_step(params, opt_state, batch):
    updates, opt_state = tx.update(params, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


step = jax.jit(train_step)
for i, n in enumerate([8, 16, 12, 32]):
    params, opt_state = step(params, opt_state, {"tokens": Batch(4, n), "mask": Batch(4, n)})
    print("step", i + 1)
print("done")
