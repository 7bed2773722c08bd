"""VLA's gate with a forgetting factor `ρ` on a gate without one, exactly, by rescaling `u` within segments.

With `M_t = ρ M_{t-1} + u_t u_tᵀ` (`0 < ρ ≤ 1`; `M_0 = λ0 I` or `A_0⁻¹`), from a segment's start `t0`:
```
M_t = ρ^{t−t0} (M_{t0} + Σ_{t0<s≤t} ũ_s ũ_sᵀ),        ũ_s = ρ^{−(s−t0)/2} u_s
A_t = M_t⁻¹ = ρ^{−(t−t0)} Ã_t,                        Ã_t: the gate without forgetting, run on ũ from A_{t0}
```
so `α̂_t = A_t k̂_t / ‖A_t k̂_t‖ = Ã_t k̂_t / ‖Ã_t k̂_t‖`: the gate's own `α̂` on `ũ`, and the segment's final `A` is
`ρ^{−(t1−t0)} Ã_{t1}`, which starts the next segment. `M̃_t = ρ^{−(t−t0)} M_t` is a multiple of the true penalty, so
its conditioning is the true one's. A segment is as long as keeps `ρ^{−(t1−t0)}` within `e^{2 · MAX_LOG_SCALE}`
(`segment_length`): `Ã` shrinks by that factor along a segment, and `Ã k̂` must stay far above the `10⁻¹²` under
which the gates' normalisation clamps (for `u` of norm `1/√d`, `A ≈ d²(1 − ρ) I`: about 10 at d = 32, `ρ = 0.99`,
which `e^{−32}` takes there).

With `ρ < 1`, directions that `u` stops visiting lose their penalty (`M → 0` there) and `A` grows as `ρ^{−t}` in
them: least squares with forgetting "winds up" (as adaptive filtering knows it). A window `1 / (1 − ρ)` of tokens
not well above the head dim leaves `M` ill-conditioned whatever the algorithm: float32 loses `α̂`, and the `A` carried
between segments can stop being positive definite (an error naming `rho` then). The PyTorch path's chunks are capped
by `max_chunk` (inside a chunk the Woodbury downdate cancels by up to `ρ^{−C}`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from linattn.ops.checks import compute_dtype

MAX_LOG_SCALE = 8.0  # ũ ≤ e^8 |u| within a segment: M̃ ≤ e^16 M, Ã ≥ e^-16 A
ALIGN = 64  # segments in whole multiples of the chunk gates' chunks

Gate = Callable[..., tuple[torch.Tensor, torch.Tensor]]


def max_chunk(rho: float) -> int:
    """The longest chunk, a power of two up to 128, with `ρ^{−C} ≤ e²`: inside a chunk the Woodbury downdate
    `A_c − Σ w wᵀ` cancels by up to `ρ^{−C}` (`Ã` shrinks by that much along it), costing float32 that many digits."""
    C = 128
    while C > 1 and C * -math.log(rho) > 2:
        C //= 2
    return C


def segment_length(rho: float) -> int:
    """Tokens a segment spans at forgetting factor `rho < 1`: the most with `ρ^{−L} ≤ e^{2 · MAX_LOG_SCALE}`, in
    whole multiples of 64 where that is at least 64 (1,536 at `ρ = 0.99`, 128 at `ρ = 0.9`, 6 at `ρ = 0.1`)."""
    longest = max(1, int(2 * MAX_LOG_SCALE / -math.log(rho)))
    return longest if longest < ALIGN else ALIGN * (longest // ALIGN)


def forgetting_gate(
    gate: Gate, k: torch.Tensor, u: torch.Tensor, initial_state: torch.Tensor | None, *, lam0: float, rho: float,
    unit_keys: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """`gate`'s contract (`naive_vla_gate`'s) with `M_t = ρ M_{t-1} + u_t u_tᵀ`: `gate`, which has no forgetting
    factor, runs once a segment on the rescaled `ũ` (the module docstring), each from the last one's `A`. `ũ` is
    kept in the compute dtype (float32, or float64 for float64 inputs)."""
    T = k.shape[1]
    L = segment_length(rho)
    dt = compute_dtype(u)
    alphas, A = [], initial_state
    for t0 in range(0, T, L):
        n = min(L, T - t0)
        # [n] factors ρ^{−(s−t0)/2}, s = t0 + 1 … t0 + n
        grow = torch.arange(1, n + 1, dtype=dt, device=u.device).mul_(-0.5 * math.log(rho)).exp_()
        u_tilde = u[:, t0 : t0 + n].to(dt) * grow[:, None, None]
        try:
            alpha, A_tilde = gate(k[:, t0 : t0 + n], u_tilde, A, lam0=lam0, unit_keys=unit_keys)
        except ValueError as e:  # the gate's check of its initial A: ours from the second segment on
            if t0 == 0:
                raise
            raise ValueError(
                f"rho: the inverse penalty A carried to token {t0} is no longer positive definite in {dt}: with "
                f"rho = {rho}, a window of 1 / (1 - rho) = {1 / (1 - rho):.0f} tokens against head dim {k.shape[-1]} "
                "leaves the penalty M too ill-conditioned for it; use a rho closer to 1 (or float64)"
            ) from e
        alphas.append(alpha)
        A = A_tilde * rho**-n
        check_wind_up(A, rho, lam0, t0 + n)
    return torch.cat(alphas, dim=1), A


def check_wind_up(A: torch.Tensor, rho: float, lam0: float, t: int) -> None:
    """A ValueError naming `rho` once `A` has left its dtype's range by token `t`: along directions `u` has not
    visited, `A` grows as `ρ^{−t} / λ0`, past float32's `3.4e38` from `t ≈ ln(3.4e38 λ0) / −ln ρ` (8,600 tokens at
    `ρ = 0.99, λ0 = 0.1`). The state cannot be represented then; the outputs would be NaN."""
    if A.is_meta or bool(torch.isfinite(A).all()):  # a meta tensor has no values to check
        return
    horizon = math.log(torch.finfo(A.dtype).max * lam0) / -math.log(rho)
    raise ValueError(
        f"rho: the inverse penalty A overflows {str(A.dtype).removeprefix('torch.')} by token {t}: with rho = {rho}, "
        f"directions that u does not visit wind up as rho^-t / lam0, out of range from t ≈ {horizon:.0f}; keep u "
        "visiting every direction (persistent excitation), or use a rho closer to 1 (or float64)"
    )
