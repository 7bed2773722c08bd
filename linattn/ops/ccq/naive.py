"""CCQ's query contraction, token by token: the definition the chunk backend is checked against."""

from __future__ import annotations

import torch

from linattn.ops.checks import compute_dtype


def naive_ccq_query(
    q: torch.Tensor,
    k: torch.Tensor,
    lam: torch.Tensor,
    g: torch.Tensor | None,
    initial_state: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
    *,
    centered: bool,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """`q'_t = q_t − λ_t Σ_t q_t` with the running (decayed) key covariance `Σ_t`.

    Running sums with weights `ω_ts = exp(g_{s+1} + … + g_t)` (1 without decay):
    `C_t = Σ ω_ts k_s k_sᵀ`, `m_t = Σ ω_ts k_s`, `Z_t = Σ ω_ts`; then
    `Σ_t = C_t / Z_t − μ_t μ_tᵀ` with `μ_t = m_t / Z_t` (centred) or `Σ_t = C_t / Z_t` (not centred).

    Args:
        q, k: `[B, T, H, K]` (keys already normalised if the caller wants that).  lam: `[B, T, H]`.
        g: log-decay `[B, T, H]` or None.
        initial_state: `(C: [B, H, K, K], m: [B, H, K], Z: [B, H])` or None (zeros).
    Returns:
        q' `[B, T, H, K]` and the final `(C, m, Z)`, in the compute dtype.
    """
    dt = compute_dtype(q)
    q, k, lam = (x.to(dt) for x in (q, k, lam))
    B, T, H, K = q.shape
    if initial_state is None:
        C, m, Z = q.new_zeros(B, H, K, K), q.new_zeros(B, H, K), q.new_zeros(B, H)
    else:
        C, m, Z = (x.to(dt) for x in initial_state)
    outputs = []
    for t in range(T):
        if g is not None:
            decay = g[:, t].to(dt).exp()  # [B, H]
            C, m, Z = C * decay[..., None, None], m * decay[..., None], Z * decay
        kt, qt = k[:, t], q[:, t]  # [B, H, K]
        C = C + kt[..., :, None] * kt[..., None, :]
        m, Z = m + kt, Z + 1
        sigma_q = torch.einsum("bhij,bhi->bhj", C, qt) / Z[..., None]  # C_tᵀ q_t (C_t is symmetric)
        if centered:
            mu = m / Z[..., None]
            sigma_q = sigma_q - mu * (mu * qt).sum(-1, keepdim=True)
        outputs.append(qt - lam[:, t, :, None] * sigma_q)
    return torch.stack(outputs, dim=1), (C, m, Z)
