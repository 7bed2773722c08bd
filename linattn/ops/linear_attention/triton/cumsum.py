"""Stage 1, the chunk-local cumulative log-decay of a per-channel `g`, `G_t = Σ_{s ≤ t in its chunk} g_s`; and the
backward's last, the decay's gradient.

`dg_t = Σ_{t' ≥ t in its sequence} dG_t'` (`grads.py`'s `dG`, plus `Σ_v S_T ⊙ dS_T`, the final state's share), but
not summed over the sequence: the tokens after chunk `C` reach the decays before them only through its end state
`S_C`, and a shift `ε` of all their log-decays scales `S_C`'s share of them by `e^ε`, so their sum is
`Σ_v S_C ⊙ dh_C` (`dh_C` the end state's gradient). Each chunk then takes that term and its own reverse cumsum:
at most 64 terms, where one sum over the whole sequence cancels (at thousands of tokens, to about ten times the
naive recurrence's error)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.linear_attention.triton.blocks import block
from linattn.ops.utils.grid import cdiv
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import ChunkLayout


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
    grid = (cdiv(K, BK), layout.NT, B * H)
    gla_cumsum_kernel[grid](
        g, G, layout.cu_seqlens, layout.chunk_indices, T, H=H, K=K, BT=layout.BT, BK=BK,
        IS_VARLEN=layout.cu_seqlens is not None,
    )  # fmt: skip
    return G


@triton.jit(do_not_specialize=["T"])
def gla_decay_grad_kernel(
    dG,
    h,
    dh,
    ht,
    dg,
    cu_seqlens,
    chunk_indices,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_FINAL: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    """One program per (key block, chunk, batch row · head): the chunk's end state `S_C` (the next chunk's start
    state, or the final state) times its gradient `dh_C`, summed over the values `[BK]`, then the chunk's reverse
    cumsum of `dG` on top of it."""
    i_k, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_n = tl.load(chunk_indices + i_t * 2) if IS_VARLEN else i_b
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)
    o_k = i_k * BK + tl.arange(0, BK)
    m_k = o_k < K
    # vectors, not scalars, as masks (the interpreter's rule): is this the sequence's last chunk?
    is_last = (o_k * 0 + (i_t + 1) * BT) >= T
    b_c = tl.zeros([BK], dtype=tl.float32)
    for i_v in range(tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_kv = m_k[:, None] & (o_v < V)[None, :]
        o_h = o_k[:, None] * V + o_v[None, :]
        # [BK, BV] end state and its gradient
        b_dh = tl.load(dh + (i_tg * H + i_h) * K * V + o_h, mask=m_kv, other=0)
        b_s = tl.load(h + ((i_tg + 1) * H + i_h) * K * V + o_h, mask=m_kv & ~is_last[:, None], other=0)
        if USE_FINAL:
            b_s += tl.load(ht + (i_n.to(tl.int64) * H + i_h) * K * V + o_h, mask=m_kv & is_last[:, None], other=0)
        b_c += tl.sum(b_s * b_dh, axis=1)
    o_t = i_t * BT + tl.arange(0, BT)
    m = (o_t < T)[:, None] & m_k[None, :]
    o = ((bos + o_t) * H + i_h)[:, None] * K + o_k[None, :]
    # [BT, BK]
    b_d = tl.load(dG + o, mask=m, other=0)
    tl.store(dg + o, (tl.cumsum(b_d, axis=0, reverse=True) + b_c[None, :]).to(dg.dtype.element_ty), mask=m)


def gla_decay_grad(
    dG: torch.Tensor,
    h: torch.Tensor,
    dh: torch.Tensor,
    ht: torch.Tensor | None,
    layout: ChunkLayout,
    dtype: torch.dtype,
) -> torch.Tensor:
    """`dG: [B, T, H, K]`, the chunk-start states `h` and end-state gradients `dh: [B, NT, H, K, V]`, the final
    state `ht: [N, H, K, V]` (None when it got no gradient), all float32 -> `dg: [B, T, H, K]` in `dtype`."""
    B, T, H, K = dG.shape
    V = h.shape[-1]
    BK = block(K)
    dg = torch.empty(B, T, H, K, dtype=dtype, device=dG.device)
    grid = (cdiv(K, BK), layout.NT, B * H)
    gla_decay_grad_kernel[grid](
        dG, h, dh, ht, dg, layout.cu_seqlens, layout.chunk_indices, T, H=H, K=K, V=V, BT=layout.BT, BK=BK,
        BV=block(V, 32), USE_FINAL=ht is not None, IS_VARLEN=layout.cu_seqlens is not None,
    )  # fmt: skip
    return dg
