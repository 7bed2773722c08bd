"""Palindrome: `n` random tokens, SEP, the same tokens reversed; loss on predicting the reversal."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from linattn.tasks.batch import IGNORE, Batch


@dataclass(frozen=True)
class PalindromeConfig:
    """`[x1 … xn SEP xn … x1]`, `T = 2n + 1`, SEP = `vocab_size − 1`."""

    n_tokens: int = 31  # n: tokens to reverse
    vocab_size: int = 128  # tokens from 0..vocab_size-2; SEP = vocab_size - 1 is reserved

    def __post_init__(self) -> None:
        if isinstance(self.n_tokens, bool) or not isinstance(self.n_tokens, int) or self.n_tokens < 1:
            raise ValueError(f"n_tokens: expected an int >= 1, got {self.n_tokens!r}")
        if isinstance(self.vocab_size, bool) or not isinstance(self.vocab_size, int) or self.vocab_size < 2:
            raise ValueError(f"vocab_size: expected an int >= 2 (one token plus SEP), got {self.vocab_size!r}")

    @property
    def seq_len(self) -> int:
        """Total sequence length `T = 2n + 1`."""
        return 2 * self.n_tokens + 1


def generate(config: PalindromeConfig, batch_size: int, generator: torch.Generator) -> Batch:
    """Palindrome: `inputs = [x1 … xn SEP xn … x1]`, `targets[t] = inputs[t + 1]` after SEP, IGNORE elsewhere.

    The `x_i` are drawn uniformly from `0..V−2` with replacement. SEP (position `n`) predicts `xn`, the reversed
    token at position `n + i` predicts the next one, and the last position predicts nothing: `n` supervised
    positions per example. Unlike copy, the first token asked for is the last one written, so a state that keeps
    only recent tokens answers the first steps and the far end tests the oldest memory.

    Worked example, `n_tokens=3, vocab_size=8` (SEP = 7, `.` = IGNORE), tokens 4 0 2:
    ```
    position   0   1   2   3   4   5   6
    inputs     4   0   2   7   2   0   4
    targets    .   .   .   2   0   4   .
    ```
    Returns `inputs, targets: [B, 2n + 1]` int64 and slice `seq_len: [B]`.
    """
    B, n, device = batch_size, config.n_tokens, generator.device
    sep = config.vocab_size - 1
    tokens = torch.randint(0, sep, (B, n), generator=generator, device=device)  # [B, n]
    reversed_tokens = tokens.flip(1)  # [B, n]
    column = torch.full((B, 1), sep, dtype=torch.int64, device=device)
    inputs = torch.cat([tokens, column, reversed_tokens], dim=1)  # [B, 2n+1]
    ignore = torch.full((B, n), IGNORE, dtype=torch.int64, device=device)
    targets = torch.cat([ignore, reversed_tokens, ignore[:, :1]], dim=1)  # [B, 2n+1]
    seq_len = torch.full((B,), config.seq_len, dtype=torch.int64, device=device)
    return Batch(inputs, targets, {"seq_len": seq_len})
