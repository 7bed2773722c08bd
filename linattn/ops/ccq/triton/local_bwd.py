"""The backward's per-chunk kernels: the contraction's row scalars, then `dq, dk, dg` with the state gradients fixed.

Forward per token (`output.py`): `a = C_tᵀ q`, `b = m_t`, `z = Z_t`, `r = bᵀq`, `ρ = r/z` (0 if not centred),
`u = a − ρ b`, `q' = q − (λ/z) u`. Backward from `dy = ∂L/∂q'`, with `s = −λ/z`:

    da = s dy                              (the read's output gradient, `E = diag(s) dY`)
    dλ = −(dyᵀu) / z
    dr = −(bᵀ da) / z  (centred; else 0)
    db = dr q − ρ da
    dz = −(daᵀu + dr r) / z
    dq = dy + dr b + (the read's dq)

`rows_bwd` (one program per chunk) rebuilds `A`, `r`, `z`, `W = A − diag(ρ) D̃` as the forward did, with
`F = dY Kᵀ` and `dY m_0`:

    bᵀdy = Γ (dyᵀ m_0) + rowsum(D̃ ⊙ F)
    uᵀdy = Γ (rowsum(Q C_0 ⊙ dY) − ρ dyᵀ m_0) + rowsum(W ⊙ F)

and stores, per row, `s, ρ, dr, dz`, plus `dλ`. `rows_kept` stores the same from the forward's `u`, `b`, `z`, `ρ` (a
training call that keeps its forward, `function.keeps_states`): `uᵀdy` and `bᵀdy` are then row sums, token by token,
with no chunk's tiles at all. `state.state_bwd` then scans the state gradients back; `local_bwd` (one program per
chunk, with the chunk's start state `(C_0, m_0, Z_0)` and end-state gradient `(dC⁺, dm⁺, dZ⁺)`) finishes, with
`P' = diag(s) (D̃ ⊙ F) + diag(dr) D̃` and `Γ_C/Γ` the decay to the chunk's end:

    dq = dy + Γ (s dY C_0ᵀ + dr m_0ᵀ) + P' K
    dk = P'ᵀ Q + Wᵀ E + diag(Γ_C/Γ) (K (dC⁺ + dC⁺ᵀ) + dm⁺ᵀ)

(`k` is both the read's key and its value, and the mean's value: `P'` gathers what multiplies `K` from the left,
`W` what multiplies it from the right). Log-decays: `D_ts` carries
`M_ts = s_t A_ts F_ts + dr_t A_ts − ρ_t s_t D̃_ts F_ts + dz_t D̃_ts`, which goes to row `t` and from column `s`;
the hand-over `x_s = Γ_C/Γ_s (k_sᵀ dC⁺ k_s + k_sᵀ dm⁺ + dZ⁺)` goes from row `s` to the last row, which also takes
`Γ_C (⟨C_0, dC⁺⟩ + m_0ᵀ dm⁺ + Z_0 dZ⁺)`; the terms of `G_t` through `Γ_t` are `dG_Γ = Γ (s rowsum(Q C_0 ⊙ dY) +
m_0ᵀdb + Z_0 dz)`, with `rowsum(Q C_0 ⊙ dY) = rowsum(Q ⊙ dY C_0ᵀ)` from `dq`'s own product. So
`dG = dG_Γ + rowsum(M) − colsum(M) − x + e_last (Σx + …)`, and
`dg` is its reverse cumsum inside the chunk.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.ccq.triton.output import block_size, chunk_scores, read_state
from linattn.ops.ccq.triton.state import chunk_decay
from linattn.ops.utils.grid import cdiv, next_power_of_2
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import ChunkLayout
from linattn.ops.utils.precision import raw_operands

ROWS = 4  # planes of the row scalars: s, ρ, dr, dz
# warps of both kernels: at 64K tokens, bf16, rows_bwd / local_bwd take 2.84 / 6.39 ms at K = 128 with 8 warps,
# 1.82 / 3.75 with 4, 1.68 / 4.92 with 2; at K = 32 0.98 / 1.37, 0.58 / 0.69, 0.67 / 0.80
# (`python -m linattn.bench profile --contenders CCQ-GDN --K 32,128`, with this constant changed)
LAUNCH_WARPS = 4


@triton.jit
def store_rows(rows, dlam, o_r, m_r, R, b_s, b_rho, b_z, b_r, b_udy, b_bdy, CENTERED: tl.constexpr):
    """The chain rule's row scalars from `s = −λ/z`, `ρ`, `z`, `r` and `uᵀdy`, `bᵀdy` of the rows `o_r`: stores
    `s, ρ, dr, dz` into the planes of `rows` (`R` floats apart) and `dλ`."""
    if CENTERED:
        b_dr = -b_s * b_bdy / b_z
    else:
        b_dr = tl.zeros_like(b_s)
    b_dz = -(b_s * b_udy + b_dr * b_r) / b_z
    tl.store(dlam + o_r, (-b_udy / b_z).to(dlam.dtype.element_ty), mask=m_r)
    tl.store(rows + o_r, b_s, mask=m_r)
    tl.store(rows + R + o_r, b_rho, mask=m_r)
    tl.store(rows + 2 * R + o_r, b_dr, mask=m_r)
    tl.store(rows + 3 * R + o_r, b_dz, mask=m_r)


@triton.jit(do_not_specialize=["T", "R"])
def ccq_rows_bwd_kernel(
    q,
    k,
    lam,
    g,
    hC,
    hm,
    hZ,
    do,
    rows,
    dlam,
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
):
    """One program per (chunk, batch row · head); `rows` in planes of `R = B·T·H` floats."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)

    t0 = bos + i_t * BT
    q += (t0 * H + i_h) * K
    k += (t0 * H + i_h) * K
    do += (t0 * H + i_h) * K
    i_row = i_tg * H + i_h
    hC += i_row * K * K
    hm += i_row * K
    o_i = tl.arange(0, BT)
    m_t = o_i < T - i_t * BT
    last = tl.minimum(BT, T - i_t * BT) - 1
    o_r = t0 * H + i_h + o_i * H

    b_gamma, _, b_D, _ = chunk_decay(g, t0, i_h, o_i, m_t, last, H, BT, USE_G)
    # [BT, BT] Q Kᵀ and dY Kᵀ, [BT] Q m_0 and dY m_0
    b_S, b_qm = chunk_scores(q, k, hm, o_i, m_t, K, H, BT, BK, RAW)
    b_F, b_dym = chunk_scores(do, k, hm, o_i, m_t, K, H, BT, BK, RAW)
    b_A = b_S * b_D
    b_Z0 = tl.load(hZ + i_row)
    # [BT] z (1 on padding rows), r, ρ = r / z, s = −λ / z
    b_z = tl.where(m_t, b_gamma * b_Z0 + tl.sum(b_D, axis=1), 1.0)
    b_r = b_gamma * b_qm + tl.sum(b_A, axis=1)
    if CENTERED:
        b_rho = b_r / b_z
    else:
        b_rho = tl.zeros([BT], dtype=tl.float32)
    b_s = -tl.load(lam + o_r, mask=m_t, other=0).to(tl.float32) / b_z
    # [BT] the score parts of uᵀdy (W = A − diag(ρ) D̃) and bᵀdy: every [BT, BT] tile is dead after these
    b_udy = tl.sum((b_A - b_rho[:, None] * b_D) * b_F, axis=1) - b_gamma * b_rho * b_dym
    b_bdy = b_gamma * b_dym + tl.sum(b_D * b_F, axis=1)

    # [BT] rowsum(Q C_0 ⊙ dY), over column blocks
    b_qcd = tl.zeros([BT], dtype=tl.float32)
    for i_v in range(tl.cdiv(K, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_v = o_v < K
        # [BT, BV]
        b_qc = read_state(q, hC, o_i, m_t, o_v, m_v, K, H, BT, BK, BV, PRECISION)
        b_do = tl.load(do + o_i[:, None] * (H * K) + o_v[None, :], mask=m_t[:, None] & m_v[None, :], other=0)
        b_qcd += tl.sum(b_qc * b_do.to(tl.float32), axis=1)

    b_udy += b_gamma * b_qcd
    store_rows(rows, dlam, o_r, m_t, R, b_s, b_rho, b_z, b_r, b_udy, b_bdy, CENTERED)


@triton.jit(do_not_specialize=["R"])
def ccq_rows_kept_kernel(lam, ku, kb, kzr, do, rows, dlam, R, K: tl.constexpr, BR: tl.constexpr, BK: tl.constexpr,
                         CENTERED: tl.constexpr):  # fmt: skip
    """One program per `BR` of the `R = B·T·H` token rows: `ccq_rows_bwd_kernel`'s stores from the kept `u, b`
    (`ku, kb`, `[R, K]`) and `z, ρ` (`kzr`, planes of `R` floats, as `rows`)."""
    # int64: `o_r · K` passes 2³¹ from 2²⁵ token rows at K = 64 (2M tokens of 16 heads)
    o_r = tl.program_id(0).to(tl.int64) * BR + tl.arange(0, BR)
    m_r = o_r < R
    # [BR] uᵀdy and bᵀdy, over key blocks
    b_udy = tl.zeros([BR], dtype=tl.float32)
    b_bdy = tl.zeros([BR], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        o_rk = o_r[:, None] * K + o_k[None, :]
        m_rk = m_r[:, None] & (o_k < K)[None, :]
        # [BR, BK] each
        b_do = tl.load(do + o_rk, mask=m_rk, other=0).to(tl.float32)
        b_udy += tl.sum(tl.load(ku + o_rk, mask=m_rk, other=0) * b_do, axis=1)
        b_bdy += tl.sum(tl.load(kb + o_rk, mask=m_rk, other=0) * b_do, axis=1)
    # [BR] z (1 past the end), ρ, s = −λ / z
    b_z = tl.load(kzr + o_r, mask=m_r, other=1.0)
    b_rho = tl.load(kzr + R + o_r, mask=m_r, other=0)
    b_s = -tl.load(lam + o_r, mask=m_r, other=0).to(tl.float32) / b_z
    # r = ρ z where it counts (centred; else dr = 0)
    store_rows(rows, dlam, o_r, m_r, R, b_s, b_rho, b_z, b_rho * b_z, b_udy, b_bdy, CENTERED)


@triton.jit(do_not_specialize=["T", "R"])
def ccq_local_bwd_kernel(
    q,
    k,
    g,
    hC,
    hm,
    hZ,
    dhC,
    dhm,
    dhZ,
    do,
    rows,
    dq,
    dk,
    dg,
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
    IS_VARLEN: tl.constexpr,
    RAW: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One program per (chunk, batch row · head): the `[BT, BT]` score terms, then `dq, dk` column block by column
    block (each with a pass over key blocks for `dY C_0ᵀ` and `K (dC⁺ + dC⁺ᵀ)`), then `dg`."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)

    t0 = bos + i_t * BT
    o_tk0 = (t0 * H + i_h) * K
    i_row = i_tg * H + i_h
    hC += i_row * K * K
    hm += i_row * K
    dhC += i_row * K * K
    dhm += i_row * K
    o_i = tl.arange(0, BT)
    m_t = o_i < T - i_t * BT
    last = tl.minimum(BT, T - i_t * BT) - 1
    o_r = t0 * H + i_h + o_i * H

    b_gamma, b_to_end, b_D, b_G_last = chunk_decay(g, t0, i_h, o_i, m_t, last, H, BT, USE_G)
    b_gamma_last = tl.exp(b_G_last)
    # [BT] row scalars of rows_bwd (0 on padding)
    b_s = tl.load(rows + o_r, mask=m_t, other=0)
    b_rho = tl.load(rows + R + o_r, mask=m_t, other=0)
    b_dr = tl.load(rows + 2 * R + o_r, mask=m_t, other=0)
    b_dz = tl.load(rows + 3 * R + o_r, mask=m_t, other=0)
    # [BT, BT] Q Kᵀ and dY Kᵀ, [BT] Q m_0 and dY m_0
    b_S, b_qm = chunk_scores(q + o_tk0, k + o_tk0, hm, o_i, m_t, K, H, BT, BK, RAW)
    b_F, b_dym = chunk_scores(do + o_tk0, k + o_tk0, hm, o_i, m_t, K, H, BT, BK, RAW)
    b_A = b_S * b_D
    b_P = b_s[:, None] * b_F * b_D
    if USE_G:
        # [BT] the score terms of dG: M to its rows, from its columns; m_0ᵀ db = dr (Q m_0) − ρ s (dY m_0)
        b_M = b_s[:, None] * b_A * b_F + b_dr[:, None] * b_A - b_rho[:, None] * b_P + b_dz[:, None] * b_D
        b_dG = tl.sum(b_M, axis=1) - tl.sum(b_M, axis=0)
        b_Z0 = tl.load(hZ + i_row)
        b_dG += b_gamma * (b_dr * b_qm - b_rho * b_s * b_dym + b_Z0 * b_dz)
    # [BT, BT] P' = diag(s) (D̃ ⊙ F) + diag(dr) D̃, W = A − diag(ρ) D̃: the only tiles the column loop needs
    b_P1 = b_P + b_dr[:, None] * b_D
    b_W = b_A - b_rho[:, None] * b_D

    # [BT] the hand-over term x and rowsum(Q ⊙ dY C_0ᵀ); [BV] partial sums of ⟨C_0, dC⁺⟩ + m_0ᵀ dm⁺
    b_x = tl.zeros([BT], dtype=tl.float32)
    b_qcd = tl.zeros([BT], dtype=tl.float32)
    b_h = tl.zeros([BV], dtype=tl.float32)
    for i_v in range(tl.cdiv(K, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_v = o_v < K
        m_tv = m_t[:, None] & m_v[None, :]
        o_tv = o_tk0 + o_i[:, None] * (H * K) + o_v[None, :]
        # [BT, BV] each; [BV] each
        b_qv = tl.load(q + o_tv, mask=m_tv, other=0).to(tl.float32)
        b_kv = tl.load(k + o_tv, mask=m_tv, other=0).to(tl.float32)
        b_dov = tl.load(do + o_tv, mask=m_tv, other=0).to(tl.float32)
        b_m0 = tl.load(hm + o_v, mask=m_v, other=0)
        b_dm = tl.load(dhm + o_v, mask=m_v, other=0)
        # dY C_0ᵀ and K (dC⁺ + dC⁺ᵀ) on this column block, over key blocks
        b_dc = tl.zeros([BT, BV], dtype=tl.float32)
        b_kd = tl.zeros([BT, BV], dtype=tl.float32)
        for i_k in range(tl.cdiv(K, BK)):
            o_k = i_k * BK + tl.arange(0, BK)
            m_k = o_k < K
            m_tk = m_t[:, None] & m_k[None, :]
            m_kv = m_k[:, None] & m_v[None, :]
            o_tk = o_tk0 + o_i[:, None] * (H * K) + o_k[None, :]
            # [BT, BK] each
            b_dok = tl.load(do + o_tk, mask=m_tk, other=0).to(tl.float32)
            b_kk = tl.load(k + o_tk, mask=m_tk, other=0).to(tl.float32)
            # [BK, BV] tiles of C_0ᵀ, dC⁺ and dC⁺ᵀ (rows: this key block, columns: this column block)
            b_C0t = tl.load(hC + o_v[None, :] * K + o_k[:, None], mask=m_kv, other=0).to(tl.float32)
            b_dC = tl.load(dhC + o_k[:, None] * K + o_v[None, :], mask=m_kv, other=0).to(tl.float32)
            b_dCt = tl.load(dhC + o_v[None, :] * K + o_k[:, None], mask=m_kv, other=0).to(tl.float32)
            # [BT, BK] @ [BK, BV] -> [BT, BV], twice
            b_dc += tl.dot(b_dok, b_C0t, input_precision=PRECISION)
            b_kd += tl.dot(b_kk, b_dC + b_dCt, input_precision=PRECISION)
            b_h += tl.sum(b_C0t * b_dCt, axis=0)
        b_h += b_m0 * b_dm
        # [BT, BT] @ [BT, BV] -> [BT, BV]
        b_qcd += tl.sum(b_qv * b_dc, axis=1)
        b_dq = b_dov + b_gamma[:, None] * (b_s[:, None] * b_dc + b_dr[:, None] * b_m0[None, :])
        b_dq += tl.dot(b_P1, b_kv, input_precision=PRECISION)
        # [BT, BT]ᵀ @ [BT, BV] -> [BT, BV], twice
        b_dk = tl.dot(tl.trans(b_P1), b_qv, input_precision=PRECISION)
        b_dk += tl.dot(tl.trans(b_W), b_s[:, None] * b_dov, input_precision=PRECISION)
        # kᵀ(dC⁺ + dC⁺ᵀ)k = 2 kᵀ dC⁺ k
        b_x += b_to_end * tl.sum(b_kv * (0.5 * b_kd + b_dm[None, :]), axis=1)
        b_dk += b_to_end[:, None] * (b_kd + b_dm[None, :])
        tl.store(dq + o_tv, b_dq.to(dq.dtype.element_ty), mask=m_tv)
        tl.store(dk + o_tv, b_dk.to(dk.dtype.element_ty), mask=m_tv)

    if USE_G:
        b_dZ = tl.load(dhZ + i_row)
        b_x += b_to_end * b_dZ
        b_dG += b_gamma * b_s * b_qcd - b_x
        b_last = b_gamma_last * (tl.sum(b_h) + b_Z0 * b_dZ) + tl.sum(b_x)
        b_dG += tl.where(o_i == last, b_last, 0.0)
        # padding rows are 0, so the reverse scan over the whole tile starts at the last real token
        tl.store(dg + o_r, tl.cumsum(b_dG, axis=0, reverse=True).to(dg.dtype.element_ty), mask=m_t)


def rows_bwd(
    q: torch.Tensor,
    k: torch.Tensor,
    lam: torch.Tensor,
    g: torch.Tensor | None,
    h: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    do: torch.Tensor,
    centered: bool,
    layout: ChunkLayout,
    precision: str = "tf32x3",
) -> tuple[torch.Tensor, torch.Tensor]:
    """`q, k, do: [B, T, H, K]`, `lam: [B, T, H]`, `g: [B, T, H]` or None, chunk-start states `h = (C, m, Z)`.
    Returns float32 `rows: [4, B, T, H]` (`s, ρ, dr, dz`) and `dλ: [B, T, H]` in lam's dtype. `precision`: of
    the products with float32 intermediates (`precision.grad_precision`)."""
    B, T, H, K = q.shape
    BK = block_size(K)
    rows = torch.empty(ROWS, B, T, H, dtype=torch.float32, device=q.device)
    dlam = torch.empty_like(lam)
    grid = (layout.NT, B * H)
    ccq_rows_bwd_kernel[grid](
        q, k, lam, g, *h, do, rows, dlam, layout.cu_seqlens, layout.chunk_indices, T, B * T * H,
        H=H, K=K, BT=layout.BT, BK=BK, BV=BK,
        USE_G=g is not None, CENTERED=centered, IS_VARLEN=layout.cu_seqlens is not None,
        RAW=raw_operands(q.device, q.dtype),
        PRECISION=precision, num_warps=LAUNCH_WARPS,
    )  # fmt: skip
    return rows, dlam


def rows_kept(
    lam: torch.Tensor, kept: tuple[torch.Tensor, torch.Tensor, torch.Tensor], do: torch.Tensor, centered: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """`rows_bwd`'s results from the forward's kept read `(u, b, zr)` (`output.output_fwd(..., keep=True)`), token
    by token: `do: [B, T, H, K]`, `lam: [B, T, H]`."""
    B, T, H, K = do.shape
    R = B * T * H
    rows = torch.empty(ROWS, B, T, H, dtype=torch.float32, device=do.device)
    dlam = torch.empty_like(lam)
    BK = min(next_power_of_2(K), 64)
    BR = 4096 // BK  # [BR, BK] tiles of 4,096 entries
    ccq_rows_kept_kernel[(cdiv(R, BR),)](
        lam, *kept, do, rows, dlam, R, K=K, BR=BR, BK=BK, CENTERED=centered, num_warps=4
    )  # fmt: skip
    return rows, dlam


def local_bwd(
    q: torch.Tensor,
    k: torch.Tensor,
    g: torch.Tensor | None,
    h: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    dh: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    do: torch.Tensor,
    rows: torch.Tensor,
    layout: ChunkLayout,
    precision: str = "tf32x3",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """`q, k, do: [B, T, H, K]`, `g: [B, T, H]` or None, chunk-start states `h` (`state_fwd`), end-state gradients
    `dh` (`state_bwd`), `rows` (`rows_bwd`). Returns `dq, dk` in their inputs' dtypes and `dg` in g's (None
    without g). `precision` as `rows_bwd`'s."""
    B, T, H, K = q.shape
    BK = block_size(K)
    dq, dk = torch.empty_like(q), torch.empty_like(k)
    dg = None if g is None else torch.empty_like(g)
    grid = (layout.NT, B * H)
    ccq_local_bwd_kernel[grid](
        q, k, g, *h, *dh, do, rows, dq, dk, dg, layout.cu_seqlens, layout.chunk_indices, T, B * T * H,
        H=H, K=K, BT=layout.BT, BK=BK, BV=BK,
        USE_G=g is not None, IS_VARLEN=layout.cu_seqlens is not None, RAW=raw_operands(q.device, q.dtype),
        PRECISION=precision,
        # the inner loop's five loads pipelined three deep for one-pass launches: a bf16 training call at 64K takes
        # 2.94 ms against one stage's 3.69 at K = 128 (the same at K = 32, one loop step; `python -m linattn.bench
        # profile --contenders CCQ-GDN`), in 94 KB of shared memory and 148 B of spills a thread on Hopper.
        # `tf32x3` launches (114 – 131 KB, 0.4 – 0.6 KB of spills; `scripts/compile_kernels.py`) keep one stage
        num_warps=LAUNCH_WARPS, num_stages=3 if precision == "tf32" else 1,
    )  # fmt: skip
    return dq, dk, dg
