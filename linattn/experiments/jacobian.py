"""The Jacobian of VLA's state update, `J_t = ∂S_t/∂S_{t-1} = I − α̂_t k̂_tᵀ`, and products of it over windows.

The paper's Proposition 2 says `‖J_t‖₂ = 1` for unit `α̂_t, k̂_t`. That holds only when `α̂_t = k̂_t`. For unit
vectors with `c = α̂ᵀk̂`, `J` acts as the identity off `span{α̂, k̂}`; on it, in the orthonormal basis
`(k̂, (α̂ − c k̂)/s)` with `s = √(1 − c²)`, it is `[[1 − c, 0], [−s, 1]]`. For `α = r α̂` (not normalised) the same
basis gives `[[1 − r c, 0], [−r s, 1]]`, whose largest singular value is

    σ² = (τ + √(τ² − 4 δ²)) / 2,   τ = r² − 2 r c + 2,   δ = 1 − r c

so `σ = 1` at `r = 1, c = 1`, `(1 + √5)/2` at `c = 0`, and it grows like `r` when `α` is not normalised. The
eigenvalues of `J` are `1` and `1 − r c`: in `[0, 1]` for unit vectors with `c ≥ 0`, but `J` is not normal, so its
norm can exceed its spectral radius, and products over many steps are what decide gradient flow.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rank_one_update_norm(alpha: torch.Tensor, k_hat: torch.Tensor) -> torch.Tensor:
    """`‖I − α k̂ᵀ‖₂` for `alpha: [..., d]` (any norm) and unit `k_hat: [..., d]`, in closed form: `[...]`."""
    r = alpha.norm(dim=-1)
    c = (F.normalize(alpha, dim=-1) * k_hat).sum(-1).clamp(-1, 1)
    tau = r * r - 2 * r * c + 2
    delta = 1 - r * c
    return ((tau + (tau * tau - 4 * delta * delta).clamp_min(0).sqrt()) / 2).sqrt()


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`cos(a, b)` along the last dim."""
    return (F.normalize(a, dim=-1) * F.normalize(b, dim=-1)).sum(-1)


def window_product_norms(
    alpha: torch.Tensor, k_hat: torch.Tensor, window: int, *, stride: int | None = None
) -> torch.Tensor:
    """`‖J_{t+w−1} ⋯ J_t‖₂` for windows of `window` consecutive steps of one head (`alpha, k_hat: [T, d]`), starting
    every `stride` steps (default: non-overlapping). Returns `[number of windows]`, float64."""
    T, d = alpha.shape
    if not 1 <= window <= T:
        raise ValueError(f"window: expected 1 <= window <= T = {T}, got {window}")
    alpha, k_hat = alpha.double(), k_hat.double()
    eye = torch.eye(d, dtype=torch.float64, device=alpha.device)
    norms = []
    for start in range(0, T - window + 1, stride or window):
        P = eye
        for t in range(start, start + window):
            P = P - alpha[t][:, None] @ (k_hat[t][None, :] @ P)  # (I − α kᵀ) P without forming J
        norms.append(torch.linalg.matrix_norm(P, ord=2))
    return torch.stack(norms)
