"""The two-key gated delta rule, token by token: the definition every other backend is checked against."""

from __future__ import annotations

import torch

from linattn.ops.checks import compute_dtype


def naive_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor | None,
    beta: torch.Tensor | None,
    g: torch.Tensor | None,
    initial_state: torch.Tensor | None,
    *,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`S_t = exp(g_t) (I − β_t w_t k_tᵀ) S_{t-1} + β_t w_t v_tᵀ`,  `o_t = scale · S_tᵀ q_t`.

    Written as the error-correcting write it is: decay, predict `S_{t-1}ᵀ k_t`, write
    `u_t = β_t (v_t − prediction)` along `w_t`.

    Args:
        q, k: `[B, T, H, K]`.  v: `[B, T, H, V]`.
        w: write direction `[B, T, H, K]`, None means `w = k`.
        beta: `[B, T, H]`, None means 1.  g: log-decay `[B, T, H]`, None means 0.
        initial_state: `[B, H, K, V]` or None (zeros).
    Returns:
        o: `[B, T, H, V]` and the final state `[B, H, K, V]`, both in the compute dtype.
    """
    dt = compute_dtype(q)
    q, k, v = (x.to(dt) for x in (q, k, v))
    w = k if w is None else w.to(dt)
    B, T, H, K = q.shape
    V = v.shape[-1]
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(dt)
    outputs = []
    for t in range(T):
        if g is not None:
            S = S * g[:, t].to(dt).exp()[..., None, None]
        u = v[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], S)  # [B, H, V]
        if beta is not None:
            u = u * beta[:, t].to(dt)[..., None]
        S = S + w[:, t, :, :, None] * u[:, :, None, :]
        outputs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))
    return torch.stack(outputs, dim=1) * scale, S
