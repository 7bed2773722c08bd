"""Copy (VLA paper): `n` random tokens, SEP, the same `n` tokens; loss on predicting the copy. With `reverse` the
tokens come back last first (the palindrome task); with `identity` each copied token is its own target, as the VLA
authors' notebook builds its copy batches (an echo of the input, which tests no copying)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from linattn.tasks.batch import IGNORE, Batch


@dataclass(frozen=True)
class CopyConfig:
    """`[x1 … xn SEP x1 … xn]` (`reverse`: `[x1 … xn SEP xn … x1]`), `T = 2n + 1`, SEP = `vocab_size − 1`."""

    n_tokens: int = 31  # n: tokens to copy
    vocab_size: int = 128  # tokens from 0..vocab_size-2; SEP = vocab_size - 1 is reserved
    reverse: bool = False  # True: the palindrome task, the copy in reverse order
    identity: bool = False  # True: each copied token's target is itself (the VLA authors' targets), not the next

    def __post_init__(self) -> None:
        if not isinstance(self.n_tokens, int) or self.n_tokens < 1:
            raise ValueError(f"n_tokens: expected an int >= 1, got {self.n_tokens!r}")
        if not isinstance(self.vocab_size, int) or self.vocab_size < 2:
            raise ValueError(f"vocab_size: expected an int >= 2 (one token plus SEP), got {self.vocab_size!r}")
        for name in ("reverse", "identity"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}: expected a bool, got {getattr(self, name)!r}")

    @property
    def seq_len(self) -> int:
        """Total sequence length `T = 2n + 1`."""
        return 2 * self.n_tokens + 1


def generate(config: CopyConfig, batch_size: int, generator: torch.Generator) -> Batch:
    """Copy: `inputs = [x1 … xn SEP x1 … xn]`, `targets[t] = inputs[t + 1]` on the copy, IGNORE elsewhere.

    The `x_i` are drawn uniformly from `0..V−2` with replacement. The model must output copy token `x_i` at the
    position just before it: SEP (position `n`) predicts `x1`, the copied `x_i` (position `n + i`) predicts
    `x_{i+1}`, and the last position predicts nothing. `n` supervised positions per example.

    Worked example, `n_tokens=3, vocab_size=8` (SEP = 7, `.` = IGNORE), tokens 4 0 4:
    ```
    position   0   1   2   3   4   5   6
    inputs     4   0   4   7   4   0   4
    targets    .   .   .   4   0   4   .
    ```
    With `reverse` the second half is `xn … x1` (tokens 4 0 2: inputs `4 0 2 7 2 0 4`, targets `. . . 2 0 4 .`):
    the first token asked for is the last one written, and the far end tests the oldest memory.
    With `identity` the targets are the copied tokens at their own positions (tokens 4 0 4: targets
    `. . . . 4 0 4`), so a model that echoes its input scores 1 without reading the first half.
    Returns `inputs, targets: [B, 2n + 1]` int64 and slice `seq_len: [B]`.
    """
    B, n, device = batch_size, config.n_tokens, generator.device
    sep = config.vocab_size - 1
    tokens = torch.randint(0, sep, (B, n), generator=generator, device=device)  # [B, n]
    copied = tokens.flip(1) if config.reverse else tokens  # [B, n]
    column = torch.full((B, 1), sep, dtype=torch.int64, device=device)
    inputs = torch.cat([tokens, column, copied], dim=1)  # [B, 2n+1]
    ignore = torch.full((B, n), IGNORE, dtype=torch.int64, device=device)
    if config.identity:
        targets = torch.cat([ignore, ignore[:, :1], copied], dim=1)  # [B, 2n+1]: position n + i asks for x_i itself
    else:
        targets = torch.cat([ignore, copied, ignore[:, :1]], dim=1)  # [B, 2n+1]
    seq_len = torch.full((B,), config.seq_len, dtype=torch.int64, device=device)
    return Batch(inputs, targets, {"seq_len": seq_len})
