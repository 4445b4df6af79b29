"""The HF Trainer fine-tuning a GPT-2-sized classifier on texts of varying
length, padded per batch by DataCollatorWithPadding, as a text
classification fine-tune does. The tokenizer is a word-level one built in
the script (no download); most texts are 32 to 256 words, one in 250 is
900 to 1024, and the Trainer shuffles them (seeded), so that most batches
are short and a few are padded to 1024 tokens. The whole program is one
epoch of --num_texts texts. Takes the Trainer's own flags:

    python3 bench/workloads/hf_padding.py --output_dir /tmp/hf-padding \\
        --per_device_train_batch_size 16 --bf16 --report_to none --save_strategy no
"""

import random
from dataclasses import dataclass

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (DataCollatorWithPadding, GPT2Config, GPT2ForSequenceClassification, HfArgumentParser,
                          PreTrainedTokenizerFast, Trainer, TrainingArguments, set_seed)


@dataclass
class DataArguments:
    num_texts: int = 3000
    words: int = 5000


def texts(n, words, seed):
    r = random.Random(seed)
    for _ in range(n):
        length = r.randint(900, 1024) if r.random() < 0.004 else r.randint(32, 256)
        yield " ".join(f"w{r.randrange(words)}" for _ in range(length)), r.randrange(2)


def main():
    data_args, args = HfArgumentParser((DataArguments, TrainingArguments)).parse_args_into_dataclasses()
    set_seed(args.seed)
    vocab = {"[PAD]": 0, "[UNK]": 1} | {f"w{i}": i + 2 for i in range(data_args.words)}
    word_level = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    word_level.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=word_level, pad_token="[PAD]", unk_token="[UNK]")
    dataset = []
    for text, label in texts(data_args.num_texts, data_args.words, args.seed):
        item = tokenizer(text, truncation=True, max_length=1024)
        dataset.append({"input_ids": item["input_ids"], "attention_mask": item["attention_mask"], "labels": label})
    config = GPT2Config(vocab_size=len(vocab), n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                        pad_token_id=0, num_labels=2)
    model = GPT2ForSequenceClassification(config)
    trainer = Trainer(model=model, args=args, train_dataset=dataset,
                      data_collator=DataCollatorWithPadding(tokenizer=tokenizer))
    trainer.train()


if __name__ == "__main__":
    main()
