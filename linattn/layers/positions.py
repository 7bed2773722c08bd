"""Each token's position in its own sequence (packed sequences and padded rows included), and RoPE by it."""

from __future__ import annotations

import torch


def token_positions(
    B: int,
    T: int,
    start: torch.Tensor | None,
    cu_seqlens: torch.Tensor | None,
    mask: torch.Tensor | None,
    device: torch.device,
) -> torch.Tensor:
    """Each token's position `[B, T]` (`[1, T]` for packed sequences, each from its own first token): from `start`
    (`[B]`, or `[N]` for packed sequences; None: 0) on, counting real tokens only under `mask: [B, T]` (a padded
    position gets 0, unread)."""
    if mask is not None:
        pos = mask.long().cumsum(dim=1) - 1 + (0 if start is None else start[:, None])
        return pos.masked_fill(~mask, 0)
    t = torch.arange(T, device=device)
    if cu_seqlens is None:
        return t.expand(B, T) + (0 if start is None else start[:, None])
    seq = torch.searchsorted(cu_seqlens.to(device), t, right=True) - 1  # sequence index of each token
    pos = t - cu_seqlens.to(device)[seq]
    if start is not None:
        pos = pos + start[seq]
    return pos[None]


def rotary(x: torch.Tensor, positions: torch.Tensor, base: float = 10_000.0) -> torch.Tensor:
    """RoPE: each channel pair `(x_i, x_{i + d/2})` of `x: [B, T, H, d]` rotated by the angle `p · base^(−2i/d)` of
    its token's position `p` (`positions: [B or 1, T]`), so that `⟨rotary(q, p), rotary(k, s)⟩` depends on `p − s`
    alone. The angles in float64 (positions up to millions keep their phase), the rotation in float32 (float64 for
    a float64 `x`)."""
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float64) / d)  # [d/2]
    angles = positions.to(torch.float64)[..., None, None] * inv_freq  # [B or 1, T, 1, d/2]
    work = torch.promote_types(x.dtype, torch.float32)
    cos, sin = angles.cos().to(work), angles.sin().to(work)
    x1, x2 = x.to(work).chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)
