"""KLA's step size: the Kaczmarz projection step of the delta rule."""

from __future__ import annotations

import torch

from linattn.ops.checks import check_float, check_shape


def kaczmarz_beta(k: torch.Tensor, eta: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """`β_t = η_t / (‖k_t‖² + ε)`: with `η = 1, ε = 0` the write projects the state exactly onto `Sᵀk_t = v_t`.

    Then `I − β_t k_t k_tᵀ = I − η_t k̂_t k̂_tᵀ` is a contraction for any key norm when `η_t ∈ (0, 1]`.

    Args:
        k: raw (not normalised) keys `[B, T, H, K]`.
        eta: relaxation `[B, T, H]`, typically `σ(W_β x + b)`.
        eps: stabiliser for near-zero keys.
    Returns:
        β `[B, T, H]` in eta's dtype, to pass as `delta_rule(..., beta=β)`.

    Example:
        >>> k = torch.randn(1, 10, 2, 16) * 3
        >>> beta = kaczmarz_beta(k, torch.sigmoid(torch.randn(1, 10, 2)))
    """
    check_float("k", k)
    if k.dim() != 4:
        raise ValueError(f"k: expected a 4-D tensor [B, T, H, K], got shape {list(k.shape)}")
    check_shape("eta", eta, tuple(k.shape[:3]), "[B, T, H]")
    if eps < 0:
        raise ValueError(f"eps: expected a value >= 0, got {eps}")
    sq_norm = k.float().pow(2).sum(-1) if k.dtype != torch.float64 else k.pow(2).sum(-1)
    return (eta / (sq_norm + eps)).to(eta.dtype)
