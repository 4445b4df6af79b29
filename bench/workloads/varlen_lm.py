"""A GPT-2-sized language model trained in a plain PyTorch loop on batches
of varying length: a map-style dataset whose items are token sequences,
drawn in order through a DataLoader whose collate_fn pads each batch to its
longest sequence (dynamic padding). Its six batches are about 384, 512,
1024, 640, 2048 and 768 tokens long: the longest comes at step 5 of 6, so a
few steps in the loader's order never meet it. The whole program is the six
steps, one epoch.

    python3 bench/workloads/varlen_lm.py --batch-size 8
"""

import argparse
import importlib.util
import os
import random

import torch
import torch.nn.functional as F

spec = importlib.util.spec_from_file_location(
    "transformer_lm", os.path.join(os.path.dirname(__file__), "..", "..", "examples", "transformer_lm", "train.py"))
lm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lm)

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, required=True)
p.add_argument("--lengths", default="384,512,1024,640,2048,768", help="each batch's longest sequence, in order")
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--d-model", type=int, default=768)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--heads", type=int, default=12)
p.add_argument("--device", default="cuda")
a = p.parse_args()
longest = [int(n) for n in a.lengths.split(",")]


class Sequences(torch.utils.data.Dataset):
    """Batch k's items are up to longest[k] tokens; one of them is exactly
    that long, the rest up to a quarter (at most 64 tokens) shorter, in a
    fixed pseudo-random way."""

    def __len__(self):
        return a.batch_size * len(longest)

    def __getitem__(self, i):
        k, j = divmod(i, a.batch_size)
        n = longest[k] - (0 if j == 0 else random.Random(i).randrange(min(64, longest[k] // 4) + 1))
        return torch.randint(0, a.vocab, (n + 1,), generator=torch.Generator().manual_seed(i))


def pad(items):
    n = max(len(x) for x in items)
    return torch.stack([F.pad(x, (0, n - len(x))) for x in items])


torch.manual_seed(0)
loader = torch.utils.data.DataLoader(Sequences(), batch_size=a.batch_size, collate_fn=pad)
model = lm.GPT(a.vocab, max(longest), a.d_model, a.layers, a.heads).to(a.device)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
for step, batch in enumerate(loader, 1):
    batch = batch.to(a.device)
    inputs, targets = batch[:, :-1], batch[:, 1:]
    with torch.autocast(a.device, dtype=torch.bfloat16):
        loss = F.cross_entropy(model(inputs).reshape(-1, a.vocab), targets.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print(f"step {step} tokens {inputs.shape[1]} loss {loss.item():.3f}", flush=True)
