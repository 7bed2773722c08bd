"""Stack: a stream of pushes and pops; at each pop, predict the token it removes (last in, first out)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from linattn.tasks.batch import IGNORE, Batch
from linattn.tasks.checks import check_int


@dataclass(frozen=True)
class StackConfig:
    """`T` operations: a token of `0..vocab_size−2` pushes it, POP = `vocab_size − 1` pops the top."""

    seq_len: int = 64  # T: operations per example
    vocab_size: int = 16  # pushed tokens from 0..vocab_size-2; POP = vocab_size - 1
    max_depth: int = 16  # the stack never holds more (a full stack pops)
    push_prob: float = 0.5  # probability of a push when the stack is neither empty nor full

    def __post_init__(self) -> None:
        for name, low in (("seq_len", 1), ("vocab_size", 2), ("max_depth", 1)):
            check_int(name, getattr(self, name), low)
        p = self.push_prob
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or not 0 < p < 1:
            raise ValueError(f"push_prob: expected a probability in (0, 1), got {p!r}")


def generate(config: StackConfig, batch_size: int, generator: torch.Generator) -> Batch:
    """Stack: `inputs[t]` a pushed token or POP; at a POP position the target is the token it removes (IGNORE
    elsewhere). The first operation is a push, an empty stack always pushes, a full one (`max_depth`) always pops,
    otherwise a push with probability `push_prob`; pushed tokens are uniform over `0..V−2`.

    Worked example, `seq_len=7, vocab_size=8` (POP = 7, `.` = IGNORE): push 3, push 5, pop, push 1, pop, pop, push 2:
    ```
    position   0   1   2   3   4   5   6
    inputs     3   5   7   1   7   7   2
    targets    .   .   5   .   1   3   .
    ```
    Returns `inputs, targets: [B, T]` int64 and slice `seq_len: [B]`.
    """
    B, T, device = batch_size, config.seq_len, generator.device
    pop = config.vocab_size - 1
    rows = torch.arange(B, device=device)
    stack = torch.zeros(B, config.max_depth, dtype=torch.int64, device=device)  # [B, max_depth]
    depth = torch.zeros(B, dtype=torch.int64, device=device)  # [B]
    inputs = torch.empty(B, T, dtype=torch.int64, device=device)
    targets = torch.full((B, T), IGNORE, dtype=torch.int64, device=device)
    for t in range(T):
        coin = torch.rand(B, generator=generator, device=device) < config.push_prob
        push = (depth == 0) | ((depth < config.max_depth) & coin)  # [B]
        token = torch.randint(0, pop, (B,), generator=generator, device=device)
        inputs[:, t] = torch.where(push, token, pop)
        top = (depth - 1).clamp_min(0)
        targets[:, t] = torch.where(push, IGNORE, stack[rows, top])
        slot = torch.where(push, depth, top)
        stack[rows, slot] = torch.where(push, token, stack[rows, slot])
        depth = torch.where(push, depth + 1, depth - 1)
    seq_len = torch.full((B,), T, dtype=torch.int64, device=device)
    return Batch(inputs, targets, {"seq_len": seq_len})
