"""VLA's gate from an ill-conditioned start: the first `4K` tokens in float64, the rest by the chosen backend.

From `A_0 = I / λ0`, the tokens that first visit a direction shrink `A` there by up to `‖u‖² / λ0`. A chunked gate
forms `A_t k̂_t` as `A_c k̂_t − Σ_{s≤t} w_s (w_sᵀ k̂_t)`, a difference of terms up to `‖u‖² λmax(A_c)` times larger
than the result, so float32 keeps about `ε · ‖u‖² λmax(A_0)` of it, and the downdates carry that relative error
along the whole group (`python -m linattn.bench gate --conditioning` with `CONDITION = inf` shows it).
Once `u` has spanned the space, `A` shrinks by about `(t + C) / t` a chunk and the chunked gate is as accurate as
the token loop. So when `r = max_t ‖u_t‖² · λmax(A_0)` exceeds `CONDITION`, the first `SPAN · K` tokens run in
float64 and the backend continues from their `A`. Data whose `u` keeps leaving directions unvisited stays
ill-conditioned for every algorithm (the README's domain).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from linattn.ops.checks import compute_dtype

# `r` above which the float64 head of SPAN · K tokens runs: with it, and below it without, the chunked float32 gates
# are within 2× the float32 token loop's error (`python -m linattn.bench gate --conditioning`)
CONDITION = 1.0
SPAN = 4  # with 2 · K the chunk after the head still loses accuracy (the same bench with SPAN = 2)

Gate = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], tuple[torch.Tensor, torch.Tensor]]


def condition(
    u: torch.Tensor, initial_state: torch.Tensor | None, lam0: float, max_u_norm: float | None = None
) -> float:
    """`r = max_t ‖u_t‖² · λmax(A_0)`, `λmax` bounded by `A_0`'s largest absolute row sum (Gershgorin); `max_u_norm`,
    a bound on `‖u_t‖` the caller knows, stands for the largest norm. Read on the host (a wait for the GPU, once per
    call) unless both factors are known there: `A_0 = I / λ0` and `max_u_norm` given (the VLA layer's training call)."""
    top = 1.0 / lam0 if initial_state is None else initial_state.detach().abs().sum(-1).amax()
    if max_u_norm is None:
        return float(u.detach().to(compute_dtype(u)).square().sum(-1).amax() * top)
    return float(max_u_norm**2 * top)


def headed_gate(
    gate: Gate,
    head: Gate,
    k: torch.Tensor,
    u: torch.Tensor,
    initial_state: torch.Tensor | None,
    *,
    lam0: float,
    max_u_norm: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`gate(k, u, A_0)` (`naive_vla_gate`'s contract), its first `SPAN · K` tokens by `head` in float64 where
    `condition(u, A_0, λ0, max_u_norm) > CONDITION` and the inputs are float32 or narrower."""
    T, d = k.shape[1], k.shape[-1]
    dt = compute_dtype(k)
    if dt == torch.float64 or T == 0 or u.is_meta or condition(u, initial_state, lam0, max_u_norm) <= CONDITION:
        return gate(k, u, initial_state)
    n = min(T, SPAN * d)
    s = None if initial_state is None else initial_state.double()
    alpha_head, A = head(k[:, :n].double(), u[:, :n].double(), s)
    alpha_head, A = alpha_head.to(dt), A.to(dt)  # the gates compute and return in dt (float32 for bf16 inputs)
    if n == T:
        return alpha_head, A
    alpha, A = gate(k[:, n:], u[:, n:], A)
    return torch.cat([alpha_head, alpha], dim=1), A
