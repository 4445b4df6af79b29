"""A small GPT-style language model in plain JAX, trained with optax on random
tokens: batchfit's JAX example.

Pre-norm blocks (RMSNorm, causal self-attention, a GELU MLP), learned
positions, tied input and output embeddings; float32 weights, bfloat16
compute, AdamW. One jitted function, train_step, computes the loss and the
gradients and applies optax's update, so one call of it is one training step.
Its memory grows with the batch through the activations kept for the backward
pass (the attention weights above all) and the logits over the vocabulary.

JAX preallocates its memory pool (75 % of the GPU unless
XLA_CLIENT_MEM_FRACTION or the older XLA_PYTHON_CLIENT_MEM_FRACTION says
otherwise). A batch that does not fit in the pool ends the process with XLA's
own "RESOURCE_EXHAUSTED: Out of memory" error, which is not caught.

    python train.py --batch-size 256 --steps 3
    JAX_PLATFORMS=cpu python train.py --batch-size 2 --seq-len 16 --vocab 64 \\
        --d-model 32 --layers 2 --heads 4
    batchfit search --memory-limit 24GiB -- python train.py --batch-size {}

The batch size defaults to $BATCHFIT_BATCH_SIZE and the step count to
$BATCHFIT_STEPS (else 3), which batchfit sets for every trial.
"""

import argparse
import math
import os
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax


def env_int(name, default):
    value = os.environ.get(name)
    return int(value) if value else default


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=int, default=env_int("BATCHFIT_BATCH_SIZE", None),
                   help="sequences per step (default: $BATCHFIT_BATCH_SIZE)")
    p.add_argument("--steps", type=int, default=env_int("BATCHFIT_STEPS", 3),
                   help="training steps (default: $BATCHFIT_STEPS, else 3)")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"],
                   help="compute dtype; the weights and the optimizer state stay float32")
    p.add_argument("--lr", type=float, default=3e-4)
    args = p.parse_args(argv)
    if args.batch_size is None:
        p.error("--batch-size is required (or set BATCHFIT_BATCH_SIZE)")
    if args.batch_size < 1 or args.steps < 1:
        p.error("--batch-size and --steps must be positive")
    if args.d_model % args.heads:
        p.error("--d-model must be a multiple of --heads")
    return args


def init_params(key, vocab, seq_len, d_model, layers):
    """The weights as a pytree of float32 arrays, with GPT-2's N(0, 0.02)."""
    keys = iter(jax.random.split(key, 2 + 4 * layers))

    def normal(*shape):
        return 0.02 * jax.random.normal(next(keys), shape, jnp.float32)

    return {
        "tokens": normal(vocab, d_model),
        "positions": normal(seq_len, d_model),
        "norm": jnp.ones(d_model, jnp.float32),
        "blocks": [
            {
                "norm1": jnp.ones(d_model, jnp.float32),
                "qkv": normal(d_model, 3 * d_model),
                "proj": normal(d_model, d_model),
                "norm2": jnp.ones(d_model, jnp.float32),
                "up": normal(d_model, 4 * d_model),
                "down": normal(4 * d_model, d_model),
            }
            for _ in range(layers)
        ],
    }


def rms_norm(x, scale):
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return (y * scale).astype(x.dtype)


def forward(params, tokens, heads, dtype):
    """The logits [batch, time, vocab] for tokens [batch, time]."""
    b, t = tokens.shape
    p = jax.tree.map(lambda w: w.astype(dtype), params)
    x = p["tokens"][tokens] + p["positions"][:t]
    causal = jnp.tri(t, dtype=bool)
    for block in p["blocks"]:
        h = rms_norm(x, block["norm1"])
        q, k, v = (y.reshape(b, t, heads, -1) for y in jnp.split(h @ block["qkv"], 3, axis=-1))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
        weights = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1).astype(dtype)
        attention = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t, -1)
        x = x + attention @ block["proj"]
        x = x + jax.nn.gelu(rms_norm(x, block["norm2"]) @ block["up"]) @ block["down"]
    return rms_norm(x, p["norm"]) @ p["tokens"].T


def make_train_step(optimizer, heads, dtype):
    def loss_fn(params, batch):
        logits = forward(params, batch[:, :-1], heads, dtype)
        return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), batch[:, 1:]).mean()

    # The weights and the optimizer state are donated: the step updates them
    # in place rather than holding two copies.
    @partial(jax.jit, donate_argnums=(0, 1))
    def train_step(params, opt_state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return train_step


def main(argv=None):
    args = parse_args(argv)
    dtype = jnp.bfloat16 if args.dtype == "bfloat16" else jnp.float32
    params = init_params(jax.random.key(0), args.vocab, args.seq_len, args.d_model, args.layers)
    optimizer = optax.adamw(args.lr, weight_decay=0.1)
    opt_state = optimizer.init(params)
    train_step = make_train_step(optimizer, args.heads, dtype)
    rng = np.random.default_rng(0)
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        # Each sequence is seq_len + 1 tokens: inputs and next-token targets.
        batch = jnp.asarray(rng.integers(0, args.vocab, (args.batch_size, args.seq_len + 1), dtype=np.int32))
        params, opt_state, loss = train_step(params, opt_state, batch)
        # float() waits for the step; the first one includes compilation.
        print(f"step {step}/{args.steps} batch {args.batch_size} loss {float(loss):.4f} "
              f"{time.perf_counter() - start:.3f}s", flush=True)


if __name__ == "__main__":
    main()
