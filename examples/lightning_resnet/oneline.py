"""The Lightning example (train.py) with batchfit's one line: the Trainer's
BatchFit callback finds the batch size, and the run trains at it.

    python oneline.py --max_steps 20

BatchFit(memory_limit="24GiB") searches this very command when it is made
(each trial runs it again, stopped by batchfit after 3 optimizer steps,
with its size from batchfit) and sets the largest size that runs on a
24 GiB card where Lightning's BatchSizeFinder would: here the data
module's batch_size. It searches when it is made, before the Trainer
starts CUDA (see batchfit/lightning.py). Run again unchanged, the answer
comes from batchfit's history at once.

train.py takes the same callback from its command line:

    python train.py fit --trainer.callbacks+=batchfit.lightning.BatchFit \\
        --trainer.callbacks.init_args.memory_limit 24GiB --trainer.max_steps 20
"""

import argparse
import sys

import lightning as L

from batchfit.lightning import BatchFit
from train import RandomImageData, ResNetClassifier


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    p.add_argument("--arch", default="resnet18", help="a torchvision ResNet")
    p.add_argument("--max_steps", type=int, default=20, help="optimizer steps to train")
    p.add_argument("--precision", default="16-mixed", help="Lightning's precision")
    args = p.parse_args()
    L.seed_everything(0)
    model = ResNetClassifier(arch=args.arch)
    data = RandomImageData()
    trainer = L.Trainer(max_steps=args.max_steps, precision=args.precision, logger=False,
                        enable_checkpointing=False, callbacks=[BatchFit(memory_limit="24GiB", steps=3)])
    trainer.fit(model, datamodule=data)
    print(f"trained at batch_size {data.batch_size}", file=sys.stderr)


if __name__ == "__main__":
    main()
