"""Forgetting without wind-up: the prior re-injected one coordinate a token (`refresh=True` with `ρ < 1`).

Plain forgetting, `M_t = ρ M_{t-1} + u_t u_tᵀ`, lets the penalty decay to zero along directions that `u` stops
visiting, so `A = M⁻¹` grows as `ρ^{−t}` there (`forgetting.py`). With refresh, each token also adds back one
coordinate of the prior, cycling through them with the token's position `n_t` in its sequence:
```
M_t = ρ M_{t-1} + c e_j e_jᵀ + u_t u_tᵀ,      j = n_t mod K,      c = √ρ λ0 (1 − ρ^K)
```
Coordinate `j` is topped up every `K` tokens and decays by `ρ^K` in between, so from `M_0 ⪰ √ρ λ0 I` (as `λ0 I`)
the prior part never falls below `λ0 ρ^{K−½}` in any direction: `A_t ⪯ ρ^{½−K} / λ0 · I` whatever `u` does (and
`u uᵀ` only adds to `M`). `c` makes each coordinate's prior return to `√ρ λ0` at each top-up (and fall to
`λ0 ρ^{K−½}` before the next); `ρ = 1` needs no refresh.

Each token's update is two rank-one ones, so every backend runs its gate unchanged on rows interleaved as
`(p_t, u_t)` with `p_t = √(λ0 (1 − ρ^K)) e_j` and forgetting factor `√ρ` per row:
`√ρ (√ρ M_{t-1} + p_t p_tᵀ) + u_t u_tᵀ` is the update above. The pseudo-rows carry a zero key (no write, `α̂ = 0`)
and their `α̂` is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from linattn.ops.checks import compute_dtype


def check_position(position: object, N: int, device: torch.device) -> torch.Tensor | int:
    """The position of each sequence's first token (the refresh's phase): an int `≥ 0`, or an integer tensor `[N]`
    (moved to the inputs' device; its values are not checked, which would wait for the GPU at every decoded token)."""
    if isinstance(position, int) and not isinstance(position, bool):
        if position < 0:
            raise ValueError(f"position: expected an int >= 0 or an integer tensor [N], got {position}")
        return position
    if not isinstance(position, torch.Tensor):
        raise TypeError(f"position: expected an int or an integer tensor [N], got {type(position).__name__}")
    if position.is_floating_point() or position.is_complex() or position.dtype == torch.bool:
        raise TypeError(f"position: expected an integer tensor, got dtype {position.dtype}")
    if tuple(position.shape) != (N,):
        raise ValueError(f"position: expected shape [N] = [{N}], got {list(position.shape)}")
    return position.to(device)


def positions(T: int, position: torch.Tensor | int, cu_seqlens: torch.Tensor | None, device) -> torch.Tensor:
    """`[T]` (`cu_seqlens` given, or an int `position`) or `[B, T]` long: each token's position in its sequence."""
    t = torch.arange(T, device=device)
    if cu_seqlens is not None:
        cu = cu_seqlens.to(device=device, dtype=torch.long)
        seq = torch.searchsorted(cu[1:], t, right=True)  # [T] the sequence of each token, no host wait
        return t - cu[seq] + (position if isinstance(position, int) else position.long()[seq])
    return t + (position if isinstance(position, int) else position.long()[:, None])


def pseudo_norm(lam0: float, rho: float, K: int) -> float:
    """`‖p_t‖ = √(λ0 (1 − ρ^K))`, below `√λ0`: the pseudo-rows never make the start ill-conditioned (`head.py`)."""
    return math.sqrt(lam0 * (1 - rho**K))


def interleave(
    k: torch.Tensor, u: torch.Tensor, *, lam0: float, rho: float, position, cu_seqlens: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, float, torch.Tensor | None]:
    """The gate's inputs with the refresh's pseudo-rows: `(k2, u2, √ρ, cu2)`, `k2, u2: [B, 2T, H, K]` with
    `u2[:, 2t] = p_t`, `u2[:, 2t + 1] = u_t`, `k2[:, 2t] = 0`, `k2[:, 2t + 1] = k_t`; `cu2 = 2 · cu_seqlens`."""
    B, T, H, K = u.shape
    n = positions(T, position, cu_seqlens, u.device)
    p = torch.nn.functional.one_hot(n % K, K).to(u.dtype) * pseudo_norm(lam0, rho, K)  # [B | 1, T, K]
    p = p.reshape(-1, T, 1, K).expand(B, T, H, K)
    u2 = torch.stack([p, u], dim=2).flatten(1, 2)
    k2 = torch.stack([torch.zeros_like(k), k], dim=2).flatten(1, 2)
    return k2, u2, math.sqrt(rho), (None if cu_seqlens is None else 2 * cu_seqlens)


def real_rows(x: torch.Tensor) -> torch.Tensor:
    """The rows of the real tokens (`interleave`'s odd rows), contiguous for the kernels that read them."""
    return x[:, 1::2].contiguous()


def _ill_conditioned(rho: float, K: int, dtype: torch.dtype) -> str:
    return (
        f"rho: with refresh=True the penalty's floor λ0·rho^(K−½) leaves M too ill-conditioned for {dtype} at rho = "
        f"{rho}, K = {K} (cond(M) up to about rho^(½−K) = {rho ** (0.5 - K):.1e} times 1 + ‖u‖²/(λ0 (1 − rho))); "
        "use a rho closer to 1 (a window 1 / (1 − rho) of at least K / 2 tokens), or float64"
    )


def run_gate(
    gate: Callable[..., tuple[torch.Tensor, ...]],
    k: torch.Tensor,
    u: torch.Tensor,
    *,
    lam0: float,
    rho: float,
    refresh: bool,
    position: torch.Tensor | int,
    cu_seqlens: torch.Tensor | None,
) -> tuple[torch.Tensor, ...]:
    """`gate(k, u, rho, cu_seqlens) -> (*rows, A)` (per-token outputs `[B, T, …]`, then the final `A`), with the
    refresh's pseudo-rows when `refresh` and `ρ < 1` (`gate` then runs on `interleave`'s rows at `√ρ`, and the real
    tokens' rows come back)."""
    if not refresh or rho == 1.0:
        return gate(k, u, rho, cu_seqlens)
    k2, u2, rho2, cu2 = interleave(k, u, lam0=lam0, rho=rho, position=position, cu_seqlens=cu_seqlens)
    try:
        *rows, A = gate(k2, u2, rho2, cu2)
    except ValueError as e:  # the interleaved rows' A no longer positive definite: said in the caller's terms
        raise ValueError(_ill_conditioned(rho, k.shape[-1], compute_dtype(u))) from e
    return (*map(real_rows, rows), A)
