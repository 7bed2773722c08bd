"""Language modelling on a tokenised corpus (`linattn.data.cache`): packed training windows, and whole-document
windows that probe longer contexts.

A corpus is a folder under the data root (`$LINATTN_DATA`, default `~/.cache/linattn`) holding the cache's
`<split>.bin` / `<split>.json`; its `fingerprint` (`corpus_fingerprint`: the tokenizer and every split's token count)
is part of the config, so a run trained on one corpus is never read back as another's.

- `whole=False`: `batch_size` windows of `seq_len` tokens at uniform offsets, packed into one row with a sequence cut
  at every document start (`PackedText`), as training reads them.
- `whole=True`: `batch_size` documents drawn uniformly from those of more than `max(seq_len, min_doc_tokens)` tokens,
  each row its first `seq_len + 1` tokens: every position has its whole context. Tests at several lengths that share
  `min_doc_tokens` (the largest length) and a seed read the same documents, so a longer `seq_len` only adds positions
  with more context before them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from linattn.data.corpus import SPLITS
from linattn.tasks.batch import Batch
from linattn.tasks.checks import check_int


def data_root() -> Path:
    """Where prepared corpora live: `$LINATTN_DATA`, default `~/.cache/linattn`."""
    return Path(os.environ.get("LINATTN_DATA") or Path.home() / ".cache" / "linattn")


def prepared(cache: Path) -> bool:
    """Whether `cache` holds every split's index (the token files beside them)."""
    return all((cache / f"{split}.json").exists() for split in SPLITS)


def corpus_fingerprint(cache: Path) -> str:
    """A digest of the cache's tokenizer and its splits' token counts."""
    parts = []
    for split in SPLITS:
        index = json.loads((cache / f"{split}.json").read_text())
        parts.append((split, index["tokenizer"], index["tokens"]))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


@functools.cache
def packed_split(cache: str, split: str, fingerprint: str):
    """The split's packed text, once per process: the cache checked against the run's `fingerprint` on opening."""
    from linattn.data.cache import open_split
    from linattn.data.packing import PackedText

    path = Path(cache)
    if not (path / f"{split}.json").exists():
        raise ValueError(f"corpus: {path} holds no tokenised {split} split (prepare the corpus first)")
    if corpus_fingerprint(path) != fingerprint:
        raise ValueError(f"corpus: {path} is not the corpus this run was planned on (fingerprint "
                         f"{corpus_fingerprint(path)}, expected {fingerprint})")  # fmt: skip
    return PackedText(open_split(path, split))


@dataclass(frozen=True)
class CorpusConfig:
    """Windows of `seq_len` tokens of one split of the corpus `corpus` (a folder under `data_root()`)."""

    corpus: str
    fingerprint: str  # `corpus_fingerprint` of the cache the run was planned on
    seq_len: int = 512  # T
    split: str = "train"
    whole: bool = False  # each row the start of one document longer than `seq_len` (module docstring)
    min_doc_tokens: int = 0  # whole: draw only from documents longer than this too

    def __post_init__(self) -> None:
        check_int("seq_len", self.seq_len, 1)
        check_int("min_doc_tokens", self.min_doc_tokens, 0)
        if self.split not in SPLITS:
            raise ValueError(f"split: expected one of {list(SPLITS)}, got {self.split!r}")

    @property
    def cache(self) -> Path:
        return data_root() / self.corpus


def generate(config: CorpusConfig, batch_size: int, generator: torch.Generator) -> Batch:
    """One batch drawn from `generator` (module docstring), on `generator.device`: packed, `inputs, targets:
    [1, B·T]` with `cu_seqlens`; whole, `[B, T]`.

    Example: `generate(CorpusConfig("lm-compare-quick/cache", fp, 128), 8, torch.Generator()).inputs.shape`."""
    check_int("batch_size", batch_size, 1)
    data, T = packed_split(str(config.cache), config.split, config.fingerprint), config.seq_len
    if not config.whole:
        return data.batch(batch_size, T, generator).to(generator.device)
    offsets = torch.from_numpy(data.split.offsets)  # [D + 1]
    longer = max(T, config.min_doc_tokens)
    long = torch.nonzero(offsets[1:] - offsets[:-1] > longer).flatten()  # documents with more than `longer` tokens
    if len(long) == 0:
        raise ValueError(f"seq_len: no document of the {config.split} split has {longer + 1} tokens")
    picks = long[torch.randint(0, len(long), (batch_size,), generator=generator)]
    rows = torch.stack([
        torch.from_numpy(data.tokens[int(offsets[d]) : int(offsets[d]) + T + 1].astype("int64")) for d in picks
    ])  # [B, T + 1]  # fmt: skip
    return Batch(rows[:, :-1], rows[:, 1:]).to(generator.device)
