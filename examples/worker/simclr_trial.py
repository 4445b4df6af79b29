"""The SimCLR workload as a Trial for batchfit's warm worker: the SimCLR
ResNet-50 of examples/simclr_resnet50/train.py (its model, loss and scaler
are imported from there), one training step per step() call.

    batchfit search --worker --memory-limit 24GiB -- \
        python -m batchfit.worker examples/worker/simclr_trial.py:Trial
    batchfit doctor -- python -m batchfit.worker examples/worker/simclr_trial.py:Trial

A step does what one iteration of train.py's loop does, in the same order:
two uint8 views made on the CPU and copied to the GPU, the forward pass and
NT-Xent loss under fp16 autocast, zero_grad(set_to_none=True), the scaled
backward, the scaler's step and update. Run by `batchfit search` without
--worker (or `python -m batchfit.worker --once SIZE ...`), the same Trial is
one fresh process per trial, like train.py.

Environment: SIMCLR_IMAGE_SIZE (224), SIMCLR_OUT_DIM (128), SIMCLR_DEVICE
(cuda, or cpu for a smoke test).
"""

import contextlib
import importlib.util
import os

import torch


def _load_train():
    # train.py is a script, not a package: load it by path under a name of
    # its own, so that no other module called "train" can stand in for it.
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "simclr_resnet50", "train.py")
    spec = importlib.util.spec_from_file_location("batchfit_example_simclr_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train = _load_train()


class Trial(object):
    def setup(self):
        device = os.environ.get("SIMCLR_DEVICE", "cuda")
        self.cuda = device == "cuda"
        if self.cuda and not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available (SIMCLR_DEVICE=cpu runs a smoke test)")
        torch.manual_seed(0)
        self.device = device
        self.image_size = int(os.environ.get("SIMCLR_IMAGE_SIZE", "224"))
        self.model = train.ModelWrapper(out_dim=int(os.environ.get("SIMCLR_OUT_DIM", "128"))).to(device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.scaler = train.make_scaler(enabled=self.cuda)

    def step(self, batch_size):
        shape = (batch_size, 3, self.image_size, self.image_size)
        batch = dict(
            aug1=torch.randint(0, 256, shape, dtype=torch.uint8),
            aug2=torch.randint(0, 256, shape, dtype=torch.uint8),
        )
        if self.cuda:
            batch = {k: v.cuda() for k, v in batch.items()}
        autocast = torch.autocast("cuda", dtype=torch.float16) if self.cuda else contextlib.nullcontext()
        with autocast:
            z1, z2 = self.model(batch)
            loss = train.nt_xent(z1, z2)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
