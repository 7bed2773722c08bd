"""VLA's float32 gate from an ill-conditioned start (large `‖u‖² / λ0`): the chunked gates' float64 head keeps them
within 2× the float32 token loop's error, gradients included, and runs only where it is needed."""

from __future__ import annotations

import pytest
import torch

from linattn.ops import vla, vla_gate
from linattn.ops.vla.api import GATES
from linattn.ops.vla.naive import naive_vla_gate
from tests.ops.cases import rel_err


def draw(T: int, K: int, norm: float, seed: int = 0, H: int = 2) -> tuple[torch.Tensor, ...]:
    """`(q, k, v, u)` in float64, already rounded to float32; every `u` of norm `norm`."""
    g = torch.Generator().manual_seed(seed)
    q, k, v, u = torch.randn(4, 1, T, H, K, dtype=torch.float64, generator=g).unbind()
    u = u / u.norm(dim=-1, keepdim=True) * norm
    return tuple(x.float().double() for x in (q, k, v, u))


def alpha_error(backend: str, k, u, lam0: float, **kwargs) -> float:
    want, _ = naive_vla_gate(k, u, kwargs.get("initial_state"), lam0=lam0)
    extra = {n: x.float() for n, x in kwargs.items()}
    got, _ = vla_gate(k.float(), u.float(), lam0=lam0, backend=backend, **extra)
    return (got.double() - want).norm(dim=-1).max().item()


@pytest.mark.parametrize("K", [7, 16])
@pytest.mark.parametrize(("r", "lam0"), [(1e2, 0.1), (1e4, 0.1), (1e6, 0.1), (1e6 / 16, 1e-6)])
@pytest.mark.parametrize("backend", ["chunk", "triton"])
def test_the_chunked_gates_stay_within_twice_the_token_loops_error(backend, r, lam0, K):
    """Without the head the chunk gate was 10 – 25× the token loop's error here (0.35 against 0.015 at
    `‖u‖² / λ0 = 6·10⁵`, K = 16)."""
    _, k, _, u = draw(80, K, (r * lam0) ** 0.5)
    loop = alpha_error("naive", k, u, lam0)
    assert alpha_error(backend, k, u, lam0) <= 2 * max(loop, 5e-7)


def test_an_initial_state_far_from_the_data_is_conditioned_as_lam0_is():
    """`A_0 = I / 10⁻⁵` given as a state behaves as `λ0 = 10⁻⁵` (its row sums bound `λmax(A_0)`)."""
    _, k, _, u = draw(80, 16, 0.25)
    A0 = torch.eye(16, dtype=torch.float64).expand(1, 2, 16, 16) / 1e-5
    loop = alpha_error("naive", k, u, 0.1, initial_state=A0)
    assert alpha_error("chunk", k, u, 0.1, initial_state=A0) <= 2 * max(loop, 5e-7)


def test_packed_sequences_each_get_their_head():
    _, k, _, u = draw(150, 8, 3.0)
    cu = torch.tensor([0, 40, 150])
    want = torch.cat([naive_vla_gate(k[:, a:b], u[:, a:b], None, lam0=0.1)[0] for a, b in ((0, 40), (40, 150))], 1)
    loop, _ = vla_gate(k.float(), u.float(), lam0=0.1, cu_seqlens=cu, backend="naive")
    got, _ = vla_gate(k.float(), u.float(), lam0=0.1, cu_seqlens=cu, backend="chunk")
    assert (got.double() - want).norm(dim=-1).max() <= 2 * max((loop.double() - want).norm(dim=-1).max(), 5e-7)


@pytest.mark.parametrize("backend", ["chunk", "triton"])
def test_gradients_through_the_head(backend):
    """At `‖u‖² / λ0 = 10⁴` the float32 token loop's gradients are 3e-4 – 3e-3 off float64; the head's path 1e-6."""
    q, k, v, u = draw(100, 16, 10.0)
    w = torch.randn(1, 100, 2, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1))

    def grads(backend, dtype):
        xs = [x.to(dtype).requires_grad_() for x in (q, k, v, u)]
        o, _ = vla(*xs, lam0=0.01, backend=backend)
        (o.double() * w).sum().backward()
        return [x.grad.double() for x in xs]

    for got, want in zip(grads(backend, torch.float32), grads("naive", torch.float64)):
        assert rel_err(got, want) < 1e-5


def test_the_head_runs_only_above_its_condition():
    """At `‖u‖² / λ0 ≤ CONDITION` (the layer's `1 / (K λ0)` at its defaults) the gate is the backend's own."""
    for r, headed in ((0.5, False), (2.0, True)):
        _, k, _, u = draw(80, 16, (r * 0.1) ** 0.5)
        own, _ = GATES["chunk"](k.float(), u.float(), None, lam0=0.1)
        got, _ = vla_gate(k.float(), u.float(), lam0=0.1, backend="chunk")
        assert torch.equal(got, own) != headed


def test_a_known_bound_on_u_decides_without_reading_u():
    """`max_u_norm` stands for `max ‖u_t‖` (the layer's `K^-½`): the gate decides from it and `λ0` alone, so the
    same u runs headed or not as the bound says; without an initial state u is never read for the test."""
    from linattn.ops.vla.head import condition

    _, k, _, u = draw(80, 16, (2.0 * 0.1) ** 0.5)  # r = 2: headed when the op looks at u
    own, _ = GATES["chunk"](k.float(), u.float(), None, lam0=0.1)
    small, _ = vla_gate(k.float(), u.float(), lam0=0.1, backend="chunk", max_u_norm=0.1)  # r = 0.1: no head
    assert torch.equal(small, own)
    large, _ = vla_gate(k.float(), u.float(), lam0=0.1, backend="chunk", max_u_norm=(2.0 * 0.1) ** 0.5)
    assert not torch.equal(large, own)
    # u's values are not read (NaN would show): the test is the bound's and λ0's alone
    assert condition(torch.full_like(u, float("nan")), None, 0.1, max_u_norm=0.5) == pytest.approx(2.5)
    for bad in (0, -1.0, float("inf"), True, "1"):
        with pytest.raises(ValueError, match="max_u_norm: expected None or a finite number > 0"):
            vla_gate(k.float(), u.float(), max_u_norm=bad)


def test_the_layer_gives_its_u_norm(monkeypatch):
    """The VLA layer's `u = normalize(W_u k) / √d` has norm `d^-½`, which it passes as the bound."""
    import importlib

    from linattn.layers import build_layer

    module = importlib.import_module("linattn.layers.vla")
    seen, original = [], module.vla
    monkeypatch.setattr(module, "vla", lambda *a, **kw: seen.append(kw["max_u_norm"]) or original(*a, **kw))
    build_layer("vla", 32, 2)(torch.randn(1, 5, 32))
    assert seen == [16**-0.5]
