"""Stage 2 of the chunked forward: the WY / UT transform of every chunk, all chunks in parallel.

Per chunk of `BT` tokens, with `G` the chunk-local cumulative log-decay (stage 1), `Γ = exp(G)` and
`D_ts = exp(G_t − G_s)`:

    A  = strict_tril(diag(β) (K Wᵀ ⊙ D))          [BT, BT]
    T  = (I + A)⁻¹                                unit lower triangular
    Ũ  = T diag(β) V                              [BT, V]
    K̃  = T diag(β Γ) K                            [BT, K]

so that the pseudo-values of the chunk are `U = Ũ − K̃ h` for its start state `h` (stage 3). `T` is stored for the
backward; `Ũ` and `K̃` feed stage 3.

KLA (`KACZMARZ`): the step is `β_t = η_t r_t` with `r_t = 1 / (‖k_t‖² + ε)` (`η` the given `beta`, or 1). The kernel
sums `‖k_t‖²` over the key blocks it loads for `K Wᵀ`, so the step costs no pass over `k` of its own, and stores
`r` (`[B, T, H]` float32) for the backward, whose kernels form the same `β = η r`.

The kernel works on the chunk (`BT = 64`) as four row blocks of 16 tokens and keeps only the ten lower `[16, 16]`
blocks of `A` and `T`. Each diagonal block of `T` inverts its block of `I + A` by recursive doubling
(1 → 2 → 4 → 8 → 16: `T_2b = T_b − T_b M T_b`, `M` the entries whose row and column share their `2b` block but not
their `b` block), and the blocks below follow by blockwise forward substitution,
`T_ij = −T_ii Σ_{j ≤ l < i} A_il T_lj`: 16 products of `[16, 16]` blocks instead of twelve `[64, 64]` ones, and small
live tiles (compiled for Hopper at `K = V = 128` by `scripts/compile_kernels.py`, without the launcher's pointer
alignment: 0.3 KB of spills a thread and 22 KB of shared memory, against 3.4 KB and 80 KB for a full-tile doubling).

Numerics: everything is float32 after the loads. The inversion's products are `ieee` (exact float32 multiply-adds;
16³ each), the application's `tf32x3` (three tf32 passes, about 22 bits), and `K Wᵀ` `tf32x3` for float32
inputs but one tf32 pass for bfloat16 / float16 ones, which that pass holds exactly (`precision.py`). Triton's
default on NVIDIA GPUs, one tf32 pass (10-bit mantissa, relative error ~1e-3 per product), would make the chunked
result far less accurate than the float32 recurrence it must match (docs/design.md §4), but for one case: where the
application takes one pass (`PRECISION`: a bfloat16 `o` the forward's only output, `precision.apply_precision`),
the inversion does too (`INVERSE`). `T` then errs by ~2⁻¹¹ relative, as the application's rounding of `T` to tf32
does anyway; that takes a third off the stage at 64K (K = V = 128, `python -m linattn.bench stages`), and `verify`'s
bfloat16 cases keep their errors, those whose backward takes three passes (T = 65) too. The decay exponent is masked to
`s < t` and real rows before `exp`, so the positive differences above the diagonal, and those of padding rows,
never overflow.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.chunking import causal, decay_matrix
from linattn.ops.delta_rule.triton.kaczmarz import kaczmarz_reciprocal
from linattn.ops.delta_rule.triton.precision import narrow_launch
from linattn.ops.utils.grid import next_power_of_2
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import ChunkLayout
from linattn.ops.utils.precision import mma, raw_dot, raw_operands


def wy_ref(
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor,
    beta: torch.Tensor | None,
    G: torch.Tensor | None,
    layout: ChunkLayout,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`(T, Ũ, K̃)` as `wy_fwd` returns them (`[B, T, H, BT]`, `[B, T, H, V]`, `[B, T, H, K]`), in float64.

    `T[b, t, h, :]` is row `t` of the chunk's inverse; columns past a short last chunk are 0.
    """
    BT = layout.BT
    B, T, H = k.shape[:3]
    k, v, w, beta, G = (None if x is None else x.double() for x in (k, v, w, beta, G))
    f64 = {"dtype": torch.float64, "device": k.device}
    T_inv = torch.zeros(B, T, H, BT, **f64)
    u_tilde = torch.zeros_like(v)
    k_tilde = torch.zeros_like(k)
    for _, b, bos, eos, _ in layout.sequences():
        for start in range(bos, eos, BT):
            c = slice(start, min(start + BT, eos))
            L = c.stop - c.start
            k_c, v_c, w_c = (x[b, c].transpose(0, 1) for x in (k, v, w))  # [H, L, K|V]
            beta_c = torch.ones(H, L, 1, **f64) if beta is None else beta[b, c].T[..., None]
            G_c = None if G is None else G[b, c].T  # [H, L]
            D = None if G_c is None else decay_matrix(G_c)
            eye = torch.eye(L, **f64).expand(H, L, L)
            A = causal(beta_c * (k_c @ w_c.transpose(-1, -2)), D, strict=True)
            T_c = torch.linalg.solve_triangular(eye + A, eye, upper=False, unitriangular=True)  # [H, L, L]
            gamma = 1.0 if G_c is None else G_c.exp()[..., None]
            T_inv[b, c, :, :L] = T_c.transpose(0, 1)
            u_tilde[b, c] = (T_c @ (beta_c * v_c)).transpose(0, 1)
            k_tilde[b, c] = (T_c @ (beta_c * gamma * k_c)).transpose(0, 1)
    return T_inv, u_tilde, k_tilde


@triton.jit
def scaled_block(b_a, b_beta_i, b_g_i, b_g_j, m, USE_G: tl.constexpr):
    """One `[16, 16]` block of `A = diag(β) (K Wᵀ ⊙ D)` from its `K Wᵀ` block: `m` keeps the entries `s < t` of real
    rows (masked before `exp`: a padding row has `G = 0`, and its `exp(0 − G_s)` could overflow)."""
    if USE_G:
        b_a *= tl.exp(tl.where(m, b_g_i[:, None] - b_g_j[None, :], float("-inf")))
    return tl.where(m, b_a * b_beta_i[:, None], 0.0)


@triton.jit
def inverse16(b_a, o_r, PRECISION: tl.constexpr):
    """`(I + a)⁻¹` of a strictly lower triangular `[16, 16]` block by recursive doubling of its diagonal blocks
    (1 → 2 → 4 → 8 → 16): if `T_b` inverts the `b×b` diagonal blocks, `T_2b = T_b − T_b M T_b` with `M` the entries
    whose row and column share their `2b` block but not their `b` block (highest differing bit `log2 b`)."""
    o_x = o_r[:, None] ^ o_r[None, :]
    b_t = (o_x == 0).to(tl.float32)
    for level in tl.static_range(4):
        b_m = tl.where((o_x >> level) == 1, b_a, 0.0)
        # [16, 16] @ [16, 16] @ [16, 16]
        b_t -= mma(mma(b_t, b_m, PRECISION), b_t, PRECISION)
    return b_t


@triton.jit
def neg_product(b_t, b_x, PRECISION: tl.constexpr):
    """`−T X` for `[16, 16]` blocks."""
    return -mma(b_t, b_x, PRECISION)


@triton.jit
def load_raw(src, o_r, m_r, o_n, m_n, HN: tl.constexpr):
    """One `[16, BN]` block of rows `o_r` (valid `m_r`) and columns `o_n` (valid `m_n`), rows `HN` apart, as stored."""
    return tl.load(src + o_r[:, None] * HN + o_n[None, :], mask=m_r[:, None] & m_n[None, :], other=0)


@triton.jit
def load_block(src, o_r, m_r, o_n, m_n, HN: tl.constexpr):
    """`load_raw`'s block in float32."""
    return load_raw(src, o_r, m_r, o_n, m_n, HN).to(tl.float32)


@triton.jit
def load_rows(src, o_r, m_r, b_rows, o_n, m_n, HN: tl.constexpr):
    """`diag(rows) X` for one `[16, BN]` block (see `load_block`), `b_rows: [16]`."""
    return load_block(src, o_r, m_r, o_n, m_n, HN) * b_rows[:, None]


@triton.jit
def store_rows(dst, b_y, o_r, m_r, o_n, m_n, HN: tl.constexpr):
    tl.store(dst + o_r[:, None] * HN + o_n[None, :], b_y, mask=m_r[:, None] & m_n[None, :])


@triton.jit
def apply_blocks(
    t00, t10, t11, t20, t21, t22, t30, t31, t32, t33,
    src, dst, r0, r1, r2, r3, o_r, m0, m1, m2, m3, H: tl.constexpr, N: tl.constexpr, BN: tl.constexpr,
    PRECISION: tl.constexpr,
):  # fmt: skip
    """`dst = T diag(rows) src` for one chunk from the ten lower `[16, 16]` blocks of `T`, `BN` columns at a time:
    row block `i` of `dst` is `Σ_{j ≤ i} T_ij (rows ⊙ src)_j`. `src` (any float dtype) and `dst` (float32) point at
    the chunk's first token of one head; `r0 … r3` are the rows' `[16]` scales."""
    for i_n in range(tl.cdiv(N, BN)):
        o_n = i_n * BN + tl.arange(0, BN)
        m_n = o_n < N
        # [16, BN] each
        b_x0 = load_rows(src, o_r, m0, r0, o_n, m_n, H * N)
        b_x1 = load_rows(src, 16 + o_r, m1, r1, o_n, m_n, H * N)
        b_x2 = load_rows(src, 32 + o_r, m2, r2, o_n, m_n, H * N)
        b_x3 = load_rows(src, 48 + o_r, m3, r3, o_n, m_n, H * N)
        # [16, 16] @ [16, BN] -> [16, BN], summed over the blocks j ≤ i
        b_y = mma(t00, b_x0, PRECISION)
        store_rows(dst, b_y, o_r, m0, o_n, m_n, H * N)
        b_y = mma(t10, b_x0, PRECISION) + mma(t11, b_x1, PRECISION)
        store_rows(dst, b_y, 16 + o_r, m1, o_n, m_n, H * N)
        b_y = mma(t20, b_x0, PRECISION) + mma(t21, b_x1, PRECISION)
        b_y += mma(t22, b_x2, PRECISION)
        store_rows(dst, b_y, 32 + o_r, m2, o_n, m_n, H * N)
        b_y = mma(t30, b_x0, PRECISION) + mma(t31, b_x1, PRECISION)
        b_y += mma(t32, b_x2, PRECISION) + mma(t33, b_x3, PRECISION)
        store_rows(dst, b_y, 48 + o_r, m3, o_n, m_n, H * N)


@triton.jit(do_not_specialize=["T"])
def wy_fwd_kernel(
    k,
    v,
    w,
    beta,
    G,
    T_inv,
    u_tilde,
    k_tilde,
    inv_sq_norm,
    cu_seqlens,
    chunk_indices,
    eps,
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
    IS_VARLEN: tl.constexpr,
    RAW: tl.constexpr,
    PRECISION: tl.constexpr,
    INVERSE: tl.constexpr,
):
    """One program per (chunk, batch row · head), the chunk (`BT = 64`) as four row blocks of 16: the ten lower
    `[16, 16]` blocks of `A`, of `T = (I + A)⁻¹` (blockwise forward substitution, products in `INVERSE`), then `Ũ`,
    `K̃` block by block (their products in `PRECISION`).
    With `KACZMARZ`, `β = η / (‖k‖² + eps)` from the key blocks of `K Wᵀ`, and `r = 1 / (‖k‖² + eps)` is stored."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, _, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)

    # every pointer moves to this head at the chunk's first token; a token step is H·(K | V | BT | 1) elements
    t0 = bos + i_t * BT
    k += (t0 * H + i_h) * K
    w += (t0 * H + i_h) * K
    k_tilde += (t0 * H + i_h) * K
    v += (t0 * H + i_h) * V
    u_tilde += (t0 * H + i_h) * V
    T_inv += (t0 * H + i_h) * BT
    # [16] rows of one block; m0 … m3: which rows of blocks 0 … 3 are real tokens
    o_r = tl.arange(0, 16)
    L = T - i_t * BT
    m0, m1, m2, m3 = o_r < L, 16 + o_r < L, 32 + o_r < L, 48 + o_r < L

    # [16] β (η with KACZMARZ) and cumulative log-decay per block; padding tokens get β = 0 (they write nothing), G = 0
    if USE_BETA:
        p_beta = beta + t0 * H + i_h + o_r * H
        b0 = tl.load(p_beta, mask=m0, other=0).to(tl.float32)
        b1 = tl.load(p_beta + 16 * H, mask=m1, other=0).to(tl.float32)
        b2 = tl.load(p_beta + 32 * H, mask=m2, other=0).to(tl.float32)
        b3 = tl.load(p_beta + 48 * H, mask=m3, other=0).to(tl.float32)
    else:
        b0, b1, b2, b3 = m0.to(tl.float32), m1.to(tl.float32), m2.to(tl.float32), m3.to(tl.float32)
    if USE_G:
        p_g = G + t0 * H + i_h + o_r * H
        g0 = tl.load(p_g, mask=m0, other=0).to(tl.float32)
        g1 = tl.load(p_g + 16 * H, mask=m1, other=0).to(tl.float32)
        g2 = tl.load(p_g + 32 * H, mask=m2, other=0).to(tl.float32)
        g3 = tl.load(p_g + 48 * H, mask=m3, other=0).to(tl.float32)
    else:  # unused
        g0 = tl.zeros([16], dtype=tl.float32)
        g1, g2, g3 = g0, g0, g0

    # the ten lower [16, 16] blocks of K Wᵀ, accumulated over key blocks
    a00 = tl.zeros([16, 16], dtype=tl.float32)
    a10, a11, a20, a21, a22, a30, a31, a32, a33 = a00, a00, a00, a00, a00, a00, a00, a00, a00
    if KACZMARZ:
        # [16] ‖k_t‖² of each block's rows, accumulated over key blocks
        n0 = tl.zeros([16], dtype=tl.float32)
        n1, n2, n3 = n0, n0, n0
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        # [16, BK] rows of each block, keys and write directions
        k0 = load_raw(k, o_r, m0, o_k, m_k, H * K)
        k1 = load_raw(k, 16 + o_r, m1, o_k, m_k, H * K)
        k2 = load_raw(k, 32 + o_r, m2, o_k, m_k, H * K)
        k3 = load_raw(k, 48 + o_r, m3, o_k, m_k, H * K)
        w0 = tl.trans(load_raw(w, o_r, m0, o_k, m_k, H * K))
        w1 = tl.trans(load_raw(w, 16 + o_r, m1, o_k, m_k, H * K))
        w2 = tl.trans(load_raw(w, 32 + o_r, m2, o_k, m_k, H * K))
        w3 = tl.trans(load_raw(w, 48 + o_r, m3, o_k, m_k, H * K))
        if KACZMARZ:
            n0 += tl.sum(k0.to(tl.float32) * k0.to(tl.float32), axis=1)
            n1 += tl.sum(k1.to(tl.float32) * k1.to(tl.float32), axis=1)
            n2 += tl.sum(k2.to(tl.float32) * k2.to(tl.float32), axis=1)
            n3 += tl.sum(k3.to(tl.float32) * k3.to(tl.float32), axis=1)
        # [16, BK] @ [BK, 16] -> [16, 16], ten times
        a00 += raw_dot(k0, w0, RAW)
        a10 += raw_dot(k1, w0, RAW)
        a11 += raw_dot(k1, w1, RAW)
        a20 += raw_dot(k2, w0, RAW)
        a21 += raw_dot(k2, w1, RAW)
        a22 += raw_dot(k2, w2, RAW)
        a30 += raw_dot(k3, w0, RAW)
        a31 += raw_dot(k3, w1, RAW)
        a32 += raw_dot(k3, w2, RAW)
        a33 += raw_dot(k3, w3, RAW)
    if KACZMARZ:
        # [16] r = 1 / (‖k‖² + eps), 0 on padding and where that is not finite (a zero key with eps = 0), and β = η r
        r0 = tl.where(m0, kaczmarz_reciprocal(n0, eps), 0.0)
        r1 = tl.where(m1, kaczmarz_reciprocal(n1, eps), 0.0)
        r2 = tl.where(m2, kaczmarz_reciprocal(n2, eps), 0.0)
        r3 = tl.where(m3, kaczmarz_reciprocal(n3, eps), 0.0)
        p_r = inv_sq_norm + t0 * H + i_h + o_r * H
        tl.store(p_r, r0, mask=m0)
        tl.store(p_r + 16 * H, r1, mask=m1)
        tl.store(p_r + 32 * H, r2, mask=m2)
        tl.store(p_r + 48 * H, r3, mask=m3)
        b0, b1, b2, b3 = b0 * r0, b1 * r1, b2 * r2, b3 * r3
    # A = diag(β) (K Wᵀ ⊙ D) on s < t: strictly lower inside the diagonal blocks, whole blocks below them
    m_diag = o_r[:, None] > o_r[None, :]
    a00 = scaled_block(a00, b0, g0, g0, m_diag & m0[:, None], USE_G)
    a11 = scaled_block(a11, b1, g1, g1, m_diag & m1[:, None], USE_G)
    a22 = scaled_block(a22, b2, g2, g2, m_diag & m2[:, None], USE_G)
    a33 = scaled_block(a33, b3, g3, g3, m_diag & m3[:, None], USE_G)
    m_full = o_r[None, :] >= 0
    a10 = scaled_block(a10, b1, g1, g0, m_full & m1[:, None], USE_G)
    a20 = scaled_block(a20, b2, g2, g0, m_full & m2[:, None], USE_G)
    a21 = scaled_block(a21, b2, g2, g1, m_full & m2[:, None], USE_G)
    a30 = scaled_block(a30, b3, g3, g0, m_full & m3[:, None], USE_G)
    a31 = scaled_block(a31, b3, g3, g1, m_full & m3[:, None], USE_G)
    a32 = scaled_block(a32, b3, g3, g2, m_full & m3[:, None], USE_G)

    # T = (I + A)⁻¹ blockwise: the diagonal blocks' inverses, then T_ij = −T_ii Σ_{j ≤ l < i} A_il T_lj
    t00, t11, t22, t33 = (
        inverse16(a00, o_r, INVERSE),
        inverse16(a11, o_r, INVERSE),
        inverse16(a22, o_r, INVERSE),
        inverse16(a33, o_r, INVERSE),
    )
    t10 = neg_product(t11, tl.dot(a10, t00, input_precision=INVERSE), INVERSE)
    t21 = neg_product(t22, tl.dot(a21, t11, input_precision=INVERSE), INVERSE)
    t20 = neg_product(
        t22, tl.dot(a20, t00, input_precision=INVERSE) + tl.dot(a21, t10, input_precision=INVERSE), INVERSE
    )
    t32 = neg_product(t33, tl.dot(a32, t22, input_precision=INVERSE), INVERSE)
    t31 = neg_product(
        t33, tl.dot(a31, t11, input_precision=INVERSE) + tl.dot(a32, t21, input_precision=INVERSE), INVERSE
    )
    t30 = tl.dot(a30, t00, input_precision=INVERSE) + tl.dot(a31, t10, input_precision=INVERSE)
    t30 = neg_product(t33, t30 + tl.dot(a32, t20, input_precision=INVERSE), INVERSE)
    # rows of T (zeros above the diagonal blocks), real rows only
    zero = tl.zeros([16, 16], dtype=tl.float32)
    m_all = o_r >= 0
    store_rows(T_inv, t00, o_r, m0, o_r, m_all, H * BT)
    for i_z in tl.static_range(1, 4):
        store_rows(T_inv + 16 * i_z, zero, o_r, m0, o_r, m_all, H * BT)
    store_rows(T_inv, t10, 16 + o_r, m1, o_r, m_all, H * BT)
    store_rows(T_inv + 16, t11, 16 + o_r, m1, o_r, m_all, H * BT)
    for i_z in tl.static_range(2, 4):
        store_rows(T_inv + 16 * i_z, zero, 16 + o_r, m1, o_r, m_all, H * BT)
    store_rows(T_inv, t20, 32 + o_r, m2, o_r, m_all, H * BT)
    store_rows(T_inv + 16, t21, 32 + o_r, m2, o_r, m_all, H * BT)
    store_rows(T_inv + 32, t22, 32 + o_r, m2, o_r, m_all, H * BT)
    store_rows(T_inv + 48, zero, 32 + o_r, m2, o_r, m_all, H * BT)
    store_rows(T_inv, t30, 48 + o_r, m3, o_r, m_all, H * BT)
    store_rows(T_inv + 16, t31, 48 + o_r, m3, o_r, m_all, H * BT)
    store_rows(T_inv + 32, t32, 48 + o_r, m3, o_r, m_all, H * BT)
    store_rows(T_inv + 48, t33, 48 + o_r, m3, o_r, m_all, H * BT)

    # Ũ = T diag(β) V and K̃ = T diag(β Γ) K
    apply_blocks(
        t00, t10, t11, t20, t21, t22, t30, t31, t32, t33,
        v, u_tilde, b0, b1, b2, b3, o_r, m0, m1, m2, m3, H, V, BV, PRECISION,
    )  # fmt: skip
    if USE_G:
        b0, b1, b2, b3 = b0 * tl.exp(g0), b1 * tl.exp(g1), b2 * tl.exp(g2), b3 * tl.exp(g3)
    apply_blocks(
        t00, t10, t11, t20, t21, t22, t30, t31, t32, t33,
        k, k_tilde, b0, b1, b2, b3, o_r, m0, m1, m2, m3, H, K, BK, PRECISION,
    )  # fmt: skip


def wy_fwd(
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor,
    beta: torch.Tensor | None,
    G: torch.Tensor | None,
    layout: ChunkLayout,
    kaczmarz_eps: float | None = None,
    precision: str = "tf32x3",
    store: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """`k, w: [B, T, H, K]`, `v: [B, T, H, V]`, `beta: [B, T, H]` or None, `G: [B, T, H]` float32 or None;
    `kaczmarz_eps` a number: the step is `β = beta / (‖k‖² + kaczmarz_eps)` (KLA; `beta` None meaning 1);
    `precision`: of the products that form `Ũ` and `K̃` (the state pass's, `precision.state_precision`); `store`: the
    dtype `T`, `Ũ`, `K̃` are stored in (the fast level's bfloat16).

    Returns `T: [B, T, H, BT]` (row `t` = row of its chunk's inverse), `Ũ: [B, T, H, V]`, `K̃: [B, T, H, K]` in
    `store`'s dtype and, with `kaczmarz_eps`, `r = 1 / (‖k‖² + kaczmarz_eps): [B, T, H]` (else None).
    """
    if layout.BT != 64:
        raise ValueError(f"wy_fwd: the kernel works on chunks of 4 × 16 tokens, got chunks of {layout.BT}")
    B, T, H, K = k.shape
    V = v.shape[-1]
    # key blocks of at most 32 columns (tl.dot wants every dimension ≥ 16; masks cover the rest); 16-bit keys: value
    # blocks of 64 and two warps, a fifth faster than 32 and four at K = V = 128, 64K tokens (`python -m linattn.bench
    # stages`); float32 keys: value blocks of 32, four warps
    narrow = narrow_launch(k.dtype, w.dtype)
    BK = min(32, max(16, next_power_of_2(K)))
    BV = min(64 if narrow else 32, max(16, next_power_of_2(V)))
    where = {"dtype": store, "device": k.device}
    T_inv = torch.empty(B, T, H, layout.BT, **where)
    u_tilde = torch.empty(B, T, H, V, **where)
    k_tilde = torch.empty(B, T, H, K, **where)
    kaczmarz = kaczmarz_eps is not None
    inv_sq_norm = torch.empty(B, T, H, dtype=torch.float32, device=k.device) if kaczmarz else None
    grid = (layout.NT, B * H)
    wy_fwd_kernel[grid](
        k, v, w, beta, G, T_inv, u_tilde, k_tilde, inv_sq_norm, layout.cu_seqlens, layout.chunk_indices,
        float(kaczmarz_eps) if kaczmarz else 0.0, T,
        H=H, K=K, V=V, BT=layout.BT, BK=BK, BV=BV,
        USE_BETA=beta is not None, USE_G=G is not None, KACZMARZ=kaczmarz, IS_VARLEN=layout.cu_seqlens is not None,
        RAW=raw_operands(k.device, k.dtype, w.dtype), PRECISION=precision,
        INVERSE="ieee" if precision == "tf32x3" else "tf32", num_warps=2 if narrow else 4, num_stages=3,
    )  # fmt: skip
    return T_inv, u_tilde, k_tilde, inv_sq_norm
