"""The forward's per-chunk kernel: the covariance read and the contraction, all chunks in parallel, writing `q'`.

Per chunk, from its start state `(C_0, m_0, Z_0)` (`state.py`), with `D_ts = Γ_t/Γ_s` on `s ≤ t` of the chunk,
`D̃ = tril(D)` and `A = Q Kᵀ ⊙ D̃`, the running sums at the chunk's tokens are (rows `t`)

    a_t = C_tᵀ q_t :  diag(Γ) Q C_0 + A K             [BT, K]
    b_t = m_t      :  Γ m_0ᵀ + D̃ K                     [BT, K]
    z_t = Z_t      :  Γ Z_0 + rowsum(D̃)                [BT]
    r_t = m_tᵀ q_t :  Γ (Q m_0) + rowsum(A)            [BT]   (no product: bᵀq is a row sum of A)

and the contraction `q' = q − λ/z (a − ρ b)`, `ρ = r/z` (centred; 0 otherwise), is `q − λ/z u` with

    u = diag(Γ) (Q C_0 − ρ m_0ᵀ) + W K,        W = A − diag(ρ) D̃

so the mean costs no second product: `b` enters only through `W`. One program per (column block, chunk, batch row
· head) builds `A`, `r`, `z` and `W` in a pass over key blocks (every column block of a chunk rebuilds them), then
writes its column block of `q'`, with a pass over key blocks for `Q C_0`. A training call that keeps its forward
(`function.keeps_states`) also writes `u`, `b` (one more product, `D̃ K`), `z` and `ρ`: the backward's row scalars
then need no `[BT, BT]` tile (`local_bwd.rows_kept`). `Q Kᵀ` is a product of two raw inputs
(`precision.raw_operands`: 16-bit ones on the 16-bit tensor cores); the others carry float32 intermediates and ask for
`tf32x3`, or one tf32 pass when a bfloat16 `q'` is the only output (`precision.state_precision`, as the delta rule's
state pass).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.ccq.triton.state import chunk_decay
from linattn.ops.utils.grid import cdiv, next_power_of_2
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import ChunkLayout
from linattn.ops.utils.precision import raw_dot, raw_operands


def block_size(K: int) -> int:
    """Key and column blocks of the per-chunk kernels: 32 wide (16 for K ≤ 16, `tl.dot`'s minimum). Compiled for
    Hopper at K = 128, bfloat16 (`scripts/compile_kernels.py`): 64-wide blocks take 3.3× the shared memory of the
    forward and `rows_bwd` and spill 0.55 KB a thread in `local_bwd`; 32-wide ones spill 0.13 KB there, nothing
    elsewhere."""
    return min(32, max(16, next_power_of_2(K)))


@triton.jit
def chunk_scores(
    x, k, hm, o_i, m_t, K: tl.constexpr, H: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, RAW: tl.constexpr
):
    """`(X Kᵀ [BT, BT], X m_0 [BT])` of one chunk, over key blocks: `x, k` point at the chunk's first token of this
    head (rows `H·K` apart, any float dtype), `hm` at the chunk-start `m_0`; `RAW` from `precision.raw_operands`."""
    b_S = tl.zeros([BT, BT], dtype=tl.float32)
    b_xm = tl.zeros([BT], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        m_tk = m_t[:, None] & m_k[None, :]
        # [BT, BK], [BT, BK], [BK]
        b_x = tl.load(x + o_i[:, None] * (H * K) + o_k[None, :], mask=m_tk, other=0)
        b_k = tl.load(k + o_i[:, None] * (H * K) + o_k[None, :], mask=m_tk, other=0)
        b_m0 = tl.load(hm + o_k, mask=m_k, other=0)
        # [BT, BK] @ [BK, BT] -> [BT, BT]
        b_S += raw_dot(b_x, tl.trans(b_k), RAW)
        b_xm += tl.sum(b_x.to(tl.float32) * b_m0[None, :], axis=1)
    return b_S, b_xm


@triton.jit
def read_state(x, hC, o_i, m_t, o_v, m_v, K: tl.constexpr, H: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
               BV: tl.constexpr, PRECISION: tl.constexpr):  # fmt: skip
    """`X C_0` on one column block `o_v` (`[BT, BV]`, float32), over key blocks; `hC` points at the chunk-start
    `C_0` (`[K, K]` float32, or the fast level's bfloat16); `PRECISION` of the product."""
    b_xc = tl.zeros([BT, BV], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        # [BT, BK], [BK, BV]
        b_x = tl.load(x + o_i[:, None] * (H * K) + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0)
        b_C0 = tl.load(hC + o_k[:, None] * K + o_v[None, :], mask=m_k[:, None] & m_v[None, :], other=0).to(tl.float32)
        # [BT, BK] @ [BK, BV] -> [BT, BV]
        b_xc += tl.dot(b_x.to(tl.float32), b_C0, input_precision=PRECISION)
    return b_xc


@triton.jit(do_not_specialize=["T", "R"])
def ccq_output_fwd_kernel(
    q,
    k,
    lam,
    g,
    hC,
    hm,
    hZ,
    y,
    ku,
    kb,
    kzr,
    cu_seqlens,
    chunk_indices,
    T,
    R,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_G: tl.constexpr,
    CENTERED: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    RAW: tl.constexpr,
    PRECISION: tl.constexpr,
    KEEP: tl.constexpr,
):
    """One program per (column block, chunk, batch row · head); with `KEEP`, `ku, kb` (`[B, T, H, K]`) take `u, b`
    and `kzr` (`[2, B, T, H]`, planes of `R = B·T·H` floats) `z, ρ`."""
    i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)

    # this head at the chunk's first token; a token step is H·(K | 1) elements
    t0 = bos + i_t * BT
    q += (t0 * H + i_h) * K
    k += (t0 * H + i_h) * K
    y += (t0 * H + i_h) * K
    i_row = i_tg * H + i_h
    hC += i_row * K * K
    hm += i_row * K
    o_i = tl.arange(0, BT)
    m_t = o_i < T - i_t * BT
    last = tl.minimum(BT, T - i_t * BT) - 1

    b_gamma, _, b_D, _ = chunk_decay(g, t0, i_h, o_i, m_t, last, H, BT, USE_G)
    # [BT, BT] Q Kᵀ, [BT] Q m_0
    b_S, b_qm = chunk_scores(q, k, hm, o_i, m_t, K, H, BT, BK, RAW)
    b_A = b_S * b_D
    # [BT] z (1 on padding rows), ρ = r / z
    b_z = tl.where(m_t, b_gamma * tl.load(hZ + i_row) + tl.sum(b_D, axis=1), 1.0)
    if CENTERED:
        b_rho = (b_gamma * b_qm + tl.sum(b_A, axis=1)) / b_z
    else:
        b_rho = tl.zeros([BT], dtype=tl.float32)
    # [BT, BT] W = A − diag(ρ) D̃;  [BT] λ / z
    b_W = b_A - b_rho[:, None] * b_D
    b_lz = tl.load(lam + t0 * H + i_h + o_i * H, mask=m_t, other=0).to(tl.float32) / b_z

    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < K
    m_tv = m_t[:, None] & m_v[None, :]
    # [BT, BV] Q C_0 on this column block
    b_u = read_state(q, hC, o_i, m_t, o_v, m_v, K, H, BT, BK, BV, PRECISION)
    # [BV]
    b_m0 = tl.load(hm + o_v, mask=m_v, other=0)
    b_u = b_gamma[:, None] * (b_u - b_rho[:, None] * b_m0[None, :])
    # [BT, BV] keys and queries of the column block
    b_kv = tl.load(k + o_i[:, None] * (H * K) + o_v[None, :], mask=m_tv, other=0).to(tl.float32)
    b_qv = tl.load(q + o_i[:, None] * (H * K) + o_v[None, :], mask=m_tv, other=0).to(tl.float32)
    # [BT, BT] @ [BT, BV] -> [BT, BV]
    b_u += tl.dot(b_W, b_kv, input_precision=PRECISION)
    b_y = b_qv - b_lz[:, None] * b_u
    o_tv = o_i[:, None] * (H * K) + o_v[None, :]
    tl.store(y + o_tv, b_y.to(y.dtype.element_ty), mask=m_tv)
    if KEEP:
        # [BT, BV] b = Γ m_0ᵀ + D̃ K on this column block: [BT, BT] @ [BT, BV] -> [BT, BV]
        b_b = b_gamma[:, None] * b_m0[None, :] + tl.dot(b_D, b_kv, input_precision=PRECISION)
        o_kept = (t0 * H + i_h) * K + o_tv
        tl.store(ku + o_kept, b_u, mask=m_tv)
        tl.store(kb + o_kept, b_b, mask=m_tv)
        if i_v == 0:
            o_r = t0 * H + i_h + o_i * H
            tl.store(kzr + o_r, b_z, mask=m_t)
            tl.store(kzr + R + o_r, b_rho, mask=m_t)


def output_fwd(
    q: torch.Tensor,
    k: torch.Tensor,
    lam: torch.Tensor,
    g: torch.Tensor | None,
    h: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    centered: bool,
    layout: ChunkLayout,
    precision: str = "tf32x3",
    keep: bool = False,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None]:
    """`q, k: [B, T, H, K]`, `lam: [B, T, H]`, `g: [B, T, H]` or None, chunk-start states `h = (C, m, Z)` from
    `state.state_fwd`. Returns `q': [B, T, H, K]` in q's dtype (computed in float32) and, with `keep`, the read's
    parts for the backward: float32 `(u, b: [B, T, H, K], zr: [2, B, T, H])` (`zr` holds `z, ρ`); else None.
    `precision`: of the products with float32 intermediates."""
    B, T, H, K = q.shape
    BK = block_size(K)
    y = torch.empty_like(q)
    kept = None
    if keep:
        f32 = {"dtype": torch.float32, "device": q.device}
        kept = (torch.empty(B, T, H, K, **f32), torch.empty(B, T, H, K, **f32), torch.empty(2, B, T, H, **f32))
    # 64 columns a program from K = 64 on, for one-pass products: each program rebuilds the chunk's `A` and `W` over
    # all of K, so fewer, wider column blocks rebuild them less often (a bf16 training call at 64K: 1.22 ms against
    # 32 columns' 2.06 at K = 128, 0.49 against 0.81 at K = 64; `python -m linattn.bench profile --contenders CCQ-GDN
    # --K 64,128`). With `tf32x3` they spill 2 – 3 KB a thread (`scripts/compile_kernels.py`), so those launches
    # keep 32 columns
    BV = 64 if K >= 64 and precision == "tf32" else BK
    grid = (cdiv(K, BV), layout.NT, B * H)
    ccq_output_fwd_kernel[grid](
        q, k, lam, g, *h, y, *(kept or (None, None, None)), layout.cu_seqlens, layout.chunk_indices, T, B * T * H,
        H=H, K=K, BT=layout.BT, BK=BK, BV=BV,
        USE_G=g is not None, CENTERED=centered, IS_VARLEN=layout.cu_seqlens is not None,
        RAW=raw_operands(q.device, q.dtype),
        PRECISION=precision, KEEP=keep,
        # bf16 at 64K: at K = 128 2.95 ms with 4 warps, 2.07 with 2, 1.98 with 1; at K = 32 0.41, 0.37, 0.48
        # (`python -m linattn.bench profile --contenders CCQ-GDN --K 32,128`, with the count changed)
        num_warps=2,
    )  # fmt: skip
    return y, kept
