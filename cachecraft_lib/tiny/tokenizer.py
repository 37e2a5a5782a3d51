"""Train the embedded model's tokenizer on offline RULER text with the ``tokenizers`` library.

Byte-level BPE, digits split into single characters (so 7-digit needles and vt values are read
digit by digit, as Llama-3's tokenizer does in groups), at most 4096 entries, saved as Hugging
Face tokenizer files.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from ..ruler.tasks import GENERATORS, TaskState
from ..ruler.templates import TASKS
from ..ruler.words import adjectives, nouns

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]


def corpus(lengths: tuple[int, ...] = (512, 1024, 2048), samples_per_task: int = 6, seed: int = 7) -> Iterator[str]:
    """RULER samples of every task at several sizes, plus the key word lists twice (so common needle
    key words tend to become single tokens): the text the tokenizer must encode well."""
    for _ in range(2):
        yield " ".join(adjectives())
        yield " ".join(nouns())
    for length in lengths:
        for task in TASKS:
            spec = GENERATORS[task]
            rng = random.Random(seed)
            state = TaskState(length, seed)
            n = max(spec.step(length), 2) * (4 if length >= 1024 else 2)
            for _ in range(samples_per_task):
                text, answers = spec.build(n, rng, state)
                yield text + " " + " ".join(answers)


def train_tokenizer(out_dir: str | Path, vocab_size: int = 4096, seed: int = 7):
    """Train and save the tokenizer (``tokenizer.json`` plus HF config) under ``out_dir``; returns it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if vocab_size > 4096:
        raise ValueError("the embedded model's vocabulary is capped at 4096 entries")
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(seed=seed), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", model_max_length=1 << 20)
    fast.add_bos_token = False
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out)
    return fast
