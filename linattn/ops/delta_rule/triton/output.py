"""Stage 4 of the chunked forward: the outputs, all chunks in parallel.

Per chunk, from its start state `h_c` and pseudo-values `U_c` (stage 3):

    O = scale · ( diag(Γ) Q h_c + tril(Q Wᵀ ⊙ D) U_c )        [BT, V]

the inter-chunk part (what the state held at the chunk's start, decayed to each token) plus the intra-chunk part
(the writes of tokens `s ≤ t` of the same chunk). `D_ts = exp(G_t − G_s)` is masked to `s ≤ t` before `exp`.
The products with `h` and `U` take the launcher's `precision` (`"tf32x3"`, true float32, or one tf32 pass when a
bfloat16 `o` is the forward's only output: `precision.apply_precision`); `Q Wᵀ` of two raw inputs is exact in one
tf32 pass for bfloat16 / float16 (`precision.py`).

Without the erase term (linear attention, scalar-decay GLA) the pseudo-values are the values, and the launcher is
handed `V` itself as `U`: no mode flag is needed here.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.chunking import causal, decay_matrix
from linattn.ops.delta_rule.triton.precision import narrow_launch
from linattn.ops.utils.grid import cdiv, next_power_of_2
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import ChunkLayout
from linattn.ops.utils.precision import mma, raw_dot, raw_operands


def output_ref(
    q: torch.Tensor,
    w: torch.Tensor,
    G: torch.Tensor | None,
    h: torch.Tensor,
    U: torch.Tensor,
    scale: float,
    layout: ChunkLayout,
) -> torch.Tensor:
    """`o: [B, T, H, V]` from `q, w: [B, T, H, K]`, `G: [B, T, H]` or None, `h: [B, NT, H, K, V]`, `U: [B, T, H, V]`,
    in float64."""
    q, w, h, U = (x.double() for x in (q, w, h, U))
    o = torch.zeros_like(U)
    for _, b, bos, eos, first in layout.sequences():
        for i, start in enumerate(range(bos, eos, layout.BT)):
            c = slice(start, min(start + layout.BT, eos))
            q_c, w_c, U_c = (x[b, c].transpose(0, 1) for x in (q, w, U))  # [H, L, K|V]
            G_c = None if G is None else G[b, c].T.double()  # [H, L]
            D = None if G_c is None else decay_matrix(G_c)
            q_start = q_c if G_c is None else q_c * G_c.exp()[..., None]
            o_c = q_start @ h[b, first + i] + causal(q_c @ w_c.transpose(-1, -2), D) @ U_c
            o[b, c] = scale * o_c.transpose(0, 1)
    return o


@triton.jit(do_not_specialize=["T"])
def output_fwd_kernel(
    q,
    w,
    G,
    h,
    U,
    o,
    cu_seqlens,
    chunk_indices,
    scale,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_G: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    RAW: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One program per (value block, chunk, batch row · head)."""
    i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)

    # this head at the chunk's first token; a token step is H·(K | V | 1) elements
    t0 = bos + i_t * BT
    q += (t0 * H + i_h) * K
    w += (t0 * H + i_h) * K
    U += (t0 * H + i_h) * V
    o += (t0 * H + i_h) * V
    h += (i_tg * H + i_h) * K * V
    o_i = tl.arange(0, BT)
    o_v = i_v * BV + tl.arange(0, BV)
    m_t = o_i < T - i_t * BT
    m_v = o_v < V

    # Q h_c and Q Wᵀ, accumulated over key blocks
    b_o = tl.zeros([BT, BV], dtype=tl.float32)
    b_A = tl.zeros([BT, BT], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        m_tk = m_t[:, None] & m_k[None, :]
        # [BT, BK], [BT, BK], [BK, BV]
        b_q = tl.load(q + o_i[:, None] * (H * K) + o_k[None, :], mask=m_tk, other=0)
        b_w = tl.load(w + o_i[:, None] * (H * K) + o_k[None, :], mask=m_tk, other=0)
        b_h = tl.load(h + o_k[:, None] * V + o_v[None, :], mask=m_k[:, None] & m_v[None, :], other=0)
        # [BT, BK] @ [BK, BV] -> [BT, BV]
        b_o += mma(b_q, b_h, PRECISION)
        # [BT, BK] @ [BK, BT] -> [BT, BT]
        b_A += raw_dot(b_q, tl.trans(b_w), RAW)

    # s ≤ t on real rows (a padding row has G = 0, and its exp(0 − G_s) could overflow)
    m_A = (o_i[:, None] >= o_i[None, :]) & m_t[:, None]
    if USE_G:
        # [BT] cumulative log-decay, 0 on padding
        b_g = tl.load(G + t0 * H + i_h + o_i * H, mask=m_t, other=0)
        b_o *= tl.exp(b_g)[:, None]
        b_A *= tl.exp(tl.where(m_A, b_g[:, None] - b_g[None, :], float("-inf")))
    b_A = tl.where(m_A, b_A, 0.0)

    m_tv = m_t[:, None] & m_v[None, :]
    o_tv = o_i[:, None] * (H * V) + o_v[None, :]
    # [BT, BV] (stage 3's, float32 or the fast level's bfloat16; without the erase term the values)
    b_U = tl.load(U + o_tv, mask=m_tv, other=0).to(tl.float32)
    # [BT, BT] @ [BT, BV] -> [BT, BV]
    b_o = (b_o + mma(b_A, b_U, PRECISION)) * scale
    tl.store(o + o_tv, b_o.to(o.dtype.element_ty), mask=m_tv)


def output_fwd(
    q: torch.Tensor,
    w: torch.Tensor,
    G: torch.Tensor | None,
    h: torch.Tensor,
    U: torch.Tensor,
    scale: float,
    layout: ChunkLayout,
    out_dtype: torch.dtype,
    precision: str = "tf32x3",
) -> torch.Tensor:
    """`q, w: [B, T, H, K]`, `G: [B, T, H]` or None, `h: [B, NT, H, K, V]` and `U: [B, T, H, V]` (stage 3's, float32
    or the fast level's bfloat16; without the erase term the values `v`, in any float dtype).

    Returns `o: [B, T, H, V]` in `out_dtype` (accumulated in float32). `precision`: `input_precision` of the
    products with `h` and `U`.
    """
    B, T, H, K = q.shape
    V = U.shape[-1]
    # key and value blocks (tl.dot wants every dimension ≥ 16; masks cover the rest) of at most 32 columns and two
    # warps for 16-bit keys (a sixth faster than 64 and four warps at K = V = 128, 64K tokens); one-pass launches take
    # value blocks of 64 (fewer programs rebuilding `Q Wᵀ`: a quarter faster, the same bits); float32 keys: 64
    # columns, four warps (`python -m linattn.bench stages` times the stage)
    narrow = narrow_launch(q.dtype, w.dtype)
    block = 32 if narrow else 64
    BK = min(block, max(16, next_power_of_2(K)))
    BV = min(64 if precision != "tf32x3" else block, max(16, next_power_of_2(V)))
    o = torch.empty(B, T, H, V, dtype=out_dtype, device=q.device)
    grid = (cdiv(V, BV), layout.NT, B * H)
    output_fwd_kernel[grid](
        q, w, G, h, U, o, layout.cu_seqlens, layout.chunk_indices, scale, T,
        H=H, K=K, V=V, BT=layout.BT, BK=BK, BV=BV,
        USE_G=G is not None, IS_VARLEN=layout.cu_seqlens is not None,
        RAW=raw_operands(q.device, q.dtype, w.dtype), PRECISION=precision, num_warps=2 if narrow else 4, num_stages=3,
    )  # fmt: skip
    return o
