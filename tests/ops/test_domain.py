"""Property tests over each op's documented domain (its README's "Domain"): finite outputs within the accuracy
contract on every CPU backend, and a clear error for inputs outside it.

The draws are `linattn.bench.fuzz.Draw`s, built and judged by the fuzzer's own `build` and `check_valid`; hypothesis
picks the sizes, options and value ranges here (derandomised, so CI sees the same examples every run).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from linattn.bench import fuzz
from linattn.bench.fuzz import Draw, backends_on, build, cast, check_invalid, check_valid, in_domain, mutate
from linattn.ops import softmax_attention

OPS = sorted(fuzz.VARIANTS)


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    """The ends of `[lo, hi]` or a point log-uniform between them."""
    inside = st.floats(math.log10(lo), math.log10(hi)).map(lambda e: min(max(10.0**e, lo), hi))
    return st.one_of(st.just(lo), st.just(hi), inside)


def norm_range(lo: float, hi: float) -> st.SearchStrategy[tuple[float, float]]:
    """Per-token norms: one value, or a sorted pair spanning part or all of `[lo, hi]`."""
    one = log_uniform(lo, hi).map(lambda x: (x, x))
    return st.one_of(one, st.tuples(log_uniform(lo, hi), log_uniform(lo, hi)).map(lambda p: tuple(sorted(p))))


@st.composite
def draws(draw, op: str, max_T: int = 80, max_K: int = 20) -> Draw:
    """A point of `op`'s domain: `B, T, H, K, V` (T = 1 and lengths around the chunk sizes included) or packed
    lengths in `B == 1` (short ones included), decays down to `G_MIN`, key norms over `KEY_NORM_RANGE`, VLA's
    `λ0`, `‖u‖` and `ρ` over theirs, initial states."""
    if draw(st.booleans()):
        lengths = tuple(draw(st.lists(st.one_of(st.integers(1, 3), st.integers(1, 40)), min_size=1, max_size=4)))
        B, T = 1, sum(lengths)
    else:
        lengths = None
        B, T = draw(st.integers(1, 3)), draw(st.one_of(st.sampled_from((1, 15, 16, 17, 63, 65)), st.integers(1, max_T)))
    K = draw(st.one_of(st.sampled_from((1, 2, 16)), st.integers(1, max_K)))
    variant = draw(st.sampled_from(fuzz.VARIANTS[op]))
    raw_ccq = (op, variant) == ("ccq_query", "raw-keys")
    lam0 = draw(log_uniform(*fuzz.LAM0_RANGE))
    scale = draw(st.sampled_from((None, 1.0, 0.01, 3.0) if op == "softmax_attention" else (None, 1.0, -3.0)))
    d = Draw(
        op,
        B=B,
        T=T,
        H=draw(st.integers(1, 3)),
        K=K,
        V=draw(st.integers(1, 9)),
        lengths=lengths,
        variant=variant,
        decay=draw(st.booleans()),
        key_norm=draw(norm_range(fuzz.KEY_NORM_RANGE[0], fuzz.RAW_KEY_NORM_MAX if raw_ccq else fuzz.KEY_NORM_RANGE[1])),
        g_min=-draw(log_uniform(1e-3, -fuzz.G_MIN)),
        step=draw(st.floats(0.0, fuzz.STEP_MAX)),
        eps=draw(st.sampled_from((0.0, 1e-6, 1e-2))),
        lam0=lam0,
        u_norm=draw(norm_range(fuzz.U_NORM_RANGE[0], fuzz.u_norm_max(lam0))),
        rho=draw(st.one_of(st.just(1.0), st.floats(fuzz.rho_min(K), 1.0))),
        scale=scale,
        state=draw(st.booleans()),
        seed=draw(st.integers(0, 2**31 - 1)),
    )
    assert in_domain(d), d
    return d


def report(findings) -> str:
    return "\n".join(f"{f.kind}: {f.detail}\n  {f.repro}" for f in findings)


@pytest.mark.parametrize("op", OPS)
@settings(max_examples=12, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_inside_the_domain_every_cpu_backend_is_finite_and_within_the_contract(op, data):
    """`chunk` and `naive` in float64 and float32 against `naive` in float64: finite, within `fuzz.TOLERANCE`."""
    d = data.draw(draws(op))
    _, findings = check_valid(build(d), backends_on(op, "cpu"), expr=f"build({d!r})")
    assert not findings, report(findings)


TRITON_OPS = [op for op in OPS if "triton" in fuzz.op_backends(op)]


@pytest.mark.parametrize("op", TRITON_OPS)
@settings(max_examples=3, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_inside_the_domain_the_triton_backends_under_the_interpreter(op, data):
    """`triton` and `fused_recurrent` in float32, in Triton's interpreter (slow: a few tiny examples)."""
    d = data.draw(draws(op, max_T=24, max_K=8))
    pairs = [(b, torch.float32) for b in ("triton", "fused_recurrent") if b in fuzz.op_backends(op)]
    _, findings = check_valid(build(d), pairs, expr=f"build({d!r})")
    assert not findings, report(findings)


# mutations of a valid call that must raise a clear error on the CPU (the meta device: below)
MUST_RAISE = sorted(name for name, m in fuzz.MUTATIONS.items() if m.must_raise("cpu"))


@pytest.mark.parametrize("op", OPS)
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_outside_the_domain_a_clear_error(op, data):
    """Wrong ranks, dtypes, devices and empty dims, bad `cu_seqlens` and states, `g > 0`, `λ0 ≤ 0`, `ρ ∉ (0, 1]`, a
    non-finite scale, …: a `ValueError` / `TypeError` whose message starts with the argument's name."""
    d = data.draw(draws(op, max_T=20, max_K=6))
    call = cast(build(d), torch.float32)
    applicable = [name for name in MUST_RAISE if mutate(call, name) is not None]
    name = data.draw(st.sampled_from(applicable))
    bad = mutate(call, name)
    backend = (
        data.draw(st.sampled_from(("naive", "chunk"))) if fuzz.op_backends(op) and "backend" not in bad.kwargs else None
    )
    outcome, detail = check_invalid(lambda: bad.run(backend), fuzz.parameters(op), must_raise=True)
    assert outcome == "clear", f"{name}: {outcome}: {detail}\n{bad.describe()}"


@pytest.mark.parametrize("name", ["float16", "bfloat16", "nan-input", "inf-input"])
@pytest.mark.parametrize("op", OPS)
def test_unsupported_inputs_run_or_raise_clearly(op, name):
    """Half precision on the CPU and non-finite tokens are not the domain: a result (which may be non-finite) or a
    clear error, never another exception."""
    call = cast(
        build(Draw(op, B=1, T=20, H=2, K=4, V=3, variant=fuzz.VARIANTS[op][0], state=True, seed=1)), torch.float32
    )
    bad = mutate(call, name)
    backend = "chunk" if fuzz.op_backends(op) else None
    outcome, detail = check_invalid(lambda: bad.run(backend), fuzz.parameters(op), must_raise=False)
    assert outcome in ("clear", "ran"), detail


# where meta inputs would meet a read of their values: packed offsets, and VLA's wind-up check under forgetting
META_CASES = [(op, {"B": 1, "lengths": (8, 12)}) for op in OPS if op != "kaczmarz_beta"]
META_CASES += [(op, {"rho": 0.99, "variant": v}) for op in ("vla", "vla_gate") for v in ("", "refresh")]


@pytest.mark.parametrize(("op", "options"), META_CASES, ids=lambda x: str(x))
def test_meta_tensors_give_a_clear_error_or_a_meta_result(op, options):
    d = Draw(op, **{"T": 20, "H": 2, "K": 4, "V": 3, "variant": fuzz.VARIANTS[op][0], "seed": 1} | options)
    call = cast(build(d), torch.float32)
    backend = "chunk" if fuzz.op_backends(op) else None
    outcome, detail = check_invalid(lambda: mutate(call, "meta").run(backend), fuzz.parameters(op), False)
    assert outcome in ("clear", "ran"), detail


@pytest.mark.parametrize("scale", [-1.0, 0.0])
def test_causal_softmax_attention_with_a_non_positive_scale_is_finite(scale):
    q, k, v = torch.randn(3, 1, 4, 1, 2, generator=torch.Generator().manual_seed(0)).unbind()
    o, _ = softmax_attention(q, k, v, scale=scale)
    assert torch.isfinite(o).all()


@pytest.mark.parametrize("K", [5, 7, 9])
@pytest.mark.parametrize("op", ["vla_gate", "vla"])
def test_forgetting_at_a_head_dim_that_is_not_a_power_of_two(op, K):
    """Inside the domain (`ρ = 0.9`, `‖u‖² / λ0 = 10`): the chunk gate's downdates `A − WᵀW` once kept the rounding's
    antisymmetric part, which does not shrink with `A` (`10⁻³` off at these K, where K = 8 was `10⁻⁶` off)."""
    d = Draw(op, B=1, T=99, H=1, K=K, V=3, lam0=1e-3, u_norm=(0.1, 0.1), rho=0.9, seed=0)
    assert in_domain(d)
    _, findings = check_valid(build(d), [("chunk", torch.float32)])
    assert not findings, report(findings)
