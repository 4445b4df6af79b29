# Trains a tiny LM on batches of varying length (dynamic padding) drawn
# through a DataLoader, as a GPT-2 fine-tune does; the longest items come
# last. A batch of more than LIMIT tokens (batch size times padded length,
# env SHAPES_LIMIT, default 160) "runs out of memory": it raises torch's
# CUDA OOM error, as a real card would: the last batch does, no other.
# SHAPES_SLEEP adds seconds to every step. argv: MODE [STEPS]; MODE is
#   map       a map-style dataset of token lists, a padding collate_fn
#   iterable  the same items from an IterableDataset
#   hf        a dict of token lists per item, an HF-style padding collator
#             (attention mask, labels) and a BatchEncoding-like Mapping batch
#   lightning a loop over a DataLoader subclass, Lightning's way (iter, next)
#   fixed     items of one length: every batch has one shape
#   partial   22 items of one length: each epoch ends in a batch of 2
#   forward   no DataLoader: the loop slices batches itself
#   valfirst  two batches of a map-style validation loader whose shapes
#             vary (Lightning's sanity check), then training as iterable
#   valforward  two batches of a fixed-shape validation loader, then
#             training as forward
# It prints "step N tokens T" after each step and "done" after its loop.
import collections
import os
import sys
import time

import torch

mode = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
LIMIT = int(os.environ.get("SHAPES_LIMIT", "160"))  # tokens per batch that fit
BATCH = 4
torch.manual_seed(0)
torch.set_num_threads(1)
# 24 items: short ones first, the longest (48 tokens) last.
lengths = [8 + i for i in range(22)] + [48, 48]
if mode == "fixed":
    lengths = [16] * 24
if mode == "partial":
    lengths = [16] * 22


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return len(lengths)

    def __getitem__(self, i):
        if mode == "hf":
            # As a tokenized datasets.Dataset row: lists, not tensors.
            return {"input_ids": [t % 50 for t in range(lengths[i])], "label": i % 2}
        return list(range(lengths[i]))


class Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        for n in lengths:
            yield list(range(n))


def pad(items):
    longest = max(len(x) for x in items)
    return torch.tensor([x + [0] * (longest - len(x)) for x in items]) % 50


class Encoding(collections.UserDict):
    """A BatchEncoding as transformers makes it: a Mapping of tensors."""


def hf_collate(items):
    longest = max(len(x["input_ids"]) for x in items)
    ids = torch.zeros(len(items), longest, dtype=torch.long)
    mask = torch.zeros(len(items), longest, dtype=torch.long)
    for j, x in enumerate(items):
        ids[j, : len(x["input_ids"])] = torch.tensor(x["input_ids"])
        mask[j, : len(x["input_ids"])] = 1
    return Encoding({"input_ids": ids, "attention_mask": mask, "labels": ids.clone()})


class LightningLoader(torch.utils.data.DataLoader):
    """A DataLoader subclass, as Lightning and accelerate wrap theirs."""


model = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 50))
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def train_step(ids):
    time.sleep(float(os.environ.get("SHAPES_SLEEP", "0")))
    if ids.numel() > LIMIT:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 50), ids.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return ids.numel()


def batches():
    if mode in ("forward", "valforward"):
        for i in range(0, len(lengths), BATCH):
            yield pad([list(range(n)) for n in lengths[i : i + BATCH]])
        return
    if mode in ("iterable", "valfirst"):
        yield from torch.utils.data.DataLoader(Stream(), batch_size=BATCH, collate_fn=pad)
        return
    if mode == "hf":
        for b in torch.utils.data.DataLoader(Tokens(), batch_size=BATCH, collate_fn=hf_collate):
            yield b["input_ids"]
        return
    cls = LightningLoader if mode == "lightning" else torch.utils.data.DataLoader
    loader = cls(Tokens(), batch_size=BATCH, collate_fn=pad)
    it = iter(loader)
    while True:
        try:
            yield next(it)
        except StopIteration:
            return


if mode == "valfirst":
    with torch.no_grad():
        for i, ids in enumerate(torch.utils.data.DataLoader(Tokens(), batch_size=BATCH, collate_fn=pad)):
            model(ids)
            if i == 1:
                break
if mode == "valforward":
    fixed = torch.utils.data.TensorDataset(torch.zeros(8, 16, dtype=torch.long))
    with torch.no_grad():
        for (ids,) in torch.utils.data.DataLoader(fixed, batch_size=BATCH):
            model(ids)

step = 0
for epoch in range(100):
    for ids in batches():
        step += 1
        print("step", step, "tokens", train_step(ids))
        if step >= steps:
            break
    if step >= steps:
        break
print("done")
