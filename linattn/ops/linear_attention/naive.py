"""Gated linear attention, token by token: the definition every other backend is checked against."""

from __future__ import annotations

import torch

from linattn.ops.checks import compute_dtype


def naive_gated_linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor | None,
    initial_state: torch.Tensor | None,
    *,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`S_t = exp(g_t) ⊙ S_{t-1} + k_t v_tᵀ`,  `o_t = scale · S_tᵀ q_t`.

    Args:
        q, k: `[B, T, H, K]`.  v: `[B, T, H, V]`.
        g: None (no decay), `[B, T, H]` (scalar log-decay) or `[B, T, H, K]` (per key channel).
        initial_state: `[B, H, K, V]` or None (zeros).
    Returns:
        o: `[B, T, H, V]` and the final state `[B, H, K, V]`, both in the compute dtype (float32/float64).
    """
    dt = compute_dtype(q)
    q, k, v = (x.to(dt) for x in (q, k, v))
    B, T, H, K = q.shape
    V = v.shape[-1]
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(dt)
    outputs = []
    for t in range(T):
        if g is not None:
            decay = g[:, t].to(dt).exp()  # [B, H] or [B, H, K]
            S = S * (decay[..., None, None] if decay.dim() == 2 else decay[..., None])
        S = S + k[:, t, :, :, None] * v[:, t, :, None, :]
        outputs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))
    return torch.stack(outputs, dim=1) * scale, S
