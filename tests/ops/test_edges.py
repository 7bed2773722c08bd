"""Inputs at the edges of the ops' domain: a zero key with the exact Kaczmarz step, keys whose squared norm
overflows float32, on every backend (Triton's under the interpreter)."""

from __future__ import annotations

import pytest
import torch

from linattn.ops import ccq_query, delta_rule, kaczmarz_beta, vla
from tests.ops.cases import rel_err

B, T, H, K = 1, 20, 2, 16


def randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("backend", ["naive", "chunk", "triton", "fused_recurrent"])
def test_a_zero_key_with_the_exact_kaczmarz_step_writes_nothing(backend):
    """`ε = 0` and `k_t = 0`: `β_t = η/0` is defined as 0 (nothing to project onto), so the token leaves the state
    as it is, and output and gradients stay finite; so too for a key whose `1 / ‖k‖²` overflows float32."""
    q, k, v = randn(B, T, H, K, seed=1), randn(B, T, H, K, seed=2), randn(B, T, H, K, seed=3)
    eta = torch.rand(B, T, H, generator=torch.Generator().manual_seed(4))
    k[0, 3], k[0, 17, 1], k[0, 9, 0] = 0, 0, 1e-21  # the last: 1 / ‖k‖² overflows float32
    grad = backend != "fused_recurrent"  # a forward-only decode kernel
    leaves = [t.clone().requires_grad_(grad) for t in (q, k, v, eta)]
    o, S = delta_rule(*leaves[:3], beta=leaves[3], kaczmarz_eps=0.0, output_final_state=True, backend=backend)
    # the reference: the same tokens without the zero-key writes (β = 0 there) and the default step elsewhere
    beta = kaczmarz_beta(k.double(), eta.double(), eps=0.0)
    beta[0, 9, 0] = 0
    assert beta[0, 3].eq(0).all() and beta[0, 17, 1] == 0
    want, S_want = delta_rule(q.double(), k.double(), v.double(), beta=beta, output_final_state=True, backend="naive")
    assert rel_err(o, want) < 1e-5 and rel_err(S, S_want) < 1e-5
    if grad:
        (o.sum() + S.sum()).backward()
        assert all(torch.isfinite(t.grad).all() for t in leaves)


def test_the_kaczmarz_step_refuses_a_key_whose_square_overflows():
    q, k, v = randn(B, T, H, K, seed=1), randn(B, T, H, K, seed=2), randn(B, T, H, K, seed=3)
    k[0, 5, 0] *= 1e20
    with pytest.raises(ValueError, match=r"^k: the Kaczmarz step needs ‖k‖² finite in float32, got a key of norm"):
        delta_rule(q, k, v, kaczmarz_eps=1e-6)


@pytest.mark.parametrize("backend", ["naive", "chunk", "triton"])
def test_normalised_keys_of_any_finite_norm(backend):
    """VLA and CCQ read `k / ‖k‖`: the same for keys scaled by 1e25, whose squares overflow float32 (a plain norm
    is then inf and the unit key 0)."""
    q, k, v = randn(B, T, H, K, seed=1), randn(B, T, H, K, seed=2), randn(B, T, H, K, seed=3)
    u = randn(B, T, H, K, seed=4) / 4
    lam = torch.rand(B, T, H, generator=torch.Generator().manual_seed(5))
    for op in (lambda k: vla(q, k, v, u, backend=backend)[0], lambda k: ccq_query(q, k, lam, backend=backend)[0]):
        assert rel_err(op(k * 1e25), op(k)) < 1e-5


@pytest.mark.parametrize("backend", ["naive", "chunk", "triton"])
def test_vla_wind_up_is_an_error_not_nan(backend):
    """With `ρ < 1` and `u` that never leaves one direction, `A` grows as `ρ^{−t}/λ0` in the others and leaves
    float32 at `t ≈ 820` (`ρ = 0.9, λ0 = 0.1`): a ValueError naming `rho` on every backend, never NaN outputs."""
    T, K = 1000, 4
    q, k, v = randn(1, T, 1, K, seed=1), randn(1, T, 1, K, seed=2), randn(1, T, 1, K, seed=3)
    u = torch.zeros(1, T, 1, K)
    u[..., 0] = K**-0.5
    with pytest.raises(ValueError, match=r"^rho: the inverse penalty A overflows float32 by token \d+: .* t ≈ 820"):
        vla(q, k, v, u, rho=0.9, backend=backend)
