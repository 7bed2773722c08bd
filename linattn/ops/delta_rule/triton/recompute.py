"""Stage 0 of the chunked backward: the right-hand sides of the WY stage again, from the inverse the forward saved.

Per chunk, with `T = (I + A)⁻¹` as `wy.py` stored it, `Γ = exp(G)`:

    Ũ = T diag(β) V        [BT, V]
    K̃ = T diag(β Γ) K      [BT, K]

(for KLA `β = η r` with the forward's `r = 1 / (‖k‖² + ε)`, exactly the step `wy.py` used)

which is the tail of `wy_fwd_kernel` without building `T` (two `[BT, BT]` products per chunk against the
`2 log2 BT` of the inversion). The backward feeds them to `state_fwd` to rebuild the chunk-start states `h` and
the pseudo-values `U`, and `K̃` once more, each chunk's rows transposed (`transpose.py`'s layout, stored from the
same registers), to `state_bwd` (`K̃ᵀ dU`). A cut backward (`backward.py`) asks for the parts it needs: the rows
where it only rebuilds states, the transposed keys where the states are already known. Its reference is `wy_ref`
(the same `Ũ`, `K̃`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.delta_rule.triton.precision import narrow_launch
from linattn.ops.utils.grid import next_power_of_2
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import ChunkLayout
from linattn.ops.utils.precision import mma


@triton.jit
def apply_inverse(
    b_T,
    src,
    dst,
    dst_t,
    b_rows,
    o_i,
    m_t,
    H: tl.constexpr,
    N: tl.constexpr,
    BT: tl.constexpr,
    BN: tl.constexpr,
    ROWS: tl.constexpr,
    COLS: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """`T diag(rows) src` for one chunk, `BN` columns at a time: `src` (any float dtype) points at the chunk's first
    token of one head, rows `H·N` elements apart; `b_T: [BT, BT]`, `b_rows: [BT]`; `PRECISION` of the product.
    Stored (in `dst`'s dtype) as rows (`ROWS`: `dst` like `src`) and/or transposed (`COLS`: `dst_t` at the chunk's
    `[N, BT]` block, contiguous along the tokens; the rows past a sequence's end are zeros, as `b_T`'s are)."""
    for i_n in range(tl.cdiv(N, BN)):
        o_n = i_n * BN + tl.arange(0, BN)
        m_n = m_t[:, None] & (o_n < N)[None, :]
        # [BT, BN]
        b_x = tl.load(src + o_i[:, None] * (H * N) + o_n[None, :], mask=m_n, other=0).to(tl.float32)
        # [BT, BT] @ [BT, BN] -> [BT, BN]
        b_y = mma(b_T, b_x * b_rows[:, None], PRECISION)
        if ROWS:
            tl.store(dst + o_i[:, None] * (H * N) + o_n[None, :], b_y, mask=m_n)
        if COLS:
            # [BN, BT]
            tl.store(dst_t + o_n[:, None] * BT + o_i[None, :], tl.trans(b_y), mask=(o_n < N)[:, None])


@triton.jit(do_not_specialize=["T"])
def wy_apply_kernel(
    k,
    v,
    beta,
    G,
    T_inv,
    inv_sq_norm,
    u_tilde,
    k_tilde,
    k_tilde_t,
    cu_seqlens,
    chunk_indices,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_BETA: tl.constexpr,
    USE_G: tl.constexpr,
    KACZMARZ: tl.constexpr,
    VALUES: tl.constexpr,
    KEYS_T: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One program per (chunk, batch row · head): loads the chunk's `T` once and applies it to both sides. Stores
    `Ũ`, `K̃` with `VALUES`, and `K̃` transposed with `KEYS_T`."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)

    # this head at the chunk's first token; a token step is H·(K | V | BT | 1) elements
    t0 = bos + i_t * BT
    k += (t0 * H + i_h) * K
    v += (t0 * H + i_h) * V
    T_inv += (t0 * H + i_h) * BT
    if VALUES:
        k_tilde += (t0 * H + i_h) * K
        u_tilde += (t0 * H + i_h) * V
    if KEYS_T:
        # this head's [K, BT] block of the chunk's row in the transposed keys
        k_tilde_t += (i_tg * H + i_h) * K * BT
    o_i = tl.arange(0, BT)
    m_t = o_i < T - i_t * BT

    # [BT] β of the chunk (η with KACZMARZ), 0 on padding
    if USE_BETA:
        b_beta = tl.load(beta + t0 * H + i_h + o_i * H, mask=m_t, other=0).to(tl.float32)
    else:
        b_beta = m_t.to(tl.float32)
    if KACZMARZ:
        # [BT] β = η r, r = 1 / (‖k‖² + ε) as the forward stored it
        b_beta *= tl.load(inv_sq_norm + t0 * H + i_h + o_i * H, mask=m_t, other=0)
    # [BT, BT] rows of the inverse (a real row is 0 past the chunk's end: T is lower triangular)
    b_T = tl.load(T_inv + o_i[:, None] * (H * BT) + o_i[None, :], mask=m_t[:, None], other=0)

    if VALUES:
        apply_inverse(b_T, v, u_tilde, None, b_beta, o_i, m_t, H, V, BT, BV, True, False, PRECISION)  # Ũ = T β V

    if USE_G:
        # [BT] β Γ, with G = 0 on padding (where β = 0)
        b_scale = b_beta * tl.exp(tl.load(G + t0 * H + i_h + o_i * H, mask=m_t, other=0))
    else:
        b_scale = b_beta
    # K̃ = T β Γ K, as rows and/or chunk by chunk transposed
    apply_inverse(b_T, k, k_tilde, k_tilde_t, b_scale, o_i, m_t, H, K, BT, BK, VALUES, KEYS_T, PRECISION)


def wy_apply(
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor | None,
    G: torch.Tensor | None,
    T_inv: torch.Tensor,
    layout: ChunkLayout,
    inv_sq_norm: torch.Tensor | None = None,
    precision: str = "tf32x3",
    values: bool = True,
    keys_t: bool = True,
    store: torch.dtype = torch.float32,
) -> tuple[torch.Tensor | None, ...]:
    """`k: [B, T, H, K]`, `v: [B, T, H, V]`, `beta: [B, T, H]` or None, `G: [B, T, H]` float32 or None and the
    forward's `T: [B, T, H, BT]` (and for KLA its `r = 1 / (‖k‖² + ε): [B, T, H]`, then `β = beta r`). Returns
    `(Ũ, K̃, K̃ᵀ)` in `store`'s dtype: `Ũ: [B, T, H, V]` and `K̃: [B, T, H, K]` as `wy_fwd` gives them (None unless
    `values`), and `K̃` with each chunk's rows transposed, `[B, NT, H, K, BT]` (`transpose.chunk_transpose`'s layout;
    None unless `keys_t`).
    `precision`: of the products with `T` (`precision.backward_precision`)."""
    B, T, H, K = k.shape
    V = v.shape[-1]
    BK = min(64, max(16, next_power_of_2(K)))
    BV = min(64, max(16, next_power_of_2(V)))
    where = {"dtype": store, "device": k.device}
    u_tilde = torch.empty(B, T, H, V, **where) if values else None
    k_tilde = torch.empty(B, T, H, K, **where) if values else None
    k_tilde_t = torch.empty(B, layout.NT, H, K, layout.BT, **where) if keys_t else None
    grid = (layout.NT, B * H)
    wy_apply_kernel[grid](
        k, v, beta, G, T_inv, inv_sq_norm, u_tilde, k_tilde, k_tilde_t, layout.cu_seqlens, layout.chunk_indices, T,
        H=H, K=K, V=V, BT=layout.BT, BK=BK, BV=BV,
        USE_BETA=beta is not None, USE_G=G is not None, KACZMARZ=inv_sq_norm is not None,
        VALUES=values, KEYS_T=keys_t,
        IS_VARLEN=layout.cu_seqlens is not None, PRECISION=precision,
        # two warps for 16-bit keys: 0.55 ms against four's 0.64 at 64K, K = V = 128 (`python -m linattn.bench stages`)
        num_warps=2 if narrow_launch(k.dtype) else 4, num_stages=3,
    )  # fmt: skip
    return u_tilde, k_tilde, k_tilde_t
