"""Fused recurrent kernel for decoding: a few tokens on top of a carried state, one launch.

Each program owns one `[K, BV]` tile of one sequence-head's state in registers and walks the tokens in order:

    delta rule (ERASE):   S ← γ_t S;   u_t = β_t (v_t − Sᵀ k_t);   S ← S + w_t u_tᵀ;   o_t = scale · Sᵀ q_t
    no erase:             S ← γ_t S;   S ← S + k_t (β_t v_t)ᵀ;                     o_t = scale · Sᵀ q_t

with `γ_t = exp(g_t)` a scalar per head or a vector over the key channels (GLA), and for KLA (`KACZMARZ`) the
Kaczmarz step `β_t = η_t / (‖k_t‖² + ε)` from the key row the erase term loads. This covers the decode step of
DeltaNet, Gated DeltaNet, KLA, VLA's state (`w = α̂`), linear attention and GLA. The work per token is
`O(K·V)`, so the per-token time does not depend on the context length; state traffic is one read and one write
per launch. Forward only: decoding needs no gradient.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.delta_rule.triton.kaczmarz import kaczmarz_reciprocal
from linattn.ops.utils.grid import cdiv, next_power_of_2
from linattn.ops.utils.inputs import check_decode_inputs


@triton.jit
def fused_recurrent_fwd_kernel(
    q,
    k,
    v,
    w,
    beta,
    g,
    o,
    h0,
    ht,
    cu_seqlens,
    scale,
    eps,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    ERASE: tl.constexpr,
    USE_W: tl.constexpr,
    USE_BETA: tl.constexpr,
    KACZMARZ: tl.constexpr,  # β_t = η_t / (‖k_t‖² + eps), η_t = beta_t (1 without USE_BETA)
    GATE: tl.constexpr,  # 0: none, 1: scalar per head, 2: per key channel
    USE_H0: tl.constexpr,
    STORE_HT: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n, i_h = i_nh // H, i_nh % H
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
        T = eos - bos
    else:
        bos = i_n.to(tl.int64) * T

    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    m_h = m_k[:, None] & m_v[None, :]

    # pointers at token 0 of this sequence and head; a token step is H*K (or H*V, H) elements
    p_q = q + (bos * H + i_h) * K + o_k
    p_k = k + (bos * H + i_h) * K + o_k
    p_w = w + (bos * H + i_h) * K + o_k
    p_v = v + (bos * H + i_h) * V + o_v
    p_o = o + (bos * H + i_h) * V + o_v
    p_beta = beta + bos * H + i_h
    p_g = g + (bos * H + i_h) * (K if GATE == 2 else 1) + (o_k if GATE == 2 else 0)

    # [BK, BV] state tile, float32
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_H0:
        p_h0 = h0 + i_nh.to(tl.int64) * K * V + o_k[:, None] * V + o_v[None, :]
        b_h += tl.load(p_h0, mask=m_h, other=0).to(tl.float32)

    for _ in range(0, T):
        # [BK], [BK], [BV]
        b_q = tl.load(p_q, mask=m_k, other=0).to(tl.float32) * scale
        b_k = tl.load(p_k, mask=m_k, other=0).to(tl.float32)
        b_v = tl.load(p_v, mask=m_v, other=0).to(tl.float32)
        if GATE == 1:
            b_h *= tl.exp(tl.load(p_g).to(tl.float32))
        if GATE == 2:
            b_h *= tl.exp(tl.load(p_g, mask=m_k, other=0).to(tl.float32))[:, None]
        if ERASE:
            # [BK, BV] * [BK, 1] summed over K -> [BV]: the state's prediction Sᵀk
            b_v -= tl.sum(b_h * b_k[:, None], axis=0)
        if USE_BETA:
            b_v *= tl.load(p_beta).to(tl.float32)
        if KACZMARZ:
            # [BK] -> scalar ‖k_t‖² (masked columns are 0)
            b_v *= kaczmarz_reciprocal(tl.sum(b_k * b_k), eps)
        if USE_W:
            b_k = tl.load(p_w, mask=m_k, other=0).to(tl.float32)
        # rank-one write [BK, 1] x [1, BV]
        b_h += b_k[:, None] * b_v[None, :]
        # [BK, BV] * [BK, 1] summed over K -> [BV]
        b_o = tl.sum(b_h * b_q[:, None], axis=0)
        tl.store(p_o, b_o.to(p_o.dtype.element_ty), mask=m_v)

        p_q += H * K
        p_k += H * K
        p_w += H * K
        p_v += H * V
        p_o += H * V
        p_beta += H
        p_g += H * (K if GATE == 2 else 1)

    if STORE_HT:
        p_ht = ht + i_nh.to(tl.int64) * K * V + o_k[:, None] * V + o_v[None, :]
        tl.store(p_ht, b_h, mask=m_h)


def fused_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    w: torch.Tensor | None = None,
    beta: torch.Tensor | None = None,
    g: torch.Tensor | None = None,
    erase: bool = True,
    kaczmarz_eps: float | None = None,
    scale: float,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The ops' `backend="fused_recurrent"`: decoding only, so no gradient and no float64. Shapes as `delta_rule`
    (`g` may also be per channel, `[B, T, H, K]`); the caller has validated them. Returns `o` in v's dtype and the
    float32 final state `[N, H, K, V]` (or None). `kaczmarz_eps` (with `erase`): the step is
    `β_t = beta_t / (‖k_t‖² + kaczmarz_eps)` (KLA), `beta` None meaning 1."""
    check_decode_inputs("q, k, v", q, (q, k, v, w, beta, g, initial_state))
    B, T, H, K = k.shape
    V = v.shape[-1]
    N = B if cu_seqlens is None else cu_seqlens.numel() - 1
    if kaczmarz_eps is not None and not erase:
        raise ValueError("fused_recurrent: the Kaczmarz step (kaczmarz_eps) needs the erase term")
    if K > 256 or V > 256:
        raise ValueError(f"fused_recurrent: head dims up to 256 are supported, got K={K}, V={V}")
    q, k, v = (x.contiguous() for x in (q, k, v))
    o = torch.empty_like(v)
    ht = torch.empty(N, H, K, V, dtype=torch.float32, device=q.device) if output_final_state else None
    BK = next_power_of_2(K)
    BV = min(next_power_of_2(V), max(16, 4096 // BK))  # keep the [BK, BV] tile at ≤ 4096 floats
    gate = 0 if g is None else (2 if g.dim() == 4 else 1)
    dummy = o  # stands in for the absent optional tensors (never read: their flags are off)
    grid = (cdiv(V, BV), N * H)
    fused_recurrent_fwd_kernel[grid](
        q, k, v,
        dummy if w is None else w.contiguous(),
        dummy if beta is None else beta.contiguous(),
        dummy if g is None else g.contiguous(),
        o,
        dummy if initial_state is None else initial_state.contiguous(),
        dummy if ht is None else ht,
        cu_seqlens,
        scale, 0.0 if kaczmarz_eps is None else float(kaczmarz_eps), T,
        H=H, K=K, V=V, BK=BK, BV=BV,
        ERASE=erase, USE_W=w is not None, USE_BETA=beta is not None, KACZMARZ=kaczmarz_eps is not None, GATE=gate,
        USE_H0=initial_state is not None, STORE_HT=ht is not None, IS_VARLEN=cu_seqlens is not None,
    )  # fmt: skip
    return o, ht
