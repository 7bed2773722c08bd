"""Single needle in a haystack (S-NIAH proxy, KLA paper): the KLA-format MQAR with one pair."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from linattn.tasks.batch import Batch
from linattn.tasks.mqar import KLAMQARConfig, generate_kla

SNIAH_EVAL_SEQ_LENS = (1024, 2048, 4096, 8192)  # trained at 1024
DEPTH_BUCKETS = 10  # the "depth" slice: where the question sits, in tenths of the sequence


@dataclass(frozen=True)
class SNIAHConfig:
    """One key–value needle at positions 0–1, uniform noise, the key asked once at a power-law position."""

    seq_len: int = 1024  # T: train at 1024, evaluate at SNIAH_EVAL_SEQ_LENS
    vocab_size: int = 8192  # key from [0, V/2), value from [V/2, V), noise from [0, V)
    power_alpha: float = 0.1  # question position p(g) ∝ g^(α−1) as in the KLA MQAR; 1.0 for uniform depth
    min_query_pos: int = 64  # the question sits in [min_query_pos, T − 2]

    def __post_init__(self) -> None:
        self.to_mqar()  # the MQAR config validates the fields (same names)

    def to_mqar(self) -> KLAMQARConfig:
        """The KLA-format MQAR config with `n_pairs = 1` that generates this task."""
        return KLAMQARConfig(
            n_pairs=1,
            seq_len=self.seq_len,
            vocab_size=self.vocab_size,
            power_alpha=self.power_alpha,
            min_query_pos=self.min_query_pos,
        )


def generate(config: SNIAHConfig, batch_size: int, generator: torch.Generator) -> Batch:
    """S-NIAH: `generate_kla(config.to_mqar(), …)` plus a `depth` slice.

    The needle (`key value`) is the first two tokens, the haystack is uniform noise, and the key comes back once
    at a position drawn like the KLA MQAR queries (power law α = 0.1 over `[min_query_pos, T − 2]`, so most
    questions come early; `power_alpha=1.0` spreads them uniformly). The target at that position is the value.
    Slices: `n_pairs` (= 1), `seq_len`, and `depth = ⌊10 · p / T⌋ ∈ 0..9` for the question position `p`
    (the needle is at the start, so this is also the needle-to-question distance in tenths of `T`).

    Worked example, `seq_len=12, vocab_size=16, min_query_pos=4` (`.` = IGNORE): needle 5 → 13, asked at 9:
    ```
    position   0   1   2   3   4   5   6   7   8   9  10  11
    inputs     5  13   2  14   0   9   3  11   6   5  10   1
    targets    .   .   .   .   .   .   .   .   .  13   .   .
    ```
    Here `depth = ⌊10 · 9 / 12⌋ = 7`. Returns `inputs, targets: [B, T]` int64.
    """
    batch = generate_kla(config.to_mqar(), batch_size, generator)
    question = batch.supervised.to(torch.int64).argmax(dim=1)  # [B]: the one supervised position
    batch.slices["depth"] = question * DEPTH_BUCKETS // config.seq_len
    return batch
