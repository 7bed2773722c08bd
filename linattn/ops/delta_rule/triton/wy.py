"""Stage 2 of the chunked forward: the WY / UT transform of every chunk, all chunks in parallel.

Per chunk of `BT` tokens, with `G` the chunk-local cumulative log-decay (stage 1), `Γ = exp(G)` and
`D_ts = exp(G_t − G_s)`:

    A  = strict_tril(diag(β) (K Wᵀ ⊙ D))          [BT, BT]
    T  = (I + A)⁻¹                                unit lower triangular
    Ũ  = T diag(β) V                              [BT, V]
    K̃  = T diag(β Γ) K                            [BT, K]

so that the pseudo-values of the chunk are `U = Ũ − K̃ h` for its start state `h` (stage 3). `T` is stored for the
backward; `Ũ` and `K̃` feed stage 3.

Numerics: everything is float32 after the loads, and every `tl.dot` asks for `input_precision="tf32x3"`: Triton's
default on NVIDIA GPUs is tf32 (10-bit mantissa, relative error ~1e-3 per product), which would make the chunked
result far less accurate than the float32 recurrence it must match (DESIGN §4). Two exceptions: `K Wᵀ` of raw
bfloat16 / float16 inputs is exact in one tf32 pass (`precision.py`), and with such inputs the inversion's outer
products are `tf32x3` too, where float32 inputs keep them `ieee`. The decay exponent is masked to
`s < t` before `exp`, so the positive differences above the diagonal never overflow. `(I + A)⁻¹` is formed in
registers by recursive doubling of its diagonal blocks (1 → 2 → … → BT): `log2 BT` levels of two `[BT, BT]`
products, the blocked form of forward substitution.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.chunking import causal, decay_matrix
from linattn.ops.delta_rule.triton.cumsum import ChunkLayout
from linattn.ops.delta_rule.triton.index import chunk_coords
from linattn.ops.delta_rule.triton.precision import raw_precision


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
def apply_inverse(b_T, src, dst, b_rows, o_i, m_t, H: tl.constexpr, N: tl.constexpr, BN: tl.constexpr):
    """`dst = T diag(rows) src` for one chunk, `BN` columns at a time: `src` (any float dtype) and `dst` (float32)
    point at the chunk's first token of one head, rows `H·N` elements apart; `b_T: [BT, BT]`, `b_rows: [BT]`."""
    for i_n in range(tl.cdiv(N, BN)):
        o_n = i_n * BN + tl.arange(0, BN)
        m_n = m_t[:, None] & (o_n < N)[None, :]
        # [BT, BN]
        b_x = tl.load(src + o_i[:, None] * (H * N) + o_n[None, :], mask=m_n, other=0).to(tl.float32)
        # [BT, BT] @ [BT, BN] -> [BT, BN]
        b_y = tl.dot(b_T, b_x * b_rows[:, None], input_precision="tf32x3")
        tl.store(dst + o_i[:, None] * (H * N) + o_n[None, :], b_y, mask=m_n)


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
    cu_seqlens,
    chunk_indices,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    LOG2_BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_BETA: tl.constexpr,
    USE_G: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    RAW: tl.constexpr,
):
    """One program per (chunk, batch row · head): builds `A`, inverts `I + A` in registers, applies the inverse."""
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
    o_i = tl.arange(0, BT)
    m_t = o_i < T - i_t * BT

    # [BT] β of the chunk; padding tokens get β = 0, so they write nothing
    if USE_BETA:
        b_beta = tl.load(beta + t0 * H + i_h + o_i * H, mask=m_t, other=0).to(tl.float32)
    else:
        b_beta = m_t.to(tl.float32)
    if USE_G:
        # [BT] cumulative log-decay, 0 on padding
        b_g = tl.load(G + t0 * H + i_h + o_i * H, mask=m_t, other=0).to(tl.float32)

    # A = strict_tril(diag(β) (K Wᵀ ⊙ D)), accumulated over key blocks
    b_A = tl.zeros([BT, BT], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = m_t[:, None] & (o_k < K)[None, :]
        # [BT, BK], [BT, BK]
        b_k = tl.load(k + o_i[:, None] * (H * K) + o_k[None, :], mask=m_k, other=0).to(tl.float32)
        b_w = tl.load(w + o_i[:, None] * (H * K) + o_k[None, :], mask=m_k, other=0).to(tl.float32)
        # [BT, BK] @ [BK, BT] -> [BT, BT]
        b_A += tl.dot(b_k, tl.trans(b_w), input_precision=RAW)
    # s < t, on real rows only: a padding row has G = 0, and its exp(0 − G_s) may overflow; the inversion below
    # multiplies zeros into every row, so one non-finite entry would spread to all of them
    m_A = (o_i[:, None] > o_i[None, :]) & m_t[:, None]
    if USE_G:
        b_A *= tl.exp(tl.where(m_A, b_g[:, None] - b_g[None, :], float("-inf")))
    b_A = tl.where(m_A, b_A * b_beta[:, None], 0.0)

    # T = (I + A)⁻¹ by recursive doubling of the diagonal blocks. If T_b inverts the diagonal b×b blocks of I + A,
    # each 2b×2b block [[L11, 0], [L21, L22]] has the inverse [[T11, 0], [−T22 L21 T11, T22]]: in one tile,
    # T_2b = T_b − T_b M T_b with M the entries of A whose row t and column s share their 2b block but not their
    # b block, i.e. whose highest differing bit is log2(b). log2(BT) levels of two [BT, BT] products each.
    o_x = o_i[:, None] ^ o_i[None, :]
    b_T = (o_x == 0).to(tl.float32)
    for level in tl.static_range(LOG2_BT):
        b_M = tl.where((o_x >> level) == 1, b_A, 0.0)
        # [BT, BT] @ [BT, BT] @ [BT, BT] -> [BT, BT]
        if RAW == "tf32x3":
            # float32 inputs: the outer product exactly, as an error in T grows with every level
            b_T -= tl.dot(tl.dot(b_T, b_M, input_precision="tf32x3"), b_T, input_precision="ieee")
        else:
            b_T -= tl.dot(tl.dot(b_T, b_M, input_precision="tf32x3"), b_T, input_precision="tf32x3")
    tl.store(T_inv + o_i[:, None] * (H * BT) + o_i[None, :], b_T, mask=m_t[:, None])

    # Ũ = T diag(β) V, one value block at a time
    apply_inverse(b_T, v, u_tilde, b_beta, o_i, m_t, H, V, BV)  # Ũ = T β V

    # K̃ = T diag(β Γ) K, one key block at a time
    if USE_G:
        b_scale = b_beta * tl.exp(b_g)
    else:
        b_scale = b_beta
    apply_inverse(b_T, k, k_tilde, b_scale, o_i, m_t, H, K, BK)  # K̃ = T β Γ K


def wy_fwd(
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor,
    beta: torch.Tensor | None,
    G: torch.Tensor | None,
    layout: ChunkLayout,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`k, w: [B, T, H, K]`, `v: [B, T, H, V]`, `beta: [B, T, H]` or None, `G: [B, T, H]` float32 or None.

    Returns float32 `T: [B, T, H, BT]` (row `t` = row of its chunk's inverse), `Ũ: [B, T, H, V]`, `K̃: [B, T, H, K]`.
    """
    B, T, H, K = k.shape
    V = v.shape[-1]
    # key and value blocks of at most 64 columns (tl.dot wants every dimension ≥ 16; masks cover the rest)
    BK = min(64, max(16, triton.next_power_of_2(K)))
    BV = min(64, max(16, triton.next_power_of_2(V)))
    T_inv = torch.empty(B, T, H, layout.BT, dtype=torch.float32, device=k.device)
    u_tilde = torch.empty(B, T, H, V, dtype=torch.float32, device=k.device)
    k_tilde = torch.empty(B, T, H, K, dtype=torch.float32, device=k.device)
    grid = (layout.NT, B * H)
    wy_fwd_kernel[grid](
        k, v, w, beta, G, T_inv, u_tilde, k_tilde, layout.cu_seqlens, layout.chunk_indices, T,
        H=H, K=K, V=V, BT=layout.BT, LOG2_BT=layout.BT.bit_length() - 1, BK=BK, BV=BV,
        USE_BETA=beta is not None, USE_G=G is not None, IS_VARLEN=layout.cu_seqlens is not None,
        RAW=raw_precision(k.dtype),
        num_warps=8,  # the six levels of 64×64 inversion products: 8 warps halve the spills of 4
    )  # fmt: skip
    return T_inv, u_tilde, k_tilde
