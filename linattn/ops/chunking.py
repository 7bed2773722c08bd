"""Reshaping between the public `[B, T, H, ...]` layout and the chunked `[B, H, N, C, ...]` layout.

`T` is padded with zeros up to a multiple of the chunk size `C`. Every op here treats a zero token as
an identity step (zero key, value, write direction, β and log-decay), so padding at the end changes
neither the outputs of the real tokens nor the final state.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from linattn.ops.utils.grid import cdiv


def chunk_size(T: int, largest: int = 64, smallest: int = 16) -> int:
    """The chunk size for `T` tokens: the largest power of two in `[smallest, largest]` that pads `T` by at most
    a quarter (else `smallest`), so short sequences are not padded up to a mostly empty chunk."""
    C = largest
    while C > smallest and cdiv(T, C) * C > 1.25 * T:
        C //= 2
    return C


def to_chunks(x: torch.Tensor, C: int) -> torch.Tensor:
    """`[B, T, H, *D]` -> `[B, H, N, C, *D]` with `N = ceil(T / C)`, zero-padded in time."""
    B, T, H = x.shape[:3]
    rest = x.shape[3:]
    N = cdiv(T, C)
    x = x.movedim(2, 1)  # [B, H, T, *D]
    if N * C != T:
        pad = [0, 0] * len(rest) + [0, N * C - T]
        x = F.pad(x, pad)
    return x.reshape(B, H, N, C, *rest)


def from_chunks(x: torch.Tensor, T: int) -> torch.Tensor:
    """`[B, H, N, C, *D]` -> `[B, T, H, *D]`, dropping the padding."""
    B, H, N, C = x.shape[:4]
    return x.reshape(B, H, N * C, *x.shape[4:])[:, :, :T].movedim(1, 2)


def cumulative_log_decay(g: torch.Tensor, C: int) -> torch.Tensor:
    """`G_t = Σ_{s≤t} g_s` from each chunk's start, `[B, T, H, *D]` -> `[B, H, N, C, *D]`, in float64.

    Callers take `exp` of `G` (or of differences of it) in float64 and cast the factor to the compute dtype, so the
    float32 matmuls stay float32 while the backward's sums into `dG` and its reverse cumulative sum (the log-decay
    gradient) run in float64. Each product there appears twice with opposite signs (`G_t − G_s`, `G_last − G_t`);
    summed in float32 those cancel only to float32 rounding of the large terms, which left `dg` several times the
    naive recurrence's error in low precision.
    """
    return to_chunks(g.to(torch.float64), C).cumsum(3)


def causal_mask(C: int, device: torch.device, *, strict: bool = False) -> torch.Tensor:
    """`[C, C]` bool mask of `s <= t` (or `s < t` when `strict`) for row `t`, column `s`."""
    return torch.ones(C, C, dtype=torch.bool, device=device).tril(-1 if strict else 0)


def decay_matrix(G: torch.Tensor, *, strict: bool = False) -> torch.Tensor:
    """`D[..., t, s] = exp(G_t - G_s)` for `s <= t` (`s < t` when `strict`), else 0. `G: [..., C]` cumulative log-decay.

    The mask is applied before `exp`, so the (positive) differences above the diagonal never overflow.
    """
    C = G.shape[-1]
    diff = G[..., :, None] - G[..., None, :]
    mask = causal_mask(C, G.device, strict=strict)
    return torch.where(mask, diff, torch.full_like(diff, float("-inf"))).exp()


def causal(scores: torch.Tensor, D: torch.Tensor | None, *, strict: bool = False) -> torch.Tensor:
    """`scores ⊙ D` kept on `s <= t` (`s < t` when `strict`); `D = None` means no decay."""
    return (scores if D is None else scores * D).tril(-1 if strict else 0)
