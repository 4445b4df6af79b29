"""The Trainer example (train.py) with batchfit's one line: the script finds
its own batch size, then trains at it, in one run.

    python oneline.py --output_dir /tmp/hf-out --bf16 --report_to none --save_strategy no --max_steps 20

per_device_train_batch_size is batchfit.batch_size(memory_limit="24GiB"):
run plainly, that searches this very command (each trial runs it again,
stopped by batchfit after 3 optimizer steps, with its size from batchfit)
and returns the largest size that runs on a 24 GiB card; the Trainer then
trains at it. Run again unchanged, the answer comes from batchfit's history
at once.

The size is found before HfArgumentParser builds TrainingArguments, as a
default of the parser: TrainingArguments starts CUDA as it is made (its
__post_init__ reads .device, which calls torch.cuda.set_device), and a
search must run before this process touches the GPU. A script that makes
TrainingArguments itself passes it as a keyword argument, which Python
evaluates first:

    TrainingArguments(output_dir, per_device_train_batch_size=batchfit.batch_size(memory_limit="24GiB"), ...)

Giving --per_device_train_batch_size on the command line overrides the
search's size in every trial too: do not.
"""

import sys

from transformers import HfArgumentParser, Trainer, TrainingArguments

import batchfit
from train import DataArguments, ModelArguments, model_and_data


def main() -> None:
    parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
    parser.set_defaults(per_device_train_batch_size=batchfit.batch_size(memory_limit="24GiB", steps=3))
    model_args, data_args, training_args = parser.parse_args_into_dataclasses()
    model, train_dataset = model_and_data(model_args, data_args, training_args)
    trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)
    result = trainer.train()
    trainer.log_metrics("train", result.metrics)
    print(f"trained at per_device_train_batch_size {training_args.per_device_train_batch_size}", file=sys.stderr)


if __name__ == "__main__":
    main()
