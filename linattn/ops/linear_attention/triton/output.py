"""Stage 4 and the values' gradient, one program per (value block, chunk, batch row · head):

- forward: `O = scale ((Q ⊙ e^G) h_c + A V)`, `h_c` the chunk's start state, `A` stage 2's scores;
- backward: `dV = scale Aᵀ dO + (K ⊙ e^{G_C − G}) dh_c`, `dh_c` the gradient of the chunk's end state.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.linear_attention.triton.blocks import block, masked_exp, wide_tile_launch
from linattn.ops.utils.grid import cdiv
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import ChunkLayout


@triton.jit(do_not_specialize=["T"])
def gla_output_kernel(
    x,
    y,
    G,
    A,
    h,
    out,
    cu_seqlens,
    chunk_indices,
    T,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BACKWARD: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Forward: `x = q`, `y = v`, `h` the chunk-start states, `out = O`. `BACKWARD`: `x = k`, `y = dO`, `h` the
    end-state gradients, `out = dV`."""
    i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)
    o_i = i_t * BT + tl.arange(0, BT)
    m_t = o_i < T
    r_t = (bos + o_i) * H + i_h
    o_v = i_v * BV + tl.arange(0, BV)
    m_tv = m_t[:, None] & (o_v < V)[None, :]
    last = ((bos + tl.minimum(i_t * BT + BT, T) - 1) * H + i_h) * K  # G's row at the chunk's last token

    b_o = tl.zeros([BT, BV], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        m_tk = m_t[:, None] & m_k[None, :]
        # [BT, BK] queries (keys) and their G
        b_x = tl.load(x + r_t[:, None] * K + o_k[None, :], mask=m_tk, other=0).to(tl.float32)
        b_g = tl.load(G + r_t[:, None] * K + o_k[None, :], mask=m_tk, other=0)
        if BACKWARD:
            b_gl = tl.load(G + last + o_k, mask=m_k, other=0)
            b_x *= masked_exp(b_gl[None, :] - b_g, m_tk)
        else:
            b_x *= tl.exp(b_g)
        # [BK, BV] state (gradient) tile
        b_h = tl.load(
            h + (i_tg * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :],
            mask=m_k[:, None] & (o_v < V)[None, :],
            other=0,
        )
        # [BT, BK] @ [BK, BV] -> [BT, BV]
        b_o += tl.dot(b_x, b_h, input_precision=PRECISION)
    # [BT, BT] scores (zero above the diagonal), [BT, BV] values (output gradients)
    b_A = tl.load(A + r_t[:, None] * BT + tl.arange(0, BT)[None, :], mask=m_t[:, None], other=0)
    b_y = tl.load(y + r_t[:, None] * V + o_v[None, :], mask=m_tv, other=0).to(tl.float32)
    if BACKWARD:
        b_o += scale * tl.dot(tl.trans(b_A), b_y, input_precision=PRECISION)
    else:
        b_o = scale * (b_o + tl.dot(b_A, b_y, input_precision=PRECISION))
    tl.store(out + r_t[:, None] * V + o_v[None, :], b_o.to(out.dtype.element_ty), mask=m_tv)


def gla_output(
    x: torch.Tensor,
    y: torch.Tensor,
    G: torch.Tensor,
    A: torch.Tensor,
    h: torch.Tensor,
    scale: float,
    layout: ChunkLayout,
    precision: str,
    out_dtype: torch.dtype,
    *,
    backward: bool = False,
) -> torch.Tensor:
    """Forward: `(q, v, G, A, chunk-start states)` -> `O: [B, T, H, V]`; `backward=True`: `(k, dO, G, A, end-state
    gradients)` -> `dV`. In `out_dtype`."""
    B, T, H, K = x.shape
    V = y.shape[-1]
    BK = block(K)
    BV = block(V)
    out = torch.empty(B, T, H, V, dtype=out_dtype, device=x.device)
    grid = (cdiv(V, BV), layout.NT, B * H)
    gla_output_kernel[grid](
        x, y, G, A, h, out, layout.cu_seqlens, layout.chunk_indices, T, scale, H=H, K=K, V=V, BT=layout.BT,
        BK=BK, BV=BV, BACKWARD=backward, IS_VARLEN=layout.cu_seqlens is not None, PRECISION=precision,
        **wide_tile_launch(precision),
    )  # fmt: skip
    return out
