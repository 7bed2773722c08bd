"""Stage 2: the scores inside each chunk, `A_ts = Σ_k q_tk k_sk exp(G_tk − G_sk)` for `s ≤ t` (unscaled).

A per-channel decay cannot be split into `Q e^G` and `K e^−G` (the second overflows for strong decay). So each
sub-chunk `i` of `BC = 16` queries takes a reference row `r`, the token before it: for keys `s ≤ r` the product is
`(q_t e^{G_t − G_r}) · (k_s e^{G_r − G_s})`, both exponents `≤ 0` (`G` falls along the chunk), one tensor-core
product; the `16 × 16` block on the diagonal is summed exactly, a key a step (`exp(G_t − G_s)` masked to `s ≤ t`
before the `exp`). Every exponent is masked to `−inf` where its row or column is out of range, never evaluated
above 0."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.linear_attention.triton.blocks import BC, block, masked_exp, sub_chunk
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import ChunkLayout


@triton.jit(do_not_specialize=["T"])
def gla_scores_kernel(
    q,
    k,
    G,
    A,
    cu_seqlens,
    chunk_indices,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One program per (sub-chunk, chunk, batch row · head): the sub-chunk's rows of `A: [B, T, H, BT]`."""
    i_i, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, _, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)
    # the sub-chunk's queries [BC] and the chunk's keys [BT], as token indices within the sequence
    o_c, m_c, r_c = sub_chunk(i_t, i_i, bos, T, i_h, H, BT, BC)
    o_s = i_t * BT + tl.arange(0, BT)
    m_s = o_s < T
    r_s = (bos + o_s) * H + i_h
    start = i_t * BT + i_i * BC  # the sub-chunk's first token; its reference row is start − 1
    # the reference row exists (else the sub-chunk has no rows either); vectors: the interpreter takes no scalar mask
    m_before = m_s & (o_s < start) & (o_s * 0 + start <= T)

    b_A = tl.zeros([BC, BT], dtype=tl.float32)
    b_D = tl.zeros([BC, BC], dtype=tl.float32)  # the diagonal block
    o_d = tl.arange(0, BC)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        m_ck = m_c[:, None] & m_k[None, :]
        # [BC, BK] queries and their G; [BT, BK] the chunk's keys and their G
        b_q = tl.load(q + r_c[:, None] * K + o_k[None, :], mask=m_ck, other=0).to(tl.float32)
        b_gq = tl.load(G + r_c[:, None] * K + o_k[None, :], mask=m_ck, other=0)
        b_k = tl.load(k + r_s[:, None] * K + o_k[None, :], mask=m_s[:, None] & m_k[None, :], other=0).to(tl.float32)
        b_gk = tl.load(G + r_s[:, None] * K + o_k[None, :], mask=m_s[:, None] & m_k[None, :], other=0)
        if i_i > 0:
            # [BK] G at the reference row; keys before the sub-chunk through it
            b_gr = tl.load(G + ((bos + start - 1) * H + i_h) * K + o_k, mask=m_k & (o_k * 0 + start <= T), other=0)
            b_qr = b_q * masked_exp(b_gq - b_gr[None, :], m_ck)
            b_kr = b_k * masked_exp(b_gr[None, :] - b_gk, m_before[:, None] & m_k[None, :])
            # [BC, BK] @ [BK, BT] -> [BC, BT]
            b_A += tl.dot(b_qr, tl.trans(b_kr), input_precision=PRECISION)
        # the diagonal block, one key a step
        for j in range(BC):
            s = start + j
            m_j = m_k & (o_k * 0 + s < T)
            b_kj = tl.load(k + ((bos + s) * H + i_h) * K + o_k, mask=m_j, other=0).to(tl.float32)
            b_gj = tl.load(G + ((bos + s) * H + i_h) * K + o_k, mask=m_j, other=0)
            m_tj = (m_c & (o_c >= s))[:, None] & m_j[None, :]
            # [BC] scores of the sub-chunk's queries against key s
            b_col = tl.sum(b_q * b_kj[None, :] * masked_exp(b_gq - b_gj[None, :], m_tj), axis=1)
            b_D += tl.where(o_d[None, :] == j, b_col[:, None], 0)
    # the product's columns from the sub-chunk's own on are zero (keys masked): the diagonal block goes there
    o_cols = tl.arange(0, BT)
    m_off = (o_cols < i_i * BC) | (o_cols >= i_i * BC + BC)
    tl.store(A + r_c[:, None] * BT + o_cols[None, :], b_A, mask=m_c[:, None] & m_off[None, :])
    tl.store(A + r_c[:, None] * BT + i_i * BC + o_d[None, :], b_D, mask=m_c[:, None])


def gla_scores(q: torch.Tensor, k: torch.Tensor, G: torch.Tensor, layout: ChunkLayout, precision: str) -> torch.Tensor:
    """`q, k: [B, T, H, K]`, `G` (stage 1) -> float32 `A: [B, T, H, BT]`, row `t` holding its scores against its
    chunk's keys (zero for keys after it)."""
    B, T, H, K = q.shape
    BK = block(K)
    A = torch.empty(B, T, H, layout.BT, dtype=torch.float32, device=q.device)
    grid = (layout.BT // BC, layout.NT, B * H)
    gla_scores_kernel[grid](
        q, k, G, A, layout.cu_seqlens, layout.chunk_indices, T, H=H, K=K, BT=layout.BT, BC=BC, BK=BK,
        IS_VARLEN=layout.cu_seqlens is not None, PRECISION=precision,
    )  # fmt: skip
    return A
