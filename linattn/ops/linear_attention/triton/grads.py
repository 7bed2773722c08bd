"""The gradients of `q`, `k` and of the decay, one program per (key block, sub-chunk, chunk, batch row · head).

With `dA = scale · dO Vᵀ` on `s ≤ t` (the scores' gradient), `h_c` the chunk's start state and `dh_c` its end
state's gradient:

    dq_t = scale (dO_t h_cᵀ) ⊙ e^{G_t} + Σ_{s ≤ t} dA_ts k_s ⊙ e^{G_t − G_s}
    dk_s = (V_s dh_cᵀ) ⊙ e^{G_C − G_s}  + Σ_{t ≥ s} dA_ts q_t ⊙ e^{G_t − G_s}

the two sums split as the scores are (`scores.py`): keys before the sub-chunk through the row before it, queries
after it through its own last row, the diagonal block one token a step. Since `q_t` meets the decay only as
`q_t e^{Γ_t}` and `k_s` only as `k_s e^{−Γ_s}` (`Γ` the cumulative log-decay over the whole sequence), the gradient
of `Γ_t` is `q_t ⊙ dq_t − k_t ⊙ dk_t`, stored here as `dG`; `cumsum.py` sums it into `dg`.

Each key block's program forms the sub-chunk's `dA` rows and columns over every value block itself: at K = 128 the
two key blocks of a sub-chunk both form them (`[16, 64]` and `[64, 16]`, against `[16, 128]` products of their own
for `dq`, `dk`) instead of one more launch writing `dA` out for them to read; which is faster is not measured yet.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.linear_attention.triton.blocks import BC, block, masked_exp, sub_chunk, wide_tile_launch
from linattn.ops.utils.grid import cdiv
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import ChunkLayout


@triton.jit(do_not_specialize=["T"])
def gla_qk_grad_kernel(
    q,
    k,
    v,
    G,
    h,
    dh,
    do,
    dq,
    dk,
    dG,
    cu_seqlens,
    chunk_indices,
    T,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
):
    # axis 0: key block · sub-chunk
    i_k, i_i = tl.program_id(0) // (BT // BC), tl.program_id(0) % (BT // BC)
    i_t, i_bh = tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)
    o_c, m_c, r_c = sub_chunk(i_t, i_i, bos, T, i_h, H, BT, BC)  # the sub-chunk's rows [BC]
    o_s = i_t * BT + tl.arange(0, BT)  # the chunk's rows [BT]
    m_s = o_s < T
    r_s = (bos + o_s) * H + i_h
    start = i_t * BT + i_i * BC
    end = start + BC
    o_k = i_k * BK + tl.arange(0, BK)
    m_k = o_k < K
    m_ck = m_c[:, None] & m_k[None, :]
    m_sk = m_s[:, None] & m_k[None, :]
    o_state = (i_tg * H + i_h) * K * V

    # 1. over value blocks: the scores' gradient by rows [BC, BT] and by columns [BT, BC] of the sub-chunk, and
    # the products with the chunk's start state and end-state gradient [BC, BK]
    b_dA_row = tl.zeros([BC, BT], dtype=tl.float32)
    b_dA_col = tl.zeros([BT, BC], dtype=tl.float32)
    b_D = tl.zeros([BC, BC], dtype=tl.float32)  # their diagonal block: `D[t, s] = dO_t · v_s` within the sub-chunk
    b_dq = tl.zeros([BC, BK], dtype=tl.float32)
    b_dk = tl.zeros([BC, BK], dtype=tl.float32)
    for i_v in range(tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_v = o_v < V
        b_do_c = tl.load(do + r_c[:, None] * V + o_v[None, :], mask=m_c[:, None] & m_v[None, :], other=0).to(tl.float32)
        b_v_c = tl.load(v + r_c[:, None] * V + o_v[None, :], mask=m_c[:, None] & m_v[None, :], other=0).to(tl.float32)
        b_do = tl.load(do + r_s[:, None] * V + o_v[None, :], mask=m_s[:, None] & m_v[None, :], other=0).to(tl.float32)
        b_v = tl.load(v + r_s[:, None] * V + o_v[None, :], mask=m_s[:, None] & m_v[None, :], other=0).to(tl.float32)
        m_kv = m_k[:, None] & m_v[None, :]
        b_h = tl.load(h + o_state + o_k[:, None] * V + o_v[None, :], mask=m_kv, other=0)
        b_dh = tl.load(dh + o_state + o_k[:, None] * V + o_v[None, :], mask=m_kv, other=0)
        b_dA_row += tl.dot(b_do_c, tl.trans(b_v), input_precision=PRECISION)
        b_dA_col += tl.dot(b_do, tl.trans(b_v_c), input_precision=PRECISION)
        b_D += tl.dot(b_do_c, tl.trans(b_v_c), input_precision=PRECISION)
        b_dq += tl.dot(b_do_c, tl.trans(b_h), input_precision=PRECISION)
        b_dk += tl.dot(b_v_c, tl.trans(b_dh), input_precision=PRECISION)
    b_dA_row = tl.where(o_s[None, :] <= o_c[:, None], scale * b_dA_row, 0)
    b_dA_col = tl.where(o_s[:, None] >= o_c[None, :], scale * b_dA_col, 0)
    b_D *= scale  # its causal mask is the diagonal walk's (`m_after`, `m_upto`)
    o_d = tl.arange(0, BC)

    # 2. the sub-chunk's rows [BC, BK] of q, k and G; the chunk's [BT, BK]
    b_q_c = tl.load(q + r_c[:, None] * K + o_k[None, :], mask=m_ck, other=0).to(tl.float32)
    b_k_c = tl.load(k + r_c[:, None] * K + o_k[None, :], mask=m_ck, other=0).to(tl.float32)
    b_g_c = tl.load(G + r_c[:, None] * K + o_k[None, :], mask=m_ck, other=0)
    b_q = tl.load(q + r_s[:, None] * K + o_k[None, :], mask=m_sk, other=0).to(tl.float32)
    b_k = tl.load(k + r_s[:, None] * K + o_k[None, :], mask=m_sk, other=0).to(tl.float32)
    b_g = tl.load(G + r_s[:, None] * K + o_k[None, :], mask=m_sk, other=0)
    b_gl = tl.load(G + ((bos + tl.minimum(i_t * BT + BT, T) - 1) * H + i_h) * K + o_k, mask=m_k, other=0)
    b_dq *= scale * masked_exp(b_g_c, m_ck)
    b_dk *= masked_exp(b_gl[None, :] - b_g_c, m_ck)

    # 3. keys before the sub-chunk (dq) through the row before it; queries after it (dk) through its last row
    if i_i > 0:
        # the reference row exists (else the sub-chunk has no rows either); vectors: no scalar masks in the interpreter
        b_gr = tl.load(G + ((bos + start - 1) * H + i_h) * K + o_k, mask=m_k & (o_k * 0 + start <= T), other=0)
        m_before = m_s & (o_s < start) & (o_s * 0 + start <= T)
        b_kr = b_k * masked_exp(b_gr[None, :] - b_g, m_before[:, None] & m_k[None, :])
        b_dq += tl.dot(b_dA_row, b_kr, input_precision=PRECISION) * masked_exp(b_g_c - b_gr[None, :], m_ck)
    b_gr = tl.load(G + ((bos + tl.minimum(end, T) - 1) * H + i_h) * K + o_k, mask=m_k, other=0)
    b_qr = b_q * masked_exp(b_g - b_gr[None, :], (m_s & (o_s >= end))[:, None] & m_k[None, :])
    b_dk += tl.dot(tl.trans(b_dA_col), b_qr, input_precision=PRECISION) * masked_exp(b_gr[None, :] - b_g_c, m_ck)

    # 4. the diagonal block, one token a step: key `start + j` for dq, query `start + j` for dk
    for j in range(BC):
        s = start + j
        m_j = m_k & (o_k * 0 + s < T)
        b_kj = tl.load(k + ((bos + s) * H + i_h) * K + o_k, mask=m_j, other=0).to(tl.float32)
        b_qj = tl.load(q + ((bos + s) * H + i_h) * K + o_k, mask=m_j, other=0).to(tl.float32)
        b_gj = tl.load(G + ((bos + s) * H + i_h) * K + o_k, mask=m_j, other=0)
        # [BC] dA over the sub-chunk's queries against key s, and of query s against the sub-chunk's keys
        b_dA_s = tl.sum(tl.where(o_d[None, :] == j, b_D, 0), axis=1)
        b_dA_t = tl.sum(tl.where(o_d[:, None] == j, b_D, 0), axis=0)
        m_after, m_upto = (m_c & (o_c >= s))[:, None] & m_j[None, :], (m_c & (o_c <= s))[:, None] & m_j[None, :]
        b_dq += b_dA_s[:, None] * b_kj[None, :] * masked_exp(b_g_c - b_gj[None, :], m_after)
        b_dk += b_dA_t[:, None] * b_qj[None, :] * masked_exp(b_gj[None, :] - b_g_c, m_upto)

    o = r_c[:, None] * K + o_k[None, :]
    tl.store(dq + o, b_dq.to(dq.dtype.element_ty), mask=m_ck)
    tl.store(dk + o, b_dk.to(dk.dtype.element_ty), mask=m_ck)
    tl.store(dG + o, b_q_c * b_dq - b_k_c * b_dk, mask=m_ck)


def gla_qk_grads(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    G: torch.Tensor,
    h: torch.Tensor,
    dh: torch.Tensor,
    do: torch.Tensor,
    scale: float,
    layout: ChunkLayout,
    precision: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`(dq, dk, dG)`: `dq, dk` in q's and k's dtypes, `dG = q ⊙ dq − k ⊙ dk` float32, all `[B, T, H, K]`."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    BK = block(K)
    # 32-value blocks: with 64 the kernel spills 0.4 – 0.8 KB a thread at K = 128 (`scripts/compile_kernels.py`)
    BV = block(V, 32)
    dq, dk = torch.empty_like(q), torch.empty_like(k)
    dG = torch.empty(B, T, H, K, dtype=torch.float32, device=q.device)
    grid = (cdiv(K, BK) * (layout.BT // BC), layout.NT, B * H)
    gla_qk_grad_kernel[grid](
        q, k, v, G, h, dh, do, dq, dk, dG, layout.cu_seqlens, layout.chunk_indices, T, scale, H=H, K=K, V=V,
        BT=layout.BT, BC=BC, BK=BK, BV=BV, IS_VARLEN=layout.cu_seqlens is not None, PRECISION=precision,
        **wide_tile_launch(precision),
    )  # fmt: skip
    return dq, dk, dG
