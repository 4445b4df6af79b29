"""A ResNet image classifier trained with Lightning and its CLI, written as an
ordinary Lightning script: batchfit's Lightning example.

A LightningModule (a torchvision ResNet, weights=None, AdamW) and a
LightningDataModule of random uint8 images and random labels, made from one
small buffer so that loading costs almost nothing; LightningCLI reads every
option from the command line. The batch size is the data module's
--data.batch_size, as in most Lightning projects; --trainer.max_steps N stops
after N optimizer steps, and without it the Trainer runs --trainer.max_epochs
over --data.num_samples images, which at any batch size that fills a GPU is
minutes of training. Nothing is downloaded.

    python train.py fit --data.batch_size 256 --trainer.max_steps 3 \\
        --trainer.precision 16-mixed --trainer.logger false --trainer.enable_checkpointing false
    batchfit search -- python train.py fit --data.batch_size {} \\
        --trainer.precision 16-mixed --trainer.logger false --trainer.enable_checkpointing false

A CUDA out-of-memory error is not caught: Lightning lets it end the process.
Where jsonargparse (LightningCLI's parser) is not installed, the script reads
the same flags itself (plain_cli).
To train with what batchfit found, add its callback (batchfit's Python
package on the path):

    python train.py fit --trainer.callbacks+=batchfit.lightning.BatchSizeFromBatchfit \\
        --trainer.callbacks.init_args.result batchfit.json ...
"""

import importlib
import sys

import lightning as L
import torch
import torch.nn.functional as F
import torchvision
from lightning.pytorch.cli import LightningCLI

# ImageNet statistics, on the 0..255 scale of the uint8 images.
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


class RandomImages(torch.utils.data.Dataset):
    """num_samples random uint8 images with random labels, drawn from a
    buffer of 64 made once: every index gives the same pair every time."""

    def __init__(self, num_samples: int, image_size: int, num_classes: int):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (64, 3, image_size, image_size), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, num_classes, (64,), generator=g)
        self.num_samples = num_samples

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, i: int):
        return self.images[i % 64], self.labels[i % 64]


class RandomImageData(L.LightningDataModule):
    def __init__(self, batch_size: int = 32, num_samples: int = 100_000, image_size: int = 224,
                 num_classes: int = 1000, num_workers: int = 0):
        super().__init__()
        self.save_hyperparameters()
        self.batch_size = batch_size

    def train_dataloader(self):
        h = self.hparams
        data = RandomImages(h.num_samples, h.image_size, h.num_classes)
        return torch.utils.data.DataLoader(data, batch_size=self.batch_size, shuffle=True,
                                           num_workers=h.num_workers, drop_last=True)


class ResNetClassifier(L.LightningModule):
    def __init__(self, arch: str = "resnet18", num_classes: int = 1000, lr: float = 1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = getattr(torchvision.models, arch)(weights=None, num_classes=num_classes)
        self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(STD).view(1, 3, 1, 1), persistent=False)

    def training_step(self, batch, batch_idx):
        images, labels = batch
        loss = F.cross_entropy(self.net((images.float() - self.mean) / self.std), labels)
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)


def main():
    try:
        # LightningCLI saves the config to the log folder and refuses to
        # overwrite one already there: every run after the first, a
        # batch-size search's trials included, would stop with an error.
        LightningCLI(ResNetClassifier, RandomImageData, seed_everything_default=0,
                     save_config_kwargs={"overwrite": True})
    except ModuleNotFoundError as e:
        if "jsonargparse" not in str(e):
            raise
        # LightningCLI needs jsonargparse[signatures], which not every
        # Lightning install has: read the same flags without it.
        plain_cli(sys.argv[1:])


def plain_cli(argv):
    """The part of LightningCLI's command line this script uses, without
    jsonargparse: `fit`, then --model.X, --data.X, --trainer.X and
    --seed_everything values, and --trainer.callbacks+=CLASS with
    --trainer.callbacks.init_args.X values for the last callback named."""
    if not argv or argv[0] != "fit":
        sys.exit("train.py: error: only the fit subcommand is supported without jsonargparse")
    groups = {"model": {}, "data": {}, "trainer": {}}
    callbacks, seed, args = [], 0, argv[1:]
    while args:
        flag, args = args[0], args[1:]
        if not flag.startswith("--"):
            sys.exit(f"train.py: error: unexpected argument {flag!r}")
        name, eq, value = flag[2:].partition("=")
        if not eq:
            if not args:
                sys.exit(f"train.py: error: {flag} needs a value")
            value, args = args[0], args[1:]
        if name == "trainer.callbacks+":
            module, _, cls = value.rpartition(".")
            callbacks.append((getattr(importlib.import_module(module), cls), {}))
        elif name.startswith("trainer.callbacks.init_args.") or name.startswith("trainer.callbacks."):
            if not callbacks:
                sys.exit(f"train.py: error: {flag} before --trainer.callbacks+=CLASS")
            callbacks[-1][1][name.rpartition(".")[2]] = plain_value(value)
        elif name == "seed_everything":
            seed = int(value)
        elif name.partition(".")[0] in groups and "." in name:
            group, _, key = name.partition(".")
            groups[group][key] = plain_value(value)
        else:
            sys.exit(f"train.py: error: unrecognized argument {flag}")
    L.seed_everything(seed)
    model = ResNetClassifier(**groups["model"])
    data = RandomImageData(**groups["data"])
    trainer = L.Trainer(callbacks=[cls(**kw) for cls, kw in callbacks], **groups["trainer"])
    trainer.fit(model, datamodule=data)


def plain_value(text):
    """A command-line value as jsonargparse would read it: true, false,
    null, numbers, else the string."""
    lowered = {"true": True, "false": False, "null": None, "none": None}
    if text.lower() in lowered:
        return lowered[text.lower()]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


if __name__ == "__main__":
    main()
