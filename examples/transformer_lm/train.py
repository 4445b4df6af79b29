"""A GPT-style decoder-only language model trained on random tokens: a second
real workload for batchfit, whose memory is dominated by activations and the
logits over a 32000-token vocabulary rather than by convolutions.

Pre-norm blocks of causal self-attention and a GELU MLP, tied input and output
embeddings, bf16 autocast, AdamW. No downloads: the tokens come from
torch.randint. A CUDA out-of-memory error is not caught.

    python train.py --batch-size 8 --steps 3
    batchfit search -- python train.py --batch-size {}

The batch size defaults to $BATCHFIT_BATCH_SIZE and the step count to
$BATCHFIT_STEPS (else 2), which batchfit sets for every trial.
"""

import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0: fused kernels
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = scores.masked_fill(causal, float("-inf")).softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, seq_len, d_model, layers, heads):
        super().__init__()
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.tokens.weight
        self.apply(self._init)

    @staticmethod
    def _init(module):
        # GPT-2's initialization; PyTorch's default N(0, 1) embedding, tied to
        # the output layer, would start the loss far above log(vocab).
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tokens(idx) + self.positions(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def env_int(name, default):
    value = os.environ.get(name)
    return int(value) if value else default


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=int, default=env_int("BATCHFIT_BATCH_SIZE", None),
                   help="sequences per step (default: $BATCHFIT_BATCH_SIZE)")
    p.add_argument("--steps", type=int, default=env_int("BATCHFIT_STEPS", 2),
                   help="optimizer steps (default: $BATCHFIT_STEPS, else 2)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cuda (default), or cpu for a smoke test")
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-4)
    args = p.parse_args(argv)
    if args.batch_size is None:
        p.error("--batch-size is required (or set BATCHFIT_BATCH_SIZE)")
    for name in ("batch_size", "steps", "seq_len", "vocab", "d_model", "layers", "heads"):
        if getattr(args, name) < 1:
            p.error("--%s must be positive" % name.replace("_", "-"))
    if args.d_model % args.heads:
        p.error("--d-model must be a multiple of --heads")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("train.py: error: CUDA is not available (use --device cpu for a smoke test)")
    torch.manual_seed(0)
    model = GPT(args.vocab, args.seq_len, args.d_model, args.layers, args.heads).to(args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        # One extra token so that inputs and targets are shifted views.
        data = torch.randint(0, args.vocab, (args.batch_size, args.seq_len + 1))
        if args.device == "cuda":
            data = data.cuda()
        inputs, targets = data[:, :-1], data[:, 1:]
        with torch.autocast(args.device, dtype=torch.bfloat16):
            logits = model(inputs)
            loss = F.cross_entropy(logits.reshape(-1, args.vocab), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        print("step %d/%d batch %d loss %.4f %.3fs" % (
            step, args.steps, args.batch_size, loss.item(), time.perf_counter() - start), flush=True)


if __name__ == "__main__":
    main()
