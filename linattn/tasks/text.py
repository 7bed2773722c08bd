"""Byte-level language modelling on a corpus every Python ships: the reference manual's topics (`pydoc_data.topics`,
about 465 KB of English prose with code samples), so that an offline machine can train a small LM.

The topics, in the order of their names, are joined (a blank line between two) and encoded as UTF-8 bytes; the
stream is cut into its first 80% (`train`), the next 10% (`val`) and the last 10% (`test`), so the three never
share text. A batch is `B` windows at uniformly drawn offsets of one split: inputs the window's first `T` bytes,
targets the next byte at every position (every position carries a loss, as in language modelling).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from linattn.tasks.batch import Batch
from linattn.tasks.checks import check_int

VOCAB_SIZE = 256  # bytes
SPLITS = {"train": (0.0, 0.8), "val": (0.8, 0.9), "test": (0.9, 1.0)}  # fractions of the byte stream


@functools.cache
def corpus(split: str) -> torch.Tensor:
    """The split's bytes, `[N]` int64 (read once per process)."""
    from pydoc_data.topics import topics

    stream = "\n\n".join(topics[name] for name in sorted(topics)).encode()
    lo, hi = (round(f * len(stream)) for f in SPLITS[split])
    return torch.frombuffer(bytearray(stream[lo:hi]), dtype=torch.uint8).long()


@dataclass(frozen=True)
class TextConfig:
    """Windows of `seq_len` bytes of one split of the corpus."""

    seq_len: int = 512  # T
    split: str = "train"  # "train", "val" or "test"

    def __post_init__(self) -> None:
        check_int("seq_len", self.seq_len, 1)
        if self.split not in SPLITS:
            raise ValueError(f"split: expected one of {list(SPLITS)}, got {self.split!r}")
        size = len(corpus(self.split))
        if self.seq_len >= size:
            raise ValueError(f"seq_len: expected < {size} (the {self.split} split's bytes), got {self.seq_len}")


def generate(config: TextConfig, batch_size: int, generator: torch.Generator) -> Batch:
    """`batch_size` windows at offsets drawn uniformly from `generator`: `inputs, targets: [B, T]` int64 (bytes,
    `targets[:, t] = inputs[:, t + 1]` within the stream), slice `seq_len`.

    Example: `generate(TextConfig(seq_len=8), 2, torch.Generator().manual_seed(0)).inputs.shape == (2, 8)`."""
    data, T = corpus(config.split), config.seq_len
    starts = torch.randint(0, len(data) - T, (batch_size,), generator=generator)  # [B]
    window = data[starts[:, None] + torch.arange(T + 1)]  # [B, T + 1]
    slices = {"seq_len": torch.full((batch_size,), T, dtype=torch.int64)}
    return Batch(window[:, :-1].to(generator.device), window[:, 1:].to(generator.device), slices)
