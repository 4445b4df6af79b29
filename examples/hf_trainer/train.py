"""A causal language model trained with the Hugging Face Trainer, written as an
ordinary HF training script: batchfit's Trainer example.

The model is a small Llama built from a config with random weights, and the
data are random token ids, so nothing is downloaded (no weights, tokenizer or
dataset). Every TrainingArguments option comes from the command line through
HfArgumentParser: the batch size is --per_device_train_batch_size, and training
runs for --max_steps optimizer steps or, without it, --num_train_epochs (3 by
default) over --num_samples sequences, which at any batch size that fills a
GPU is minutes of training.

    python train.py --output_dir /tmp/hf-out --per_device_train_batch_size 32 \\
        --max_steps 3 --bf16 --report_to none --save_strategy no --logging_steps 1
    batchfit search --steps 3 -- python train.py --output_dir /tmp/hf-out \\
        --per_device_train_batch_size {} --bf16 --report_to none --save_strategy no

A CUDA out-of-memory error is not caught: the Trainer lets it end the process.
"""

from dataclasses import dataclass, field
from typing import Optional

import torch
from transformers import HfArgumentParser, LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments, set_seed


@dataclass
class ModelArguments:
    vocab_size: int = field(default=32000, metadata={"help": "tokens in the vocabulary"})
    hidden_size: int = field(default=512, metadata={"help": "width of the residual stream"})
    intermediate_size: int = field(default=1408, metadata={"help": "width of the MLP"})
    num_hidden_layers: int = field(default=8, metadata={"help": "decoder layers"})
    num_attention_heads: int = field(default=8, metadata={"help": "attention heads"})


@dataclass
class DataArguments:
    seq_len: int = field(default=512, metadata={"help": "tokens per training sequence"})
    num_samples: int = field(default=200_000, metadata={"help": "sequences in one epoch"})
    batchfit_result: Optional[str] = field(default=None, metadata={
        "help": "train at the batch size of this batchfit result (a file from batchfit search --json, a run id or "
                "'latest'), through batchfit's TrainerCallback; refused when it was measured for another run"})


class RandomTokens(torch.utils.data.Dataset):
    """num_samples sequences of random token ids, made on demand; the same
    index always gives the same sequence."""

    def __init__(self, num_samples: int, seq_len: int, vocab_size: int, seed: int):
        self.num_samples, self.seq_len, self.vocab_size, self.seed = num_samples, seq_len, vocab_size, seed

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        generator = torch.Generator().manual_seed(self.seed * self.num_samples + index)
        ids = torch.randint(0, self.vocab_size, (self.seq_len,), generator=generator)
        # The model shifts the labels itself: next-token prediction.
        return {"input_ids": ids, "labels": ids}


def model_and_data(model_args: "ModelArguments", data_args: "DataArguments", training_args: TrainingArguments):
    """The seeded model and dataset the arguments describe."""
    set_seed(training_args.seed)
    config = LlamaConfig(
        vocab_size=model_args.vocab_size,
        hidden_size=model_args.hidden_size,
        intermediate_size=model_args.intermediate_size,
        num_hidden_layers=model_args.num_hidden_layers,
        num_attention_heads=model_args.num_attention_heads,
        max_position_embeddings=data_args.seq_len,
        use_cache=False,
    )
    model = LlamaForCausalLM(config)
    return model, RandomTokens(data_args.num_samples, data_args.seq_len, model_args.vocab_size, training_args.seed)


def main() -> None:
    parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
    model_args, data_args, training_args = parser.parse_args_into_dataclasses()
    model, train_dataset = model_and_data(model_args, data_args, training_args)
    callbacks = []
    if data_args.batchfit_result:
        from batchfit.hf import BatchSizeFromBatchfit

        callbacks.append(BatchSizeFromBatchfit(data_args.batchfit_result))
    trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset, callbacks=callbacks)
    result = trainer.train()
    trainer.log_metrics("train", result.metrics)


if __name__ == "__main__":
    main()
