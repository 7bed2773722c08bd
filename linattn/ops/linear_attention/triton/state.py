"""Stage 3 and its backward: the walks over chunks, one program per (key block, value block, sequence · head).

A per-channel decay scales the state's rows, so its key rows are independent and split into blocks too.

- forward: `h_{c+1} = diag(e^{G_C}) h_c + (K ⊙ e^{G_C − G})ᵀ V` (`G_C`: `G` at the chunk's last token), every
  chunk-start state `h_c` kept, the final state stored if asked;
- backward: with `dh_c` the gradient of chunk `c`'s end state, `dh_{c−1} = diag(e^{G_C}) dh_c + scale (Q ⊙ e^G)ᵀ dO`
  (the chunk's reads of its start state), from the final state's gradient; every `dh_c` kept, and the initial
  state's gradient stored.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.linear_attention.triton.blocks import block, masked_exp
from linattn.ops.utils.grid import cdiv
from linattn.ops.utils.index import sequence_coords, state_tile
from linattn.ops.utils.layout import ChunkLayout


@triton.jit
def chunk_tiles(x, G, t0, n, i_h, o_k, m_k, H: tl.constexpr, K: tl.constexpr, BT: tl.constexpr):
    """The chunk of `n` tokens from token `t0`: `[BT, BK]` of `x` (float32), its `G`, and `G` at its last token
    `[BK]`."""
    o_i = tl.arange(0, BT)
    m = (o_i < n)[:, None] & m_k[None, :]
    o = ((t0 + o_i) * H + i_h)[:, None] * K + o_k[None, :]
    b_x = tl.load(x + o, mask=m, other=0).to(tl.float32)
    b_g = tl.load(G + o, mask=m, other=0)
    b_gl = tl.load(G + ((t0 + n - 1) * H + i_h) * K + o_k, mask=m_k, other=0)
    return b_x, b_g, b_gl, m


@triton.jit(do_not_specialize=["T"])
def gla_state_kernel(
    x,
    y,
    G,
    h,
    h_in,
    h_out,
    cu_seqlens,
    chunk_offsets,
    T,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    REVERSE: tl.constexpr,
    USE_IN: tl.constexpr,
    STORE_OUT: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Forward (`REVERSE` off): `x = k`, `y = v`, `h_in` the initial state, `h_out` the final one, `h` gets each
    chunk's start state. Backward: `x = q`, `y = dO`, `h_in` the final state's gradient, `h_out` the initial
    state's, `h` gets each chunk's end-state gradient."""
    i_k, i_v, i_nh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_n, i_h = i_nh // H, i_nh % H
    bos, T, NT, boh = sequence_coords(i_n, T, cu_seqlens, chunk_offsets, BT, IS_VARLEN)
    o_i = tl.arange(0, BT)
    o_k, o_v, m_k, m_v, m_h, o_h = state_tile(i_k, i_v, K, V, BK, BV)

    # [BK, BV] state (or its gradient) tile
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_IN:
        b_h += tl.load(h_in + i_nh.to(tl.int64) * K * V + o_h, mask=m_h, other=0).to(tl.float32)
    for step in range(0, NT):
        i_t = NT - 1 - step if REVERSE else step
        tl.store(h + ((boh + i_t) * H + i_h) * K * V + o_h, b_h, mask=m_h)
        t0 = bos + i_t * BT
        n = tl.minimum(BT, T - i_t * BT)
        # [BT, BK] keys (queries), their G, [BK] G at the chunk's last token
        b_x, b_g, b_gl, m_tk = chunk_tiles(x, G, t0, n, i_h, o_k, m_k, H, K, BT)
        # [BT, BV] values (output gradients)
        m_tv = (o_i < n)[:, None] & m_v[None, :]
        b_y = tl.load(y + ((t0 + o_i) * H + i_h)[:, None] * V + o_v[None, :], mask=m_tv, other=0).to(tl.float32)
        b_h *= tl.exp(b_gl)[:, None]
        if REVERSE:
            b_x *= scale * tl.exp(b_g)
        else:
            b_x *= masked_exp(b_gl[None, :] - b_g, m_tk)
        # [BK, BT] @ [BT, BV] -> [BK, BV]
        b_h += tl.dot(tl.trans(b_x), b_y, input_precision=PRECISION)
    if STORE_OUT:
        tl.store(h_out + i_nh.to(tl.int64) * K * V + o_h, b_h, mask=m_h)


def gla_state(
    x: torch.Tensor,
    y: torch.Tensor,
    G: torch.Tensor,
    h_in: torch.Tensor | None,
    store_out: bool,
    layout: ChunkLayout,
    precision: str,
    *,
    reverse: bool = False,
    scale: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Forward: `(k, v, G, initial_state, output_final_state)` -> chunk-start states `h: [B, NT, H, K, V]` and the
    final state `[N, H, K, V]` (or None). `reverse=True`: `(q, dO, G, dS_T, initial state given)` -> each chunk's
    end-state gradient `dh: [B, NT, H, K, V]` and the initial state's gradient (or None). float32 throughout."""
    B, T, H, K = x.shape
    V = y.shape[-1]
    # [32, 32] tiles: a training call's three walks take about three quarters of [64, 32]'s time at K = V = 128
    # (`python -m linattn.bench profile --contenders "ours triton GLA (per-channel decay)"`), and three-pass launches
    # hold them without spilling too (`scripts/compile_kernels.py`)
    BK = block(K, 32)
    BV = block(V, 32)
    h = torch.empty(B, layout.NT, H, K, V, dtype=torch.float32, device=x.device)
    h_out = torch.empty(layout.N, H, K, V, dtype=torch.float32, device=x.device) if store_out else None
    grid = (cdiv(K, BK), cdiv(V, BV), layout.N * H)
    gla_state_kernel[grid](
        x, y, G, h, h_in, h_out, layout.cu_seqlens, layout.chunk_offsets, T, scale, H=H, K=K, V=V, BT=layout.BT,
        BK=BK, BV=BV, REVERSE=reverse, USE_IN=h_in is not None, STORE_OUT=store_out,
        IS_VARLEN=layout.cu_seqlens is not None, PRECISION=precision,
    )  # fmt: skip
    return h, h_out
