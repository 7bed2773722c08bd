"""Bad input gets a clear error naming the argument (ValueError for shapes/values, TypeError for types)."""

from __future__ import annotations

import re

import pytest
import torch

from linattn.layers import build_layer
from linattn.ops import (
    ccq_query,
    delta_rule,
    gated_linear_attention,
    kaczmarz_beta,
    linear_attention,
    softmax_attention,
    vla,
    vla_gate,
)

B, T, H, K, V = 1, 10, 2, 8, 6


def qkv():
    return torch.randn(B, T, H, K), torch.randn(B, T, H, K), torch.randn(B, T, H, V)


def raises(exc, argument):
    """Expect `exc` whose message starts with the argument's name."""
    return pytest.raises(exc, match=rf"^{argument}")


@pytest.mark.parametrize("op", [linear_attention, delta_rule, softmax_attention], ids=lambda f: f.__name__)
def test_qkv_shapes_and_types(op):
    q, k, v = qkv()
    with raises(ValueError, "q"):
        op(q[0], k, v)  # wrong rank
    with raises(ValueError, "k"):
        op(q, k[:, :5], v)  # mismatched T
    with raises(ValueError, "k"):
        op(q, torch.randn(B, T, H + 1, K), v)  # mismatched H
    with raises(ValueError, "v"):
        op(q, k, torch.randn(2, T, H, V))  # mismatched B
    with raises(TypeError, "q"):
        op(q.long(), k, v)  # non-float
    with raises(TypeError, "k"):
        op(q, k.double(), v)  # mixed dtypes
    with raises(TypeError, "v"):
        op(q, k, "v")
    with raises(ValueError, "q"):
        op(q[:, :0], k[:, :0], v[:, :0])  # empty sequence
    with raises(ValueError, "q: expected at least one head and one feature"):
        op(q[..., :0], k[..., :0], v)  # K = 0: nothing to compare (the default scale K^-½ would divide by zero)
    with raises(ValueError, "v: expected at least one feature"):
        op(q, k, v[..., :0])


def test_cu_seqlens():
    q, k, v = qkv()
    for bad, exc, msg in [
        (torch.tensor([1, 4, 10]), ValueError, "start at 0"),
        (torch.tensor([0, 6, 4, 10]), ValueError, "strictly increasing"),
        (torch.tensor([0, 4, 4, 10]), ValueError, "strictly increasing"),
        (torch.tensor([0, 4, 9]), ValueError, "end at T"),
        (torch.tensor([0.0, 10.0]), TypeError, "integer"),
        (torch.tensor([[0, 10]]), ValueError, "shape"),
        ([0, 10], TypeError, "Tensor"),
    ]:
        with pytest.raises(exc, match=rf"^cu_seqlens: .*{msg}"):
            delta_rule(q, k, v, cu_seqlens=bad)
    with pytest.raises(ValueError, match=r"^cu_seqlens: .*B == 1"):
        delta_rule(*(torch.cat([x, x]) for x in (q, k, v)), cu_seqlens=torch.tensor([0, 10]))


def test_gates_and_states():
    q, k, v = qkv()
    with raises(ValueError, "g"):
        gated_linear_attention(q, k, v, torch.rand(B, T, H))  # positive log-decay
    with raises(ValueError, "g"):
        gated_linear_attention(q, k, v, -torch.rand(B, T, H, K + 1))
    with raises(ValueError, "g"):
        delta_rule(q, k, v, g=torch.rand(B, T, H))
    with raises(ValueError, "g"):
        delta_rule(q, k, v, g=-torch.rand(B, T, H, K))  # per-channel decay is not a delta-rule option
    with raises(ValueError, "beta"):
        delta_rule(q, k, v, beta=torch.rand(B, T))
    with raises(TypeError, "beta"):
        delta_rule(q, k, v, beta=torch.ones(B, T, H, dtype=torch.int32))
    with raises(ValueError, "w"):
        delta_rule(q, k, v, w=torch.randn(B, T, H, K + 1))
    with raises(ValueError, "initial_state"):
        delta_rule(q, k, v, initial_state=torch.zeros(B, H, V, K))
    with raises(ValueError, "initial_state"):
        delta_rule(q, k, v, initial_state=torch.zeros(3, H, K, V), cu_seqlens=torch.tensor([0, 4, 10]))
    with raises(TypeError, "initial_state"):
        linear_attention(q, k, v, normalize=True, initial_state=torch.zeros(B, H, K, V))
    with raises(ValueError, "initial_state"):
        linear_attention(q, k, v, normalize=True, initial_state=(torch.zeros(B, H, K, V), torch.zeros(B, H, V)))
    with raises(TypeError, r"initial_state\[1\]"):  # every part of a tuple state is a tensor
        linear_attention(q, k, v, normalize=True, initial_state=(torch.zeros(B, H, K, V), None))
    for bad in (float("-inf"), float("nan")):  # the chunked backends could not take them: refused for all
        g = -torch.rand(B, T, H)
        g[:, 3] = bad
        with pytest.raises(ValueError, match="^g: a log-decay must be finite"):
            delta_rule(q, k, v, g=g, backend="naive")
        with pytest.raises(ValueError, match="^g: a log-decay must be finite"):
            gated_linear_attention(q, k, v, g[..., None].expand(B, T, H, K))


def test_vla_arguments():
    q, k, v = qkv()
    u = torch.randn(B, T, H, K)
    for lam0 in (0, -1.0, float("nan"), float("inf"), "0.1", True):  # an infinite λ0 would zero the gate
        with raises(ValueError, "lam0: expected a finite number > 0"):
            vla_gate(k, u, lam0=lam0)
        with raises(ValueError, "lam0: expected a finite number > 0"):
            vla(q, k, v, u, lam0=lam0)
        with raises(ValueError, "lam0: expected a finite number > 0"):
            build_layer("vla", d_model=H * K, n_heads=H, lam0=lam0)
    for rho in (0, 1.5, float("nan"), "0.9", True):
        with raises(ValueError, "rho"):
            vla_gate(k, u, rho=rho)
        with raises(ValueError, "rho"):
            vla(q, k, v, u, rho=rho)
    with raises(ValueError, "u"):
        vla_gate(k, u[..., :4])
    with raises(ValueError, "u"):
        vla(q, k, v, u[:, :3])
    with raises(ValueError, "initial_state"):
        vla_gate(k, u, initial_state=torch.eye(K + 1).expand(B, H, K + 1, K + 1))
    with raises(TypeError, "initial_state"):
        vla(q, k, v, u, initial_state=torch.zeros(B, H, K, V))
    with raises(ValueError, r"initial_state\[1\]"):
        vla(q, k, v, u, initial_state=(torch.zeros(B, H, K, V), torch.zeros(B, H, K, V)))
    with raises(TypeError, r"initial_state\[1\]"):
        vla(q, k, v, u, initial_state=(torch.zeros(B, H, K, V), None))
    with pytest.raises(ValueError, match=r"^u: expected shape \[B, T, H, K\] \(as k\)"):
        vla_gate(k, u[..., :4])


def test_ccq_and_kaczmarz_arguments():
    q, k, _ = qkv()
    with raises(ValueError, "lam"):
        ccq_query(q, k, torch.rand(B, T, H, 1))
    with raises(ValueError, "g"):
        ccq_query(q, k, torch.rand(B, T, H), g=torch.rand(B, T, H))
    with raises(TypeError, "initial_state"):
        ccq_query(q, k, torch.rand(B, T, H), initial_state=torch.zeros(B, H, K, K))
    with raises(ValueError, r"initial_state\[2\]"):
        ccq_query(
            q,
            k,
            torch.rand(B, T, H),
            initial_state=(torch.zeros(B, H, K, K), torch.zeros(B, H, K), torch.zeros(B, H, 1)),
        )
    with raises(ValueError, "eta"):
        kaczmarz_beta(k, torch.rand(B, T))
    with raises(ValueError, "k"):
        kaczmarz_beta(k[0], torch.rand(B, T, H))
    with raises(ValueError, "eps"):
        kaczmarz_beta(k, torch.rand(B, T, H), eps=-1.0)
    with raises(ValueError, "kaczmarz_eps"):
        delta_rule(q, k, k, beta=torch.rand(B, T, H), kaczmarz_eps=-1e-6)
    with raises(ValueError, "kaczmarz_eps"):
        delta_rule(q, k, k, kaczmarz_eps=torch.tensor(1e-6))


def test_arguments_on_another_device_than_q():
    """Every tensor argument lives on q's device: one elsewhere (here `meta`) is named, not a backend's crash."""
    q, k, v = qkv()
    gate, meta = torch.rand(B, T, H), torch.device("meta")
    S0, A0 = torch.zeros(B, H, K, V), torch.eye(K, device=meta).expand(B, H, K, K)
    elsewhere = {
        "beta": lambda x: delta_rule(q, k, v, beta=x.to(meta)),
        "g": lambda x: gated_linear_attention(q, k, v, (-x).to(meta)),
        "initial_state": lambda x: delta_rule(q, k, v, initial_state=torch.zeros(B, H, K, V, device=meta)),
        "eta": lambda x: kaczmarz_beta(k, x.to(meta)),
        "lam": lambda x: ccq_query(q, k, x.to(meta)),
        "initial_state[1]": lambda x: vla(q, k, v, k, initial_state=(S0, A0)),
    }
    for name, call in elsewhere.items():
        reference = "k" if name == "eta" else "q"  # kaczmarz_beta takes no q
        with raises(ValueError, re.escape(f"{name}: expected device cpu (as {reference}), got meta")):
            call(gate)
    with raises(ValueError, re.escape("initial_state: expected device cpu (as k), got meta")):
        vla_gate(k, k, initial_state=A0)


def test_scale():
    q, k, v = qkv()
    u = torch.randn(B, T, H, K)
    ops = (delta_rule, linear_attention, softmax_attention, lambda q, k, v, **kw: vla(q, k, v, u, **kw))
    for op in ops:
        with raises(TypeError, "scale: expected a float or None, got str"):
            op(q, k, v, scale="x")
        with raises(TypeError, "scale: expected a float or None, got bool"):
            op(q, k, v, scale=True)
        with raises(ValueError, "scale: expected a finite number"):
            op(q, k, v, scale=float("nan"))
    o, _ = delta_rule(q, k, v, scale=1)  # an integer is a number
    assert torch.isfinite(o).all()


def test_output_final_state_is_a_bool():
    q, k, v = qkv()
    u, lam, g = torch.randn(B, T, H, K), torch.rand(B, T, H), -torch.rand(B, T, H)
    ops = (
        lambda **kw: delta_rule(q, k, v, **kw),
        lambda **kw: linear_attention(q.abs(), k.abs(), v, normalize=True, **kw),
        lambda **kw: gated_linear_attention(q, k, v, g, **kw),
        lambda **kw: ccq_query(q, k, lam, **kw),
        lambda **kw: vla(q, k, v, u, **kw),
        lambda **kw: vla_gate(k, u, **kw),
    )
    for op in ops:
        with raises(TypeError, "output_final_state: expected a bool, got str 'no'"):  # a str would read as on
            op(output_final_state="no")


@pytest.mark.parametrize("backend", ["fast", "Triton", None])
def test_unknown_backend(backend):
    q, k, v = qkv()
    with raises(ValueError, "backend"):
        delta_rule(q, k, v, backend=backend)
    with raises(ValueError, "backend"):
        vla_gate(k, k, backend=backend)


@pytest.mark.parametrize("backend", ["triton", "fused_recurrent"])
def test_triton_on_cpu_needs_the_interpreter(backend, monkeypatch):
    q, k, v = qkv()
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match=rf"^backend: '{backend}' runs on CUDA tensors, got device cpu"):
        delta_rule(q, k, v, backend=backend)


def test_backend_not_available_for_the_op():
    q, k, _ = qkv()
    B, T, H, _ = q.shape
    with pytest.raises(ValueError, match=r"^backend: 'fused_recurrent' is not available"):
        ccq_query(q, k, torch.rand(B, T, H), backend="fused_recurrent")


@pytest.mark.parametrize("backend", ["naive", "chunk", "triton"])
def test_vla_gate_initial_state_must_be_positive_definite(backend):
    _, k, _ = qkv()
    B, _, H, K = k.shape
    not_spd = -torch.eye(K).expand(B, H, K, K)
    with pytest.raises(ValueError, match="^initial_state: expected symmetric positive definite"):
        vla_gate(k, k, initial_state=not_spd, backend=backend)
    not_symmetric = torch.eye(K).repeat(B, H, 1, 1)
    not_symmetric[..., 0, 1] = 0.5  # positive definite, but a Cholesky would read one triangle, naive both
    with pytest.raises(ValueError, match="^initial_state: expected symmetric positive definite, got"):
        vla_gate(k, k, initial_state=not_symmetric, backend=backend)


def test_ccq_initial_mass_is_not_negative():
    """A negative initial mass Z can cancel a token's and make the read NaN; 0 is the empty state and runs."""
    q, k, _ = qkv()
    lam = torch.rand(B, T, H)
    C, m = torch.zeros(B, H, K, K), torch.zeros(B, H, K)
    with raises(ValueError, re.escape("initial_state[2]: the mass Z must be >= 0 (0: no key seen yet), got min -1")):
        ccq_query(q, k, lam, initial_state=(C, m, -torch.ones(B, H)))
    out, _ = ccq_query(q, k, lam, initial_state=(C, m, torch.zeros(B, H)))
    assert torch.isfinite(out).all()
