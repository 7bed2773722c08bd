"""Stage 1, the chunk-local cumulative log-decay of a per-channel `g`, `G_t = Σ_{s ≤ t in its chunk} g_s`; and the
backward's last, the decay's gradient `dg_t = c + Σ_{t' ≥ t in its sequence} dG_t'` (`grads.py`'s `dG`; `c` the
final state's share, `Σ_v S_T ⊙ dS_T`, which reaches every token's decay)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.delta_rule.triton.cumsum import ChunkLayout
from linattn.ops.delta_rule.triton.index import chunk_coords, sequence_coords
from linattn.ops.linear_attention.triton.blocks import block


@triton.jit(do_not_specialize=["T"])
def gla_cumsum_kernel(
    g,
    G,
    cu_seqlens,
    chunk_indices,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    """One program per (key block, chunk, batch row · head): `[BT, BK]` of `g` -> its cumsum down the tokens."""
    i_k, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, _, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)
    o_t = i_t * BT + tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    m = (o_t < T)[:, None] & (o_k < K)[None, :]
    o = ((bos + o_t) * H + i_h)[:, None] * K + o_k[None, :]
    # [BT, BK]
    b_g = tl.load(g + o, mask=m, other=0).to(tl.float32)
    tl.store(G + o, tl.cumsum(b_g, axis=0), mask=m)


def gla_cumsum(g: torch.Tensor, layout: ChunkLayout) -> torch.Tensor:
    """`g: [B, T, H, K]` (any float dtype) -> float32 chunk-local cumsum `G: [B, T, H, K]`."""
    B, T, H, K = g.shape
    BK = block(K)
    G = torch.empty(B, T, H, K, dtype=torch.float32, device=g.device)
    grid = (triton.cdiv(K, BK), layout.NT, B * H)
    gla_cumsum_kernel[grid](
        g, G, layout.cu_seqlens, layout.chunk_indices, T, H=H, K=K, BT=layout.BT, BK=BK,
        IS_VARLEN=layout.cu_seqlens is not None,
    )  # fmt: skip
    return G


@triton.jit(do_not_specialize=["T"])
def gla_decay_grad_kernel(
    dG,
    dg,
    c,
    cu_seqlens,
    chunk_offsets,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    USE_C: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    """One program per (key block, sequence · head) walks the sequence's chunks from the last, carrying the sum of
    the tokens after the chunk `[BK]` (float32)."""
    i_k, i_nh = tl.program_id(0), tl.program_id(1)
    i_n, i_h = i_nh // H, i_nh % H
    bos, T, NT, _ = sequence_coords(i_n, T, cu_seqlens, chunk_offsets, BT, IS_VARLEN)
    o_k = i_k * BK + tl.arange(0, BK)
    m_k = o_k < K
    b_carry = tl.zeros([BK], dtype=tl.float32)
    if USE_C:
        b_carry += tl.load(c + i_nh.to(tl.int64) * K + o_k, mask=m_k, other=0)
    for step in range(0, NT):
        o_t = (NT - 1 - step) * BT + tl.arange(0, BT)
        m = (o_t < T)[:, None] & m_k[None, :]
        o = ((bos + o_t) * H + i_h)[:, None] * K + o_k[None, :]
        # [BT, BK]
        b_d = tl.load(dG + o, mask=m, other=0)
        tl.store(dg + o, (tl.cumsum(b_d, axis=0, reverse=True) + b_carry[None, :]).to(dg.dtype.element_ty), mask=m)
        b_carry += tl.sum(b_d, axis=0)


def gla_decay_grad(dG: torch.Tensor, c: torch.Tensor | None, layout: ChunkLayout, dtype: torch.dtype) -> torch.Tensor:
    """`dG: [B, T, H, K]` float32, `c: [N, H, K]` float32 or None -> `dg: [B, T, H, K]` in `dtype`."""
    B, T, H, K = dG.shape
    BK = block(K)
    dg = torch.empty(B, T, H, K, dtype=dtype, device=dG.device)
    grid = (triton.cdiv(K, BK), layout.N * H)
    gla_decay_grad_kernel[grid](
        dG, dg, c, layout.cu_seqlens, layout.chunk_offsets, T, H=H, K=K, BT=layout.BT, BK=BK, USE_C=c is not None,
        IS_VARLEN=layout.cu_seqlens is not None,
    )  # fmt: skip
    return dg
