"""Learning-rate schedule: linear warmup, then cosine decay, as a multiplier for `torch.optim.lr_scheduler.LambdaLR`."""

from __future__ import annotations

import math


def warmup_cosine(step: int, *, warmup_steps: int, total_steps: int, min_ratio: float = 0.0) -> float:
    """Multiplier of the peak learning rate at `step`: linear 0 → 1 over the warmup, then cosine 1 → `min_ratio`.

    With `W = warmup_steps`, `S = total_steps`, `r = min_ratio`:
    `m(s) = s / W` for `s < W`; `m(s) = r + (1 - r) · ½ (1 + cos(π (s - W) / (S - W)))` for `W ≤ s ≤ S`;
    `m(s) = r` after `S`. Under `LambdaLR` update `s` (0-based) uses `m(s)`, so with a warmup the first update
    has learning rate 0 (it only fills Adam's moments), as in Hugging Face's warmup schedules.

    Example: `LambdaLR(opt, functools.partial(warmup_cosine, warmup_steps=300, total_steps=3000))`.
    """
    if not 0 <= warmup_steps <= total_steps:
        raise ValueError(f"warmup_steps must be in [0, total_steps={total_steps}], got {warmup_steps}")
    if step < warmup_steps:
        return step / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
