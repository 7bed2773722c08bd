"""VLA's gate for decoding: a few tokens on top of a carried `A`, one launch (`backend="fused_recurrent"`).

One program per sequence-head holds `A: [K, K]` in registers and walks the tokens in order, the token loop's
Sherman–Morrison step with the forgetting factor `ρ` (`../naive.py`):

    k̂_t = k_t / max(‖k_t‖, ε);   z_t = A u_t;   A ← (A − z_t z_tᵀ / (ρ + u_tᵀ z_t)) / ρ;   α̂_t = A k̂_t / max(‖A k̂_t‖, ε)

and writes `k̂_t`, `α̂_t` (float32) for the delta rule's decode kernel (`w = α̂`), and the final `A`. The work per token
is `O(K²)`, whatever the context; `A` is read and written once a launch. Forward only: decoding needs no gradient.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.unit_rows.pytorch import EPS
from linattn.ops.utils.grid import next_power_of_2
from linattn.ops.utils.inputs import check_decode_inputs


@triton.jit
def vla_gate_step_kernel(
    k,
    u,
    k_hat,
    alpha_hat,
    a0,
    at,
    cu_seqlens,
    lam0,
    rho,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    BK: tl.constexpr,
    EPS_: tl.constexpr,
    USE_A0: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    i_nh = tl.program_id(0)
    i_n, i_h = i_nh // H, i_nh % H
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        T = tl.load(cu_seqlens + i_n + 1).to(tl.int64) - bos
    else:
        bos = i_n.to(tl.int64) * T
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    m_a = m_k[:, None] & m_k[None, :]
    o_a = i_nh.to(tl.int64) * K * K + o_k[:, None] * K + o_k[None, :]

    # [BK, BK] inverse penalty, float32 (zero outside K × K)
    if USE_A0:
        b_a = tl.load(a0 + o_a, mask=m_a, other=0).to(tl.float32)
    else:
        b_a = tl.where((o_k[:, None] == o_k[None, :]) & m_a, 1.0 / lam0, 0.0)
    p = (bos * H + i_h) * K + o_k  # token 0's row of this head; a token step is H * K
    for _ in range(0, T):
        # [BK] rows
        b_k = tl.load(k + p, mask=m_k, other=0).to(tl.float32)
        b_u = tl.load(u + p, mask=m_k, other=0).to(tl.float32)
        b_k = b_k / tl.maximum(tl.sqrt(tl.sum(b_k * b_k)), EPS_)
        # [BK, BK] · [1, BK] summed over columns -> [BK]: z = A u (A symmetric)
        b_z = tl.sum(b_a * b_u[None, :], axis=1)
        b_a = (b_a - b_z[:, None] * b_z[None, :] / (rho + tl.sum(b_u * b_z))) / rho
        # [BK]: A k̂, normalised
        b_w = tl.sum(b_a * b_k[None, :], axis=1)
        b_w = b_w / tl.maximum(tl.sqrt(tl.sum(b_w * b_w)), EPS_)
        tl.store(k_hat + p, b_k, mask=m_k)
        tl.store(alpha_hat + p, b_w, mask=m_k)
        p += H * K
    tl.store(at + o_a, b_a, mask=m_a)


def fused_recurrent_vla_gate(
    k: torch.Tensor,
    u: torch.Tensor,
    initial_state: torch.Tensor | None,
    *,
    lam0: float,
    rho: float = 1.0,
    cu_seqlens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`(k, u, A_0) -> (k̂, α̂, A_T)`, `k̂`, `α̂: [B, T, H, K]` float32, `A_T: [N, H, K, K]` float32; decoding only (no
    gradient, no float64), head dims up to 128, packed sequences in the one launch. The caller has validated the
    shapes."""
    check_decode_inputs("k, u", k, (k, u, initial_state))
    B, T, H, K = k.shape
    if K > 128:
        raise ValueError(f"fused_recurrent: VLA's head dims up to 128 are supported, got K={K}")
    N = B if cu_seqlens is None else cu_seqlens.numel() - 1
    k, u = k.contiguous(), u.contiguous()
    k_hat = torch.empty(B, T, H, K, dtype=torch.float32, device=k.device)
    alpha_hat = torch.empty_like(k_hat)
    A = torch.empty(N, H, K, K, dtype=torch.float32, device=k.device)
    BK = next_power_of_2(K)
    vla_gate_step_kernel[(N * H,)](
        k, u, k_hat, alpha_hat, A if initial_state is None else initial_state.contiguous(), A, cu_seqlens,
        float(lam0), float(rho), T, H=H, K=K, BK=BK, EPS_=EPS, USE_A0=initial_state is not None,
        IS_VARLEN=cu_seqlens is not None, num_warps=8 if BK >= 128 else 4,
    )  # fmt: skip
    return k_hat, alpha_hat, A
