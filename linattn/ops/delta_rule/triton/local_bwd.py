"""Stage B3 of the chunked backward: every input's gradient, chunk by chunk in parallel.

With the chunk's start state `h` and the gradient `dh⁺` of its end state fixed (stage B2 stored both), a chunk is a
function of its own tokens only:

    A = strict_tril(diag(β)(K Wᵀ ⊙ D)),  T = (I + A)⁻¹,  U = T β V − T β Γ K h
    O  = scale · (diag(Γ) Q h + tril(Q Wᵀ ⊙ D) U)
    h⁺ = Γ_C h + (W ⊙ Γ_C/Γ)ᵀ U

so the gradients of `⟨dO, O⟩ + ⟨dh⁺, h⁺⟩` with respect to its `q, k, v, w, β, G` are the total ones. With
`dṼ = Tᵀ dU` from stage B2 and `P = scale · tril(dO Uᵀ) ⊙ D`:

    dQ  = scale · diag(Γ) dO hᵀ + P W
    dV  = diag(β) dṼ
    dK̂  = −dṼ hᵀ                                  (= Tᵀ dK̃, the gradient reaching β Γ K)
    dA  = −strict_tril(dṼ Uᵀ)                     (= −Tᵀ dT Tᵀ, since dT = dŨ Vᵀβ + dK̃ Kᵀ Γβ and U = Ũ − K̃ h)
    R   = dA ⊙ D
    dK  = diag(β Γ) dK̂ + diag(β) R W
    dW  = Pᵀ Q + (Γ_C/Γ) ⊙ (U dh⁺ᵀ) + Rᵀ diag(β) K
    dβ  = rowsum(V ⊙ dṼ) + Γ ⊙ rowsum(K ⊙ dK̂) + rowsum(R ⊙ K Wᵀ)
    dG  = scale · Γ ⊙ rowsum(Q ⊙ dO hᵀ) + β Γ ⊙ rowsum(K ⊙ dK̂) − x
          + rowsum(M) − colsum(M),  M = P ⊙ Q Wᵀ + diag(β) R ⊙ K Wᵀ
          + e_last · (Σ x + Γ_C Σ h ⊙ dh⁺),   x = rowsum((W ⊙ Γ_C/Γ) ⊙ U dh⁺ᵀ)

(`e_last` the chunk's last real token; `D_ts = exp(G_t − G_s)` gives `+` to row `t` and `−` to column `s`).
`dG` is the gradient of the chunk-local cumsum `G`; the reverse cumsum in `cumsum.py` turns it into `dg`. With
`w = k` the kernel adds `dW` into `dK`.

KLA (`KACZMARZ`): the step is `β = η r` with `r = 1 / (‖k‖² + ε)` (the forward's, loaded), so `∂β/∂η = r` and
`∂β/∂k = −2 η r² k = −2 β r k`:

    dη  = r ⊙ dβ
    dK += diag(−2 r ⊙ β dβ) K,      β dβ = rowsum(dṼ ⊙ U)

The last identity: `β_t` enters the chunk only through `u_t = β_t e_t`, where the error
`e_t = v_t − Γ_t hᵀ k_t − Σ_{s<t} D_ts (k_tᵀ w_s) u_s` does not depend on `β_t`, and the total gradient reaching
`u_t` is `dṼ_t`; so `β_t dβ_t = ⟨dṼ_t, u_t⟩`. It is known after the pass over value blocks, before the first key
block of `dK` is stored (`dβ` itself is complete only after the last one).

Without the erase term (`ERASE` off: linear attention and scalar-decay GLA, `β = 1`, `w = k`, `U = V`) there is no
`A`, `T` or `K̃`: `dK̂ = 0`, `R = 0`, and what is left is

    dQ = scale · diag(Γ) dO hᵀ + P K,    dV = dṼ (= dU),    dK = Pᵀ Q + (Γ_C/Γ) ⊙ (V dh⁺ᵀ)
    dG = scale · Γ ⊙ rowsum(Q ⊙ dO hᵀ) − x + rowsum(M) − colsum(M) + e_last · (Σ x + Γ_C Σ h ⊙ dh⁺),  M = P ⊙ Q Kᵀ

so the kernel skips the loads of `k` (as the erase key) and `dṼ hᵀ`, the `[BT, BT]` products `dṼ Uᵀ` and `K Wᵀ`,
and every `R` term.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.chunking import causal, decay_matrix
from linattn.ops.delta_rule.kaczmarz import kaczmarz_step
from linattn.ops.utils.grid import next_power_of_2
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import ChunkLayout
from linattn.ops.utils.precision import mma, raw_dot, raw_operands


def _chunk(q, k, v, w, beta, G, h, scale, erase=True):
    """One chunk of the forward, all heads at once (`[H, L, ·]` tokens, `h: [H, K, V]`): `(O, h⁺)`; without
    `erase`, `U = V` (linear attention: `k` and `beta` unused)."""
    L = q.shape[1]
    D = None if G is None else decay_matrix(G)
    gamma = 1.0 if G is None else G.exp()[..., None]
    if erase:
        eye = torch.eye(L, dtype=q.dtype, device=q.device).expand(q.shape[0], L, L)
        A = causal(beta * (k @ w.transpose(-1, -2)), D, strict=True)
        T = torch.linalg.solve_triangular(eye + A, eye, upper=False, unitriangular=True)
        U = T @ (beta * v) - T @ (beta * gamma * k) @ h
    else:
        U = v
    O = scale * ((gamma * q) @ h + causal(q @ w.transpose(-1, -2), D) @ U)
    if G is None:
        return O, h + w.transpose(-1, -2) @ U
    w_end = w * (G[:, -1:] - G).exp()[..., None]
    return O, G[:, -1, None, None].exp() * h + w_end.transpose(-1, -2) @ U


def local_bwd_ref(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor | None,
    beta: torch.Tensor | None,
    G: torch.Tensor | None,
    h: torch.Tensor,
    dh: torch.Tensor,
    do: torch.Tensor,
    scale: float,
    layout: ChunkLayout,
    erase: bool = True,
    kaczmarz_eps: float | None = None,
) -> tuple[torch.Tensor, ...]:
    """`(dq, dk, dv, dw, dβ, dG)` as `local_bwd` returns them, in float64, by autograd of each chunk's forward with
    its start state `h[c]` fixed and the cotangents `dO`, `dh[c]`; `dw`, `dβ`, `dG` are None when `w`, `β`, `G` are.
    Without `erase` (`w`, `β` None) the chunk is linear attention's (`U = V`). With `kaczmarz_eps` the step is
    `β = beta / (‖k‖² + kaczmarz_eps)` inside the differentiated function (`dβ` is then `beta`'s gradient, `dη`)."""
    H = q.shape[2]
    x = {"q": q, "k": k, "v": v, "w": w, "beta": beta, "G": G}
    x = {n: t.double() for n, t in x.items() if t is not None}
    grads = {n: torch.zeros_like(t) for n, t in x.items()}
    for _, b, bos, eos, first in layout.sequences():
        for i, start in enumerate(range(bos, eos, layout.BT)):
            c = slice(start, min(start + layout.BT, eos))
            leaves = {n: t[b, c].transpose(0, 1).detach().requires_grad_() for n, t in x.items()}  # [H, L, ·]
            step = leaves.get("beta", torch.ones(H, c.stop - c.start, dtype=torch.float64, device=q.device))
            if kaczmarz_eps is not None:
                step = step * kaczmarz_step(leaves["k"], None, kaczmarz_eps)
            O, h_end = _chunk(
                leaves["q"], leaves["k"], leaves["v"], leaves.get("w", leaves["k"]),
                step[..., None], leaves.get("G"), h[b, first + i].double(), scale, erase,
            )  # fmt: skip
            loss = (O * do[b, c].transpose(0, 1).double()).sum() + (h_end * dh[b, first + i].double()).sum()
            for n, d in zip(leaves, torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)):
                grads[n][b, c] = 0.0 if d is None else d.transpose(0, 1)
    return tuple(grads.get(n) for n in ("q", "k", "v", "w", "beta", "G"))


@triton.jit(do_not_specialize=["T"])
def local_bwd_kernel(
    q,
    k,
    v,
    w,
    beta,
    G,
    h,
    dh,
    U,
    dv_tilde,
    do,
    inv_sq_norm,
    dq,
    dk,
    dv,
    dw,
    dbeta,
    dG,
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
    ERASE: tl.constexpr,
    USE_BETA: tl.constexpr,
    USE_G: tl.constexpr,
    KACZMARZ: tl.constexpr,
    W_IS_K: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    RAW: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One program per (chunk, batch row · head): a pass over value blocks for the `[BT, BT]` score gradients, one
    over key blocks for the score terms of `dβ` and `dG`, then a pass over key blocks for `dQ`, `dK`, `dW` (each
    with an inner pass over value blocks for the products with `h` and `dh⁺`).
    Without `ERASE` (then `W_IS_K`, no β): `U` points at the values `v`, and `dṼ = dU`. With `KACZMARZ`, `beta` is
    `η`, the step `β = η r` with the forward's `r`, `dβ` is stored as `dη = r dβ` and `dK` has the step's term."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)

    # this head at the chunk's first token; a token step is H·(K | V | 1) elements
    t0 = bos + i_t * BT
    o_tk0 = (t0 * H + i_h) * K
    o_tv0 = (t0 * H + i_h) * V
    h += (i_tg * H + i_h) * K * V
    dh += (i_tg * H + i_h) * K * V
    o_i = tl.arange(0, BT)
    m_t = o_i < T - i_t * BT
    last = tl.minimum(BT, T - i_t * BT) - 1

    # [BT] β (1 on real rows without β, 0 on padding either way; η with KACZMARZ)
    if USE_BETA:
        b_beta = tl.load(beta + t0 * H + i_h + o_i * H, mask=m_t, other=0).to(tl.float32)
    else:
        b_beta = m_t.to(tl.float32)
    if KACZMARZ:
        # [BT] r = 1 / (‖k‖² + ε) as the forward stored it (0 on padding), and β = η r
        b_r = tl.load(inv_sq_norm + t0 * H + i_h + o_i * H, mask=m_t, other=0)
        b_beta *= b_r
        b_udv = tl.zeros([BT], dtype=tl.float32)
    # [BT, BT] decay D_ts on s ≤ t of real rows (masked before exp: a padding row's exp(0 − G_s) could overflow)
    m_O = (o_i[:, None] >= o_i[None, :]) & m_t[:, None]
    m_A = (o_i[:, None] > o_i[None, :]) & m_t[:, None]
    if USE_G:
        # [BT] cumulative log-decay (0 on padding) and its value at the chunk's last real token
        b_g = tl.load(G + t0 * H + i_h + o_i * H, mask=m_t, other=0)
        b_g_last = tl.load(G + (t0 + last) * H + i_h)
        b_gamma = tl.exp(b_g)
        b_to_end = tl.exp(b_g_last - b_g)
        b_D = tl.exp(tl.where(m_O, b_g[:, None] - b_g[None, :], float("-inf")))
    else:
        b_gamma = m_t.to(tl.float32)
        b_D = m_O.to(tl.float32)

    # pass 1, over value blocks: dV, the V-part of dβ, dṼ Uᵀ and dO Uᵀ
    b_dA = tl.zeros([BT, BT], dtype=tl.float32)
    b_dS = tl.zeros([BT, BT], dtype=tl.float32)
    b_dbeta = tl.zeros([BT], dtype=tl.float32)
    for i_v in range(tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_tv = m_t[:, None] & (o_v < V)[None, :]
        o_tv = o_tv0 + o_i[:, None] * (H * V) + o_v[None, :]
        # [BT, BV] each (U: from stage 3, float32 or the fast level's bfloat16; without the erase term the values)
        b_U = tl.load(U + o_tv, mask=m_tv, other=0).to(tl.float32)
        b_dvt = tl.load(dv_tilde + o_tv, mask=m_tv, other=0)
        b_do = tl.load(do + o_tv, mask=m_tv, other=0).to(tl.float32)
        tl.store(dv + o_tv, (b_dvt * b_beta[:, None]).to(dv.dtype.element_ty), mask=m_tv)
        if ERASE:
            b_v = tl.load(v + o_tv, mask=m_tv, other=0).to(tl.float32)
            b_dbeta += tl.sum(b_v * b_dvt, axis=1)
            if KACZMARZ:
                b_udv += tl.sum(b_U * b_dvt, axis=1)
            # [BT, BV] @ [BV, BT] -> [BT, BT]
            b_dA += mma(b_dvt, tl.trans(b_U), PRECISION)
        # [BT, BV] @ [BV, BT] -> [BT, BT]
        b_dS += mma(b_do, tl.trans(b_U), PRECISION)
    # R = dA ⊙ D with dA = −strict_tril(dṼ Uᵀ);  P = scale · tril(dO Uᵀ) ⊙ D
    if ERASE:
        b_R = tl.where(m_A, -b_dA * b_D, 0.0)
    b_P = tl.where(m_O, b_dS * b_D, 0.0) * scale
    if KACZMARZ:
        # [BT] ∂β/∂k · dβ = −2 r (β dβ) k, with β dβ = rowsum(dṼ ⊙ U)
        b_dk_step = -2.0 * b_r * b_udv

    # the score terms, from Q Wᵀ and K Wᵀ over the whole key dim: R ⊙ K Wᵀ for dβ; M = P ⊙ Q Wᵀ + diag(β) R ⊙ K Wᵀ,
    # + to its rows and − to its columns, for dG. Formed before pass 2, which reloads the keys, so that the two
    # [BT, BT] products are not alive beside its accumulators
    b_QW = tl.zeros([BT, BT], dtype=tl.float32)
    b_KW = tl.zeros([BT, BT], dtype=tl.float32)
    if USE_G or ERASE:
        for i_k in range(tl.cdiv(K, BK)):
            o_k = i_k * BK + tl.arange(0, BK)
            m_tk = m_t[:, None] & (o_k < K)[None, :]
            o_tk = o_tk0 + o_i[:, None] * (H * K) + o_k[None, :]
            # [BT, BK]
            b_w = tl.load(w + o_tk, mask=m_tk, other=0)
            # [BT, BK] @ [BK, BT] -> [BT, BT], each
            if USE_G:
                b_QW += raw_dot(tl.load(q + o_tk, mask=m_tk, other=0), tl.trans(b_w), RAW)
            if ERASE:
                b_KW += raw_dot(tl.load(k + o_tk, mask=m_tk, other=0), tl.trans(b_w), RAW)
    if ERASE:
        b_RKW = b_R * b_KW
        b_dbeta += tl.sum(b_RKW, axis=1)
    b_dg = tl.zeros([BT], dtype=tl.float32)
    if USE_G:
        b_M = b_P * b_QW
        if ERASE:
            b_M += b_beta[:, None] * b_RKW
        b_dg += tl.sum(b_M, axis=1) - tl.sum(b_M, axis=0)

    # pass 2, over key blocks: dQ, dK, dW
    b_x = tl.zeros([BT], dtype=tl.float32)
    b_hdh = tl.zeros([BK, BV], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        m_tk = m_t[:, None] & m_k[None, :]
        o_tk = o_tk0 + o_i[:, None] * (H * K) + o_k[None, :]
        # dṼ hᵀ, dO hᵀ and U dh⁺ᵀ for this key block, over value blocks
        b_dvh = tl.zeros([BT, BK], dtype=tl.float32)
        b_doh = tl.zeros([BT, BK], dtype=tl.float32)
        b_udh = tl.zeros([BT, BK], dtype=tl.float32)
        for i_v in range(tl.cdiv(V, BV)):
            o_v = i_v * BV + tl.arange(0, BV)
            m_v = o_v < V
            m_tv = m_t[:, None] & m_v[None, :]
            m_h = m_k[:, None] & m_v[None, :]
            o_tv = o_tv0 + o_i[:, None] * (H * V) + o_v[None, :]
            # [BK, BV], [BK, BV]
            # (h in bfloat16 at the fast level: in float32 for the elementwise h ⊙ dh below)
            b_h = tl.load(h + o_k[:, None] * V + o_v[None, :], mask=m_h, other=0).to(tl.float32)
            b_dh = tl.load(dh + o_k[:, None] * V + o_v[None, :], mask=m_h, other=0).to(tl.float32)
            # [BT, BV] each
            b_U = tl.load(U + o_tv, mask=m_tv, other=0).to(tl.float32)
            b_do = tl.load(do + o_tv, mask=m_tv, other=0).to(tl.float32)
            if ERASE:
                b_dvt = tl.load(dv_tilde + o_tv, mask=m_tv, other=0)
                # [BT, BV] @ [BV, BK] -> [BT, BK]
                b_dvh += mma(b_dvt, tl.trans(b_h), PRECISION)
            # [BT, BV] @ [BV, BK] -> [BT, BK], twice
            b_doh += mma(b_do, tl.trans(b_h), PRECISION)
            b_udh += mma(b_U, tl.trans(b_dh), PRECISION)
            if USE_G:
                b_hdh += b_h * b_dh
        # [BT, BK] each
        b_q = tl.load(q + o_tk, mask=m_tk, other=0).to(tl.float32)
        b_w = tl.load(w + o_tk, mask=m_tk, other=0).to(tl.float32)
        if USE_G:
            b_udh *= b_to_end[:, None]
        b_doh *= (scale * b_gamma)[:, None]
        if USE_G:
            b_dg += tl.sum(b_q * b_doh, axis=1)
            b_x += tl.sum(b_w * b_udh, axis=1)
        if ERASE:
            # [BT, BK]
            b_k = tl.load(k + o_tk, mask=m_tk, other=0).to(tl.float32)
            # dK̂ ⊙ K summed over the key block, i.e. −rowsum(K ⊙ dṼ hᵀ)
            b_kdk = -tl.sum(b_k * b_dvh, axis=1)
            b_dbeta += b_gamma * b_kdk
            if USE_G:
                b_dg += b_beta * b_gamma * b_kdk

        # [BT, BT] @ [BT, BK] -> [BT, BK]
        b_dq = b_doh + mma(b_P, b_w, PRECISION)
        # [BT, BT]ᵀ @ [BT, BK] -> [BT, BK]
        b_dw = mma(tl.trans(b_P), b_q, PRECISION) + b_udh
        tl.store(dq + o_tk, b_dq.to(dq.dtype.element_ty), mask=m_tk)
        if ERASE:
            # [BT, BT] @ [BT, BK] -> [BT, BK]
            b_dk = b_beta[:, None] * mma(b_R, b_w, PRECISION) - (b_beta * b_gamma)[:, None] * b_dvh
            if KACZMARZ:
                b_dk += b_dk_step[:, None] * b_k
            # [BT, BT]ᵀ @ [BT, BK] -> [BT, BK]
            b_dw += mma(tl.trans(b_R), b_k * b_beta[:, None], PRECISION)
            if W_IS_K:
                tl.store(dk + o_tk, (b_dk + b_dw).to(dk.dtype.element_ty), mask=m_tk)
            else:
                tl.store(dk + o_tk, b_dk.to(dk.dtype.element_ty), mask=m_tk)
                tl.store(dw + o_tk, b_dw.to(dw.dtype.element_ty), mask=m_tk)
        else:
            # one key, which only writes: its gradient is dW
            tl.store(dk + o_tk, b_dw.to(dk.dtype.element_ty), mask=m_tk)

    if USE_BETA:
        if KACZMARZ:
            b_dbeta *= b_r  # dη = r dβ
        tl.store(dbeta + t0 * H + i_h + o_i * H, b_dbeta, mask=m_t)
    if USE_G:
        b_dg -= b_x
        # the chunk's last decay Γ_C scales h (into h⁺) and every column of W̃
        b_dg_last = tl.sum(b_x) + tl.exp(b_g_last) * tl.sum(b_hdh)
        b_dg += tl.where(o_i == last, b_dg_last, 0.0)
        tl.store(dG + t0 * H + i_h + o_i * H, b_dg, mask=m_t)


def local_bwd_outputs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor | None,
    beta: torch.Tensor | None,
    G: torch.Tensor | None,
) -> tuple[torch.Tensor | None, ...]:
    """Uninitialised `(dq, dk, dv, dw, dβ, dG)` for `local_bwd`'s inputs, shaped and typed as it returns them."""
    B, T, H = q.shape[:3]
    f32 = {"dtype": torch.float32, "device": q.device}
    dw = None if w is None else torch.empty_like(w)
    dbeta = None if beta is None else torch.empty(B, T, H, **f32)
    dG = None if G is None else torch.empty(B, T, H, **f32)
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), dw, dbeta, dG


def local_bwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor | None,
    beta: torch.Tensor | None,
    G: torch.Tensor | None,
    h: torch.Tensor,
    dh: torch.Tensor,
    U: torch.Tensor,
    dv_tilde: torch.Tensor,
    do: torch.Tensor,
    scale: float,
    layout: ChunkLayout,
    erase: bool = True,
    inv_sq_norm: torch.Tensor | None = None,
    precision: str = "tf32x3",
    out: tuple[torch.Tensor | None, ...] | None = None,
) -> tuple[torch.Tensor | None, ...]:
    """`q, k, w: [B, T, H, K]` (w None: w = k), `v, do: [B, T, H, V]`, `beta, G: [B, T, H]` or None, and
    `h, dh: [B, NT, H, K, V]` (chunk start states, gradients of the chunk end states; float32, or the fast level's
    bfloat16), `U, dṼ: [B, T, H, V]`.
    Without `erase` (linear attention: `w`, `beta` None) pass `U = v`. KLA: the forward's float32
    `r = 1 / (‖k‖² + ε): [B, T, H]` as `inv_sq_norm`; then `beta` is `η` (or None: 1) and the step `β = η r`.

    Returns `(dq, dk, dv, dw, dβ, dG)`: `dq, dk, dv, dw` in their inputs' dtypes (`dk` includes `dw` and `dw` is None
    when `w` is None; for KLA also the step's dependence on `k`), float32 `dβ: [B, T, H]` (for KLA the gradient of
    `η`) and `dG: [B, T, H]` (None without β, G). `precision`: of the products that involve an intermediate
    (`precision.grad_precision`). `out`: those six to write into, as `local_bwd_outputs` makes them (contiguous:
    e.g. one span's tokens of the whole sequence's gradients, `backward.py`).
    """
    if not erase and (w is not None or beta is not None or inv_sq_norm is not None):
        raise ValueError("local_bwd: without the erase term there is one key (w None) and no beta")
    B, T, H, K = q.shape
    V = v.shape[-1]
    # key blocks of at least 32: on Hopper (Triton 3.6) BK = 16 beside BV = 64 faults (K ≤ 16 with V = 33).
    # One-pass launches (training) take value blocks of 32 and pipeline the loads of the value loops three deep
    # (two stages are slower): about 5% off the stage at 8K and 64K (bf16 GDN, K = V = 128; `python -m linattn.bench
    # stages`), for 152 KB of shared memory against 128 KB (`scripts/compile_kernels.py`). `tf32x3` launches keep 64
    # and one stage, for their spills. The fast level's bfloat16 operands fit a program in 4 warps on key blocks of
    # 32 (8 B of spills, 66 KB of shared memory), so that two programs share an SM: about a tenth off the stage
    # against 8 warps on 64 (`python -m linattn.bench stages --batch 16 --lengths 4096 --precision fast`, either launch)
    one_pass = precision != "tf32x3"
    sixteen = precision.startswith("bf16")  # the fast level's operands
    BK = min(32 if sixteen else 64, max(32, next_power_of_2(K)))
    BV = min(32 if one_pass else 64, max(16, next_power_of_2(V)))
    dq, dk, dv, dw, dbeta, dG = local_bwd_outputs(q, k, v, w, beta, G) if out is None else out
    grid = (layout.NT, B * H)
    local_bwd_kernel[grid](
        q, k, v, k if w is None else w, beta, G, h, dh, U, dv_tilde, do, inv_sq_norm, dq, dk, dv, dw, dbeta, dG,
        layout.cu_seqlens, layout.chunk_indices, scale, T,
        H=H, K=K, V=V, BT=layout.BT, BK=BK, BV=BV,
        ERASE=erase, USE_BETA=beta is not None, USE_G=G is not None, KACZMARZ=inv_sq_norm is not None,
        W_IS_K=w is None,
        IS_VARLEN=layout.cu_seqlens is not None,
        RAW=raw_operands(q.device, q.dtype, k.dtype, (k if w is None else w).dtype), PRECISION=precision,
        # K = V = 128: 8 warps for float32 operands, as 4 spill 2 KB a thread on Hopper
        num_warps=4 if sixteen else 8, num_stages=3 if one_pass else 1,
    )  # fmt: skip
    return dq, dk, dv, dw, dbeta, dG
