"""KLA's step size: the Kaczmarz projection step of the delta rule."""

from __future__ import annotations

import torch

from linattn.ops.checks import check_float, check_shape


def kaczmarz_beta(k: torch.Tensor, eta: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """`β_t = η_t / (‖k_t‖² + ε)`: with `η = 1, ε = 0` the write projects the state exactly onto `Sᵀk_t = v_t`.
    Where `‖k_t‖² + ε = 0` (a zero key with `ε = 0`) `β_t = 0`: there is nothing to project onto; so too where
    `1 / (‖k_t‖² + ε)` is not finite (a key below `‖k‖ ≈ 10⁻¹⁹` in float32 with `ε = 0`).

    Then `I − β_t k_t k_tᵀ = I − η_t k̂_t k̂_tᵀ` is a contraction for any key norm when `η_t ∈ (0, 1]`.
    To train KLA, prefer `delta_rule(q, k, v, beta=eta, kaczmarz_eps=eps)`: the same step, computed inside the
    backend (the Triton kernels take it from the key rows they load, with no pass over `k` of its own).

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
    check_shape("eta", eta, tuple(k.shape[:3]), "[B, T, H]", k.device, "k")
    check_kaczmarz_eps("eps", eps)
    return kaczmarz_step(k, eta, eps).to(eta.dtype)


def kaczmarz_step(k: torch.Tensor, eta: torch.Tensor | None, eps: float) -> torch.Tensor:
    """`η / (‖k‖² + ε)` on validated inputs (`eta` None means 1), in float64 for float64 keys, else float32."""
    dt = torch.float64 if k.dtype == torch.float64 else torch.float32
    denominator = k.to(dt).pow(2).sum(-1) + eps  # [B, T, H]
    if k.device.type == "cpu" and bool(torch.isinf(denominator).any()):  # as `checks.check_log_decay`: CPU only
        raise ValueError(
            f"k: the Kaczmarz step needs ‖k‖² finite in {str(dt).removeprefix('torch.')}, got a key of norm "
            f"{torch.linalg.vector_norm(k.double(), dim=-1).max().item():.3g} (scale the keys down)"
        )
    # a zero key with ε = 0 has nothing to project onto: β = 0, no write (as the key itself writes nothing); so does
    # a key too small for 1 / ‖k‖² to be finite (‖k‖ ≲ 1e-19 in float32)
    # (the Triton kernels' twin of these lines: `triton/kaczmarz.py`'s `kaczmarz_reciprocal`)
    invertible = denominator > 1 / torch.finfo(dt).max  # the masked denominators must not reach autograd either
    r = torch.where(invertible, 1.0 / torch.where(invertible, denominator, 1.0), 0.0)
    return r if eta is None else eta.to(dt) * r


def check_kaczmarz_eps(name: str, eps: object) -> None:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise ValueError(f"{name}: expected a number >= 0, got {eps!r}")
