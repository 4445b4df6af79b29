"""The SimCLR ResNet-50 step of examples/simclr_resnet50 as a LightningModule,
so that Lightning's batch-size finder can search the same step batchfit does
(bench/peers.py): the example's model (ResNet-50 and projection head, uint8
views normalized inside) and NT-Xent loss, fp16 mixed precision with
Lightning's GradScaler, AdamW, on random uint8 224x224 views drawn from a
buffer of 64. The batch size is the module's batch_size attribute, which its
train_dataloader reads, as Lightning's tuner needs; --steps optimizer steps,
then the process ends.

    python3 bench/workloads/simclr_lightning.py --batch-size 256 --steps 3
"""

import argparse
import importlib.util
import os

import lightning as L
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "simclr_resnet50", "train.py")
_spec = importlib.util.spec_from_file_location("simclr_example", EXAMPLE)
simclr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(simclr)


class RandomViews(torch.utils.data.Dataset):
    """num_samples pairs of uint8 views, drawn from a buffer of 64 pairs made
    once, so that loading costs next to nothing."""

    def __init__(self, num_samples: int, image_size: int):
        g = torch.Generator().manual_seed(0)
        self.views = torch.randint(0, 256, (2, 64, 3, image_size, image_size), dtype=torch.uint8, generator=g)
        self.num_samples = num_samples

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"aug1": self.views[0, i % 64], "aug2": self.views[1, i % 64]}


class SimCLRModule(L.LightningModule):
    def __init__(self, batch_size: int = 32, image_size: int = 224, lr: float = 1e-3, num_samples: int = 100_000):
        super().__init__()
        self.batch_size = batch_size
        self.image_size, self.lr, self.num_samples = image_size, lr, num_samples
        self.model = simclr.ModelWrapper()

    def train_dataloader(self):
        return torch.utils.data.DataLoader(RandomViews(self.num_samples, self.image_size), batch_size=self.batch_size,
                                           shuffle=True, drop_last=True)

    def training_step(self, batch, batch_idx):
        z1, z2 = self.model(batch)
        return simclr.nt_xent(z1, z2)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


def make_trainer(steps: int, root: str | None = None) -> L.Trainer:
    """The Trainer every run of this workload uses: the plain run, the
    tuner's and each of Accelerate's retries."""
    return L.Trainer(max_steps=steps, precision="16-mixed", logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, default_root_dir=root)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=int, default=int(os.environ.get("BATCHFIT_BATCH_SIZE") or 0) or None)
    p.add_argument("--steps", type=int, default=int(os.environ.get("BATCHFIT_STEPS") or 3))
    a = p.parse_args(argv)
    if not a.batch_size or a.batch_size < 1:
        p.error("give --batch-size a positive number (or set BATCHFIT_BATCH_SIZE)")
    L.seed_everything(0)
    make_trainer(a.steps).fit(SimCLRModule(batch_size=a.batch_size))


if __name__ == "__main__":
    main()
