"""RULER's passkey on a tokenised corpus's real text: a random five-digit key stated early, asked at the end.

Each row is `seq_len + 1` tokens: the split's token stream from a random offset (without its end-of-document
tokens: training resets the state at every document start, so a model never sees text after one), the needle
`The pass key is 71432. Remember it. 71432 is the pass key.` at `depth` of the way in, then
`What is the pass key? The pass key is` and the key. Only the key's tokens are targets, so `AccuracyMeter` gives
`exact` (every key token the model's top choice) and `acc` (the fraction of key tokens that are). The key is asked
as it was stated, after a space (`is 71432`), so that a GPT-2-style BPE gives it the same tokens both times. The
tokenizer is the corpus's own, `tokenizer.json` beside its cache (`linattn run lm-compare` keeps it there).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from linattn.data.corpus import SPLITS
from linattn.tasks.batch import IGNORE, Batch
from linattn.tasks.checks import check_int
from linattn.tasks.corpus import data_root, packed_split

TOKENIZER_NAME = "tokenizer.json"  # beside the corpus's cache folder


def passkey_prompt(tokenizer, filler, key: str, depth: float) -> tuple[list[int], int]:
    """`(ids, answer_start)`: `filler`'s tokens (a 1-D integer array or tensor) with the key stated at `depth` of the
    way in, the question, and the key's tokens from `answer_start` on."""
    needle = tokenizer.encode(f"\nThe pass key is {key}. Remember it. {key} is the pass key.\n")
    question = tokenizer.encode("\nWhat is the pass key? The pass key is")
    answer = tokenizer.encode(f" {key}")
    at = int(depth * len(filler))
    ids = [*filler[:at].tolist(), *needle, *filler[at:].tolist(), *question]
    return ids + answer, len(ids)


def passkey_row(
    tokenizer, text, key: str, depth: float, seq_len: int, start_of: Callable[[int], int], split: str = "text"
) -> tuple[torch.Tensor, torch.Tensor]:
    """`(inputs, targets)`, `[seq_len]` int64 each: `n` tokens of `text` (a 1-D integer array, from offset
    `start_of(n)`) around the passkey `key`, `n` what `seq_len + 1` tokens leave beside the prompt (a BPE may cut two
    keys into different numbers of tokens); targets `IGNORE` but at the positions that predict the key's tokens."""
    overhead = len(passkey_prompt(tokenizer, text[:0], key, depth)[0])
    n = seq_len + 1 - overhead
    if n < 1 or len(text) < n:
        raise ValueError(f"seq_len: {seq_len} tokens leave {n} for the text around the passkey's {overhead} (the "
                         f"{split} split has {len(text)})")  # fmt: skip
    start = start_of(n)
    ids, answer = passkey_prompt(tokenizer, text[start : start + n], key, depth)
    ids = torch.tensor(ids, dtype=torch.int64)  # [seq_len + 1]
    targets = torch.full((seq_len,), IGNORE, dtype=torch.int64)
    targets[answer - 1 :] = ids[answer:]
    return ids[:-1], targets


def passkey_text(tokens, tokenizer):
    """A split's token stream (a 1-D integer array) without its end-of-document ids, the text a passkey sits in:
    training resets the state at every document start, so a model never sees text after one."""
    eod = getattr(tokenizer, "eod_id", None)
    return tokens if eod is None else tokens[tokens != eod]


@dataclass(frozen=True)
class PasskeyConfig:
    """The passkey asked after `seq_len` tokens of the `split` of the corpus `corpus` (a cache folder under
    `data_root()`, `fingerprint` its `corpus_fingerprint`), stated at `depth` of the way in."""

    corpus: str
    fingerprint: str
    seq_len: int = 2048
    split: str = "test"
    depth: float = 0.1

    def __post_init__(self) -> None:
        check_int("seq_len", self.seq_len, 1)
        if self.split not in SPLITS:
            raise ValueError(f"split: expected one of {list(SPLITS)}, got {self.split!r}")
        if not 0 <= self.depth <= 1:
            raise ValueError(f"depth: expected a fraction in [0, 1], got {self.depth!r}")


@functools.cache
def _text(cache: str, split: str, fingerprint: str):
    """The split's tokens without end-of-document ids, and the corpus's tokenizer, once per process."""
    from linattn.data.tokenizer import FileTokenizer

    path = Path(cache).parent / TOKENIZER_NAME
    if not path.exists():
        raise ValueError(f"tokenizer: the passkey needs the corpus's {TOKENIZER_NAME} beside {cache}; none there")
    tokenizer = FileTokenizer(path)
    tokens = packed_split(cache, split, fingerprint).split.tokens
    return passkey_text(tokens, tokenizer), tokenizer


def generate(config: PasskeyConfig, batch_size: int, generator: torch.Generator) -> Batch:
    """`batch_size` rows (module docstring), `inputs, targets: [B, seq_len]`, keys and offsets drawn from
    `generator`, on `generator.device`."""
    check_int("batch_size", batch_size, 1)
    text, tokenizer = _text(str(data_root() / config.corpus), config.split, config.fingerprint)
    rows, targets = [], []
    for key in torch.randint(10_000, 100_000, (batch_size,), generator=generator).tolist():
        row, target = passkey_row(
            tokenizer, text, str(key), config.depth, config.seq_len,
            lambda n: int(torch.randint(0, len(text) - n + 1, (1,), generator=generator)), config.split,
        )  # fmt: skip
        rows.append(row)
        targets.append(target)
    return Batch(torch.stack(rows), torch.stack(targets)).to(generator.device)
