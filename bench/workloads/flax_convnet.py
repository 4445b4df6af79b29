"""A Flax convolutional net trained with optax: a small ResNet (a stem and
three stages of one basic block each, with batch norm) on random 128 px images in bfloat16, for a
few steps at --batch-size. One jitted function takes a step, so one call of
it is one training step; XLA compiles and autotunes the convolutions for each
batch size, as a Flax user's first step does.

Its pool is jaxlib's (75 % of the card unless XLA_PYTHON_CLIENT_MEM_FRACTION
says otherwise); a batch that does not fit ends the process with XLA's
"RESOURCE_EXHAUSTED: Out of memory".

    python3 bench/workloads/flax_convnet.py --batch-size 64
"""

import argparse
import os
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, required=True)
p.add_argument("--steps", type=int, default=int(os.environ.get("BATCHFIT_STEPS") or 3))
p.add_argument("--image-size", type=int, default=128)
a = p.parse_args()


class Block(nn.Module):
    features: int
    stride: int

    @nn.compact
    def __call__(self, x, train):
        norm = partial(nn.BatchNorm, use_running_average=not train, dtype=jnp.bfloat16)
        y = nn.Conv(self.features, (3, 3), (self.stride, self.stride), use_bias=False, dtype=jnp.bfloat16)(x)
        y = nn.relu(norm()(y))
        y = nn.Conv(self.features, (3, 3), use_bias=False, dtype=jnp.bfloat16)(y)
        y = norm(scale_init=nn.initializers.zeros)(y)
        if x.shape != y.shape:
            x = nn.Conv(self.features, (1, 1), (self.stride, self.stride), use_bias=False, dtype=jnp.bfloat16)(x)
            x = norm()(x)
        return nn.relu(x + y)


class ResNet(nn.Module):
    classes: int = 1000

    @nn.compact
    def __call__(self, x, train=True):
        x = nn.Conv(64, (7, 7), (2, 2), use_bias=False, dtype=jnp.bfloat16)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train, dtype=jnp.bfloat16)(x))
        x = nn.max_pool(x, (3, 3), (2, 2), padding="SAME")
        for i, features in enumerate((64, 128, 256)):
            x = Block(features, 2 if i > 0 else 1)(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.classes, dtype=jnp.float32)(x)


model = ResNet()
key = jax.random.PRNGKey(0)
images = jax.random.normal(key, (a.batch_size, a.image_size, a.image_size, 3), jnp.bfloat16)
labels = jax.random.randint(key, (a.batch_size,), 0, 1000)
variables = model.init(key, images[:1], train=False)
params, batch_stats = variables["params"], variables["batch_stats"]
tx = optax.sgd(0.1, momentum=0.9)
opt_state = tx.init(params)


@jax.jit
def train_step(params, batch_stats, opt_state, images, labels):
    def loss_fn(params):
        logits, updates = model.apply({"params": params, "batch_stats": batch_stats}, images,
                                      mutable=["batch_stats"])
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        return loss, updates["batch_stats"]

    (loss, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), batch_stats, opt_state, loss


for _ in range(a.steps):
    params, batch_stats, opt_state, loss = train_step(params, batch_stats, opt_state, images, labels)
jax.block_until_ready(loss)
