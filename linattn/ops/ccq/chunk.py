"""CCQ's query contraction on the chunkwise linear-attention machinery.

`C_t q_t = Σ_s ω_ts k_s (k_sᵀ q_t)` is linear attention whose values are the keys, and `(m_t, Z_t)` is linear
attention with a constant one-dimensional query and key and values `[k_s, 1]`. Both run through gated linear
attention with the base op's scalar decay (`chunk_gated_linear_attention`); the contraction is then elementwise.
(`backend="triton"` fuses all of it instead: `triton/`.)
"""

from __future__ import annotations

import torch

from linattn.ops.checks import compute_dtype
from linattn.ops.linear_attention.chunk import chunk_gated_linear_attention


def chunk_ccq_query(
    q: torch.Tensor,
    k: torch.Tensor,
    lam: torch.Tensor,
    g: torch.Tensor | None,
    initial_state: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
    *,
    centered: bool,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Same contract as `naive_ccq_query`."""
    dt = compute_dtype(q)
    q, k, lam = (x.to(dt) for x in (q, k, lam))
    # one cast shared by both passes: their log-decay gradients, large and of opposite signs, add in `dt` before a
    # low-precision `g` rounds the sum (rounded apart, each to bfloat16, they leave dg above twice the naive error)
    g = None if g is None else g.to(dt)

    def gla(q, k, v, S0):
        return chunk_gated_linear_attention(q, k, v, g, None if S0 is None else S0.to(dt), scale=1.0)

    return ccq_from_sums(q, k, lam, initial_state, centered=centered, gla=gla)


def ccq_from_sums(q, k, lam, initial_state, *, centered: bool, gla):
    """The contraction from two linear-attention passes with the base op's decay:
    `gla(q, k, v, S0) -> (o, S_final)`, `o` in float32 or float64. Shapes as `naive_ccq_query`."""
    B, T, H, K = q.shape
    C0 = mz0 = None
    if initial_state is not None:
        C0, m0, Z0 = initial_state
        mz0 = torch.cat([m0, Z0[..., None].to(m0.dtype)], dim=-1)[..., None, :]  # [B, H, 1, K + 1]
    Cq, C = gla(q, k, k, C0)  # [B, T, H, K]: C_t q_t
    ones = q.new_ones(B, T, H, 1)
    mz, mz_final = gla(ones, ones, torch.cat([k, ones], -1), mz0)
    m, Z = mz[..., :K], mz[..., K:]  # [B, T, H, K], [B, T, H, 1]
    q, lam = q.to(Cq.dtype), lam.to(Cq.dtype)
    sigma_q = Cq / Z
    if centered:
        mu = m / Z
        sigma_q = sigma_q - mu * (mu * q).sum(-1, keepdim=True)
    q_clean = q - lam[..., None] * sigma_q
    return q_clean, (C, mz_final[..., 0, :K], mz_final[..., 0, K])
