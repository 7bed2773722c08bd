"""Scratch (not part of the library): VLA's gate kernel at d = 128 in transposed form, for a screen on the H200.

The library's `gate_apply_kernel` (`linattn/ops/vla/triton.py`) multiplies `[16, d] @ [d, d]`: with 16 rows the
products are `mma.sync` (312 of them a warp a chunk at d = 128, sm_90, Triton 3.6), `A` staged through shared memory
as their right operand (188 KB). The same walk on columns, `Zᵀ = A Uᵀ`, `(A Xᵀ)`, puts `A` on the left with 128
rows: Hopper's `wgmma` (`m64n16k8`), `A` from registers (`scripts/compile_kernels.py`: 64 KB of shared memory, but
1.1 KB of spills a thread at eight warps against 0.4 KB). Per chunk of 16 tokens (`A` symmetric):

    Zᵀ  = A Uᵀ                       [d, 16]
    L⁻¹ of I + U Zᵀ                  [16, 16]
    Wᵀ  = Zᵀ L⁻ᵀ                     [d, 16]
    Yᵀ  = A Xᵀ − Wᵀ tril(X Wᵀ)ᵀ       [d, 16]   (columns A_t x_t)
    A  ← A − Wᵀ W

`MERGE`: `A [Uᵀ | Xᵀ]` as one `[d, 32]` product, the rest on `[32, 32]` tiles with the unused blocks masked
(`m64n32k8`, 80 KB of shared memory, 1.1 KB of spills).

Offline for sm_90 (Triton 3.6, `scripts/compile_kernels.py`), the backward's build (plain rows), d = 128 on eight
warps / d = 64 on four: the library kernel 4,912 / 3,344 SASS instructions, 92 / 92 barriers in its PTX, 418 / 0 B of
spills, 188 / 61 KB of shared memory; this walk 5,648 / 3,728, 18 – 25 barriers, 1,084 / 0 B, 64 / 28 KB; merged
7,304 / 5,616, about 130 barriers, 1,140 / 40 B, 80 / 40 KB. Reading the kept `L⁻¹` (`READ_LI`): the library kernel
3,232 / 1,888 instructions and 10 barriers, this walk 3,528 / 2,000.

`gate_ahead_kernel`: the library's row walk with the next chunk's `Z` a step ahead (its docstring): 7,088 / 4,488
instructions, 98 barriers, 1,834 / 420 B of spills, 152 / 44 KB of shared memory. `gate_halves_kernel`: the walk
on columns with `A` in two column halves (d = 128 on eight warps / d = 64 on four): 5,648 / 3,848 instructions,
30 – 37 barriers, 856 / 0 B of spills, 64 / 32 KB.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.vla.cholesky import inverse_cholesky


@triton.jit
def _inverse_cholesky_steps(b_G, C: tl.constexpr, STEPS: tl.constexpr):
    """`cholesky.inverse_cholesky` on the leading `STEPS × STEPS` block of `b_G` (identity elsewhere)."""
    o_c = tl.arange(0, C)
    b_Li = tl.where(o_c[:, None] == o_c[None, :], 1.0, 0.0)
    b_p = tl.full([C], 1.0, dtype=tl.float32)
    for j in tl.static_range(STEPS):
        b_col = tl.sum(tl.where(o_c[None, :] == j, b_G, 0), 1)
        p = tl.sum(tl.where(o_c == j, b_col, 0))
        b_m = tl.where(o_c > j, b_col / p, 0)
        b_row = tl.sum(tl.where(o_c[:, None] == j, b_Li, 0), 0)
        b_G -= b_m[:, None] * b_col[None, :]
        b_Li -= b_m[:, None] * b_row[None, :]
        b_p = tl.where(o_c == j, p, b_p)
    return b_Li / tl.sqrt(b_p)[:, None]


@triton.jit
def _columns_out(b_zt, b_ax, b_xt, b_Li, Y, N, o_dt, m_dt, T, t0, i_b, i_h, H: tl.constexpr, C: tl.constexpr,
                 UNIT: tl.constexpr, EPS_: tl.constexpr):  # fmt: skip
    """One chunk of the walk on columns after `Zᵀ`, `A Xᵀ` and `L⁻¹`: `Yᵀ` (normalised with `UNIT`) into `Y`;
    returns `Wᵀ` `[BD, C]` for the downdate."""
    o_c = tl.arange(0, C)
    # [BD, C] @ [C, C] -> [BD, C]
    b_wt = tl.dot(b_zt, tl.trans(b_Li), input_precision="tf32x3")
    # [C, C]: (W Xᵀ)[s, t] = w_sᵀ x_t, kept on s ≤ t
    b_wx = tl.dot(tl.trans(b_wt), b_xt, input_precision="tf32x3")
    b_wx = tl.where(o_c[:, None] <= o_c[None, :], b_wx, 0)
    b_yt = b_ax - tl.dot(b_wt, b_wx, input_precision="tf32x3")
    if UNIT:
        b_n = tl.sqrt(tl.sum(b_yt * b_yt, axis=0))
        b_yt = b_yt / tl.maximum(b_n, EPS_)[None, :]
        tl.store(N + (i_b.to(tl.int64) * T + t0 + o_c) * H + i_h, b_n, mask=(t0 + o_c) < T)
    tl.store(Y + o_dt, b_yt, mask=m_dt)
    return b_wt


@triton.jit
def _walk(X, U, Y, N, LI, T, b_A, i_g, i_b, i_h, i_bh, H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
          C: tl.constexpr, R: tl.constexpr, UNIT: tl.constexpr, EPS_: tl.constexpr, READ_LI: tl.constexpr):  # fmt: skip
    o_c = tl.arange(0, C)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    eye = tl.where(o_c[:, None] == o_c[None, :], 1.0, 0.0)
    for j in range(R):
        t0 = (i_g * R + j) * C
        m_dt = m_d[:, None] & ((t0 + o_c) < T)[None, :]
        o_dt = ((i_b.to(tl.int64) * T + t0 + o_c[None, :]) * H + i_h) * D + o_d[:, None]
        # [BD, C] columns u_t, x_t
        b_ut = tl.load(U + o_dt, mask=m_dt, other=0).to(tl.float32)
        b_xt = tl.load(X + o_dt, mask=m_dt, other=0)
        # [BD, BD] @ [BD, C] -> [BD, C]
        b_zt = tl.dot(b_A, b_ut, input_precision="tf32x3")
        b_ax = tl.dot(b_A, b_xt, input_precision="tf32x3")
        # [C, C] L⁻¹, or as the library kernel kept it (`triton_apply`'s `factors`)
        if READ_LI:
            o_li = ((i_bh.to(tl.int64) * tl.num_programs(0) + i_g) * R + j) * C * C + o_c[:, None] * C + o_c[None, :]
            b_Li = tl.load(LI + o_li)
        else:
            b_Li = inverse_cholesky(tl.dot(tl.trans(b_ut), b_zt, input_precision="tf32x3") + eye, C)
        b_wt = _columns_out(b_zt, b_ax, b_xt, b_Li, Y, N, o_dt, m_dt, T, t0, i_b, i_h, H, C, UNIT, EPS_)
        # [BD, C] @ [C, BD] -> [BD, BD]
        b_A -= tl.dot(b_wt, tl.trans(b_wt), input_precision="tf32x3")


@triton.jit
def _merged_walk(X, U, Y, N, T, b_A, i_g, i_b, i_h, H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                 C: tl.constexpr, R: tl.constexpr, UNIT: tl.constexpr, EPS_: tl.constexpr):  # fmt: skip
    C2: tl.constexpr = 2 * C
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    o_e = tl.arange(0, C2)  # columns e < C: u_t, e ≥ C: x_t (t = e mod C)
    o_t = o_e % C
    first = o_e < C
    eye = tl.where(o_e[:, None] == o_e[None, :], 1.0, 0.0)
    lead = (o_e[:, None] < C) & (o_e[None, :] < C)
    sel = tl.where((o_e[:, None] >= C) & (o_e[:, None] == o_e[None, :]), 1.0, 0.0)
    for j in range(R):
        t0 = (i_g * R + j) * C
        m_t = (t0 + o_t) < T
        o_dt = ((i_b.to(tl.int64) * T + t0 + o_t[None, :]) * H + i_h) * D + o_d[:, None]
        m_dt = m_d[:, None] & m_t[None, :]
        # [BD, 2C]: [Uᵀ | Xᵀ], then [Zᵀ | A Xᵀ]
        b_v = tl.load(U + o_dt, mask=m_dt & first[None, :], other=0).to(tl.float32)
        b_v += tl.load(X + o_dt, mask=m_dt & ~first[None, :], other=0)
        b_p = tl.dot(b_A, b_v, input_precision="tf32x3")
        # [2C, 2C]: [[U Zᵀ, ·], [X Zᵀ, ·]]; L⁻¹ of I + U Zᵀ in the leading block, L⁻ᵀ there too
        b_S = tl.dot(tl.trans(b_v), b_p, input_precision="tf32x3")
        b_Lt = tl.where(lead, tl.trans(_inverse_cholesky_steps(tl.where(lead, b_S + eye, eye), C2, C)), 0)
        # X Wᵀ = X Zᵀ L⁻ᵀ in block (1, 0), moved to block (0, 1) transposed and kept on s ≤ t
        b_Q = tl.trans(tl.dot(b_S, b_Lt, input_precision="tf32x3"))
        b_F = tl.where((o_e[:, None] < C) & (o_e[None, :] >= C) & (o_e[:, None] <= o_e[None, :] - C), b_Q, 0)
        # [BD, 2C]: [Wᵀ | Yᵀ]
        b_r = tl.dot(b_p, b_Lt + sel - tl.dot(b_Lt, b_F, input_precision="tf32x3"), input_precision="tf32x3")
        if UNIT:
            b_n = tl.sqrt(tl.sum(b_r * b_r, axis=0))
            b_r = tl.where(first[None, :], b_r, b_r / tl.maximum(b_n, EPS_)[None, :])
            tl.store(N + (i_b.to(tl.int64) * T + t0 + o_t) * H + i_h, b_n, mask=m_t & ~first)
        tl.store(Y + o_dt, b_r, mask=m_dt & ~first[None, :])
        b_wt = tl.where(first[None, :], b_r, 0)
        b_A -= tl.dot(b_wt, tl.trans(b_wt), input_precision="tf32x3")


@triton.jit(do_not_specialize=["T", "SG"])
def gate_columns_kernel(X, U, A0, Y, N, LI, T, SG, H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr,
                        C: tl.constexpr, R: tl.constexpr, UNIT: tl.constexpr, EPS_: tl.constexpr, MERGE: tl.constexpr,
                        READ_LI: tl.constexpr):  # fmt: skip
    """`gate_apply_kernel`'s contract (one program per (group, batch · head)), the walk on columns; `READ_LI` (not
    with `MERGE`): every chunk's `L⁻¹` read from `LI` as the library kernel keeps it."""
    i_g, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    o_A = (i_bh.to(tl.int64) * SG + i_g) * D * D + o_d[:, None] * D + o_d[None, :]
    b_A = tl.load(A0 + o_A, mask=m_d[:, None] & m_d[None, :], other=0)
    if MERGE:
        _merged_walk(X, U, Y, N, T, b_A, i_g, i_b, i_h, H, D, BD, C, R, UNIT, EPS_)
    else:
        _walk(X, U, Y, N, LI, T, b_A, i_g, i_b, i_h, i_bh, H, D, BD, C, R, UNIT, EPS_, READ_LI)


def _launch(kernel, X, U, A_starts, grouping, unit, warps, *pointers, min_block=16, **constexprs):
    """`triton.triton_apply`'s contract on one of these kernels (`unit` inside the kernel at every head dim):
    `(rows, norms or None)`; `pointers` go between `N` and `T` in the kernel's arguments."""
    B, T, H, D = X.shape
    Y = torch.empty_like(X)
    norms = torch.empty(X.shape[:-1], dtype=torch.float32, device=X.device) if unit else None
    A_starts = A_starts.contiguous()
    SG = A_starts.shape[2]
    BD = max(min_block, triton.next_power_of_2(D))
    kernel[(SG, B * H)](
        X, U, A_starts, Y, norms, *pointers, T, SG, H=H, D=D, BD=BD, C=grouping.C, R=grouping.R, UNIT=unit,
        EPS_=1e-12, num_warps=warps, **constexprs,
    )  # fmt: skip
    return Y, norms


def columns_apply(X, U, A_starts, grouping, unit=False, *, merge=False, warps=8, factors=None):
    """`gate_columns_kernel` (reads `factors` as the library kernel keeps them, keeps none itself)."""
    return _launch(gate_columns_kernel, X, U, A_starts, grouping, unit, warps, factors, MERGE=merge,
                   READ_LI=factors is not None)  # fmt: skip


@triton.jit(do_not_specialize=["T", "SG"])
def gate_ahead_kernel(X, U, A0, Y, N, T, SG, H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, C: tl.constexpr,
                      R: tl.constexpr, UNIT: tl.constexpr, EPS_: tl.constexpr):  # fmt: skip
    """The library kernel's row walk with the next chunk's `Z` formed a step ahead: chunk `j`'s large products
    `X_j A_j` and `U_{j+1} A_j` do not wait for its elimination, which needs only `Z_j` (formed in step `j − 1` as
    `U_j A_{j−1} − (U_j W_{j−1}ᵀ) W_{j−1}`), so the compiler may overlap the tensor cores' work with the
    elimination's reductions."""
    i_g, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    o_c = tl.arange(0, C)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    eye = tl.where(o_c[:, None] == o_c[None, :], 1.0, 0.0)
    o_A = (i_bh.to(tl.int64) * SG + i_g) * D * D + o_d[:, None] * D + o_d[None, :]
    b_A = tl.load(A0 + o_A, mask=m_d[:, None] & m_d[None, :], other=0)
    t0 = i_g * R * C
    m_td = ((t0 + o_c) < T)[:, None] & m_d[None, :]
    o_td = ((i_b.to(tl.int64) * T + t0 + o_c[:, None]) * H + i_h) * D + o_d[None, :]
    # [C, BD] the first chunk's U and Z = U A
    b_u = tl.load(U + o_td, mask=m_td, other=0).to(tl.float32)
    b_z = tl.dot(b_u, b_A, input_precision="tf32x3")
    for j in range(R):
        t0 = (i_g * R + j) * C
        m_td = ((t0 + o_c) < T)[:, None] & m_d[None, :]
        o_td = ((i_b.to(tl.int64) * T + t0 + o_c[:, None]) * H + i_h) * D + o_d[None, :]
        # [C, BD] this chunk's X, the next chunk's U (0 past the group or the sequence: identity steps)
        m_next = (((t0 + C + o_c) < T) & (j + 1 < R))[:, None] & m_d[None, :]
        b_x = tl.load(X + o_td, mask=m_td, other=0)
        b_un = tl.load(U + o_td + C * H * D, mask=m_next, other=0).to(tl.float32)
        # the large products, independent of this chunk's elimination
        b_xa = tl.dot(b_x, b_A, input_precision="tf32x3")
        b_za = tl.dot(b_un, b_A, input_precision="tf32x3")
        # [C, C] L⁻¹ of I + U Zᵀ, then W = L⁻¹ Z
        b_Li = inverse_cholesky(tl.dot(b_u, tl.trans(b_z), input_precision="tf32x3") + eye, C)
        b_w = tl.dot(b_Li, b_z, input_precision="tf32x3")
        b_xw = tl.where(o_c[:, None] >= o_c[None, :], tl.dot(b_x, tl.trans(b_w), input_precision="tf32x3"), 0)
        b_y = b_xa - tl.dot(b_xw, b_w, input_precision="tf32x3")
        if UNIT:
            b_n = tl.sqrt(tl.sum(b_y * b_y, axis=1))
            b_y = b_y / tl.maximum(b_n, EPS_)[:, None]
            tl.store(N + (i_b.to(tl.int64) * T + t0 + o_c) * H + i_h, b_n, mask=(t0 + o_c) < T)
        tl.store(Y + o_td, b_y, mask=m_td)
        # the next chunk's Z = U' A_{j+1} = U' A_j − (U' Wᵀ) W, every token of this chunk before it
        b_z = b_za - tl.dot(tl.dot(b_un, tl.trans(b_w), input_precision="tf32x3"), b_w, input_precision="tf32x3")
        b_u = b_un
        b_A -= tl.dot(tl.trans(b_w), b_w, input_precision="tf32x3")


def ahead_apply(X, U, A_starts, grouping, unit=False, *, warps=8):
    """`gate_ahead_kernel`."""
    return _launch(gate_ahead_kernel, X, U, A_starts, grouping, unit, warps)


@triton.jit
def _halves(b_x, BD: tl.constexpr, C: tl.constexpr):
    """`[BD, C]` -> its first and last `BD / 2` rows."""
    return tl.split(tl.permute(tl.reshape(b_x, (2, BD // 2, C)), (1, 2, 0)))


@triton.jit(do_not_specialize=["T", "SG"])
def gate_halves_kernel(X, U, A0, Y, N, T, SG, H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, C: tl.constexpr,
                       R: tl.constexpr, UNIT: tl.constexpr, EPS_: tl.constexpr):  # fmt: skip
    """The walk on columns with `A` held as its two column halves `A_L = A[:, :BD/2]`, `A_R = A[:, BD/2:]`, so that a
    product's split operand (`tf32x3`) is half of `A`: `A Uᵀ = A_L Uᵀ_top + A_R Uᵀ_bot`, `A_L ← A_L − Wᵀ W_top`."""
    HB: tl.constexpr = BD // 2
    i_g, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    o_c = tl.arange(0, C)
    o_d = tl.arange(0, BD)
    o_h = tl.arange(0, HB)
    m_d = o_d < D
    m_lo, m_hi = o_h < D, (HB + o_h) < D
    eye = tl.where(o_c[:, None] == o_c[None, :], 1.0, 0.0)
    o_A = (i_bh.to(tl.int64) * SG + i_g) * D * D + o_d[:, None] * D
    b_AL = tl.load(A0 + o_A + o_h[None, :], mask=m_d[:, None] & m_lo[None, :], other=0)
    b_AR = tl.load(A0 + o_A + HB + o_h[None, :], mask=m_d[:, None] & m_hi[None, :], other=0)
    for j in range(R):
        t0 = (i_g * R + j) * C
        m_t = (t0 + o_c) < T
        o_t = ((i_b.to(tl.int64) * T + t0 + o_c[None, :]) * H + i_h) * D
        m_dt = m_d[:, None] & m_t[None, :]
        # [BD, C] columns u_t, x_t, and their halves [HB, C]
        b_ut = tl.load(U + o_t + o_d[:, None], mask=m_dt, other=0).to(tl.float32)
        b_u0 = tl.load(U + o_t + o_h[:, None], mask=m_lo[:, None] & m_t[None, :], other=0).to(tl.float32)
        b_u1 = tl.load(U + o_t + HB + o_h[:, None], mask=m_hi[:, None] & m_t[None, :], other=0).to(tl.float32)
        b_xt = tl.load(X + o_t + o_d[:, None], mask=m_dt, other=0)
        b_x0 = tl.load(X + o_t + o_h[:, None], mask=m_lo[:, None] & m_t[None, :], other=0)
        b_x1 = tl.load(X + o_t + HB + o_h[:, None], mask=m_hi[:, None] & m_t[None, :], other=0)
        b_zt = tl.dot(b_AL, b_u0, input_precision="tf32x3") + tl.dot(b_AR, b_u1, input_precision="tf32x3")
        b_ax = tl.dot(b_AL, b_x0, input_precision="tf32x3") + tl.dot(b_AR, b_x1, input_precision="tf32x3")
        b_Li = inverse_cholesky(tl.dot(tl.trans(b_ut), b_zt, input_precision="tf32x3") + eye, C)
        b_wt = _columns_out(b_zt, b_ax, b_xt, b_Li, Y, N, o_t + o_d[:, None], m_dt, T, t0, i_b, i_h, H, C, UNIT, EPS_)
        # [BD, C] @ [C, HB] -> [BD, HB], twice
        b_w0, b_w1 = _halves(b_wt, BD, C)
        b_AL -= tl.dot(b_wt, tl.trans(b_w0), input_precision="tf32x3")
        b_AR -= tl.dot(b_wt, tl.trans(b_w1), input_precision="tf32x3")


def halves_apply(X, U, A_starts, grouping, unit=False, *, warps=8):
    """`gate_halves_kernel` (blocks of at least 32 rows: two halves of 16)."""
    return _launch(gate_halves_kernel, X, U, A_starts, grouping, unit, warps, min_block=32)
