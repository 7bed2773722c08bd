"""VLA's write gate, token by token (Sherman–Morrison): the definition the chunk gate is checked against."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from linattn.ops.checks import compute_dtype
from linattn.ops.vla.forgetting import check_wind_up


def naive_vla_gate(
    k: torch.Tensor,
    u: torch.Tensor,
    initial_state: torch.Tensor | None,
    *,
    lam0: float,
    rho: float = 1.0,
    unit_keys: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`A_t = (A_{t-1} − z_t z_tᵀ / (ρ + u_tᵀ z_t)) / ρ` with `z_t = A_{t-1} u_t`;  `α̂_t = A_t k̂_t / ‖A_t k̂_t‖`.

    `A_t = M_t⁻¹` with `M_t = ρ M_{t-1} + u_t u_tᵀ`, `M_0 = λ0 I` (`ρ = 1`: `λ0 I + Σ_{s≤t} u_s u_sᵀ`) is the inverse
    penalty of VLA's online least squares, kept exactly by rank-one Sherman–Morrison updates. The denominator is
    `≥ ρ > 0` because `A_{t-1}` is positive definite, so no clamp is needed.

    Args:
        k: keys `[B, T, H, K]` (normalised here: `k̂ = k / ‖k‖`).  u: penalty directions `[B, T, H, K]`.
        initial_state: `A_0: [B, H, K, K]`, symmetric positive definite (its gradient is symmetric), or None
            (`I / λ0`).
        rho: forgetting factor `0 < ρ ≤ 1`.
        unit_keys: `k` is already normalised (as `vla` passes it).
    Returns:
        α̂ `[B, T, H, K]` and the final `A_T: [B, H, K, K]`, both in the compute dtype.
    """
    dt = compute_dtype(k)
    B, T, H, K = k.shape
    k_hat = k.to(dt) if unit_keys else F.normalize(k.to(dt), dim=-1)
    u = u.to(dt)
    if initial_state is None:
        A = torch.eye(K, dtype=dt, device=k.device).expand(B, H, K, K) / lam0
    else:
        # A_0 is symmetric: read through its symmetric part, so that its gradient is the symmetric one every
        # backend returns (an optimiser step keeps it symmetric); the value is unchanged
        A = initial_state.to(dt)
        A = 0.5 * (A + A.transpose(-1, -2))
    alphas = []
    for t in range(T):
        z = torch.einsum("bhij,bhj->bhi", A, u[:, t])  # [B, H, K]
        denom = rho + (u[:, t] * z).sum(-1)  # [B, H]
        A = (A - z[..., :, None] * z[..., None, :] / denom[..., None, None]) / rho
        alphas.append(F.normalize(torch.einsum("bhij,bhj->bhi", A, k_hat[:, t]), dim=-1))
    if rho < 1:
        check_wind_up(A, rho, lam0, T)
    return torch.stack(alphas, dim=1), A
