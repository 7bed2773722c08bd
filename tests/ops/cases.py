"""Every op configuration the backends are checked on, as data: how to draw inputs and how to call the op.

A `Case` draws per-token inputs (`[B, T, ...]`) and free leaves for an initial state (`[N, ...]`), maps the
leaves to a valid state (`init`: e.g. a symmetric positive-definite `A_0` for VLA), and calls the op with a
state given as a tuple of tensors, returning `[o, *final_state]`. The tests in this folder apply the same
checks to every case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from linattn.ops import (
    ccq_query,
    delta_rule,
    gated_linear_attention,
    kaczmarz_beta,
    linear_attention,
    vla,
    vla_gate,
)

F64 = torch.float64


@dataclass(frozen=True)
class Sizes:
    B: int
    T: int
    H: int = 2
    K: int = 12
    V: int = 7


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative RMS error of `a` against the reference `b`."""
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-300)).item()


def randn(gen, *shape, dtype=F64):
    return torch.randn(*shape, generator=gen, dtype=dtype)


def positive(gen, *shape):
    return F.elu(randn(gen, *shape)) + 1


def unit(gen, *shape):
    return F.normalize(randn(gen, *shape), dim=-1)


def log_decay(gen, *shape):
    """Log-decays in [-2.05, -0.05]: strong enough that a chunk spans many e-folds."""
    return -(torch.rand(*shape, generator=gen, dtype=F64) * 2 + 0.05)


def spd(P: torch.Tensor) -> torch.Tensor:
    """A symmetric positive-definite matrix from a free leaf `P: [..., d, d]`."""
    d = P.shape[-1]
    return P @ P.transpose(-1, -2) / d + 0.5 * torch.eye(d, dtype=P.dtype)


@dataclass(frozen=True)
class Case:
    id: str
    tokens: Callable[[Sizes, torch.Generator], dict[str, torch.Tensor]]
    state: Callable[[Sizes, int, torch.Generator], tuple[torch.Tensor, ...]]
    call: Callable[..., list[torch.Tensor]]
    init: Callable[[tuple[torch.Tensor, ...]], tuple[torch.Tensor, ...]] = lambda leaves: leaves

    def run(self, tokens, leaves, backend, cu_seqlens=None):
        """The op on `tokens` from the state made of `leaves` (or no initial state)."""
        state = None if leaves is None else self.init(leaves)
        return self.call(tokens, state, backend, cu_seqlens)


def _flat(o, state):
    if state is None:
        return [o]
    return [o, *(state if isinstance(state, tuple) else (state,))]


def _qkv(s, gen, q=randn, k=randn):
    return {"q": q(gen, s.B, s.T, s.H, s.K), "k": k(gen, s.B, s.T, s.H, s.K), "v": randn(gen, s.B, s.T, s.H, s.V)}


def _state_kv(s, N, gen):
    return (randn(gen, N, s.H, s.K, s.V),)


def _delta(**fixed):
    def call(x, state, backend, cu_seqlens):
        extra = {name: make(x) for name, make in fixed.items()}
        o, S = delta_rule(
            x["q"],
            x["k"],
            x["v"],
            **extra,
            initial_state=None if state is None else state[0],
            output_final_state=True,
            cu_seqlens=cu_seqlens,
            backend=backend,
        )
        return _flat(o, S)

    return call


def _gla(x, state, backend, cu_seqlens):
    o, S = gated_linear_attention(
        x["q"],
        x["k"],
        x["v"],
        x["g"],
        initial_state=None if state is None else state[0],
        output_final_state=True,
        cu_seqlens=cu_seqlens,
        backend=backend,
    )
    return _flat(o, S)


def _linear(normalize):
    def call(x, state, backend, cu_seqlens):
        init = None if state is None else (state if normalize else state[0])
        o, S = linear_attention(
            x["q"],
            x["k"],
            x["v"],
            normalize=normalize,
            initial_state=init,
            output_final_state=True,
            cu_seqlens=cu_seqlens,
            backend=backend,
        )
        return _flat(o, S)

    return call


def _vla_gate(x, state, backend, cu_seqlens):
    a, A = vla_gate(
        x["k"],
        x["u"],
        lam0=0.3,
        initial_state=None if state is None else state[0],
        output_final_state=True,
        cu_seqlens=cu_seqlens,
        backend=backend,
    )
    return _flat(a, A)


def _vla(rho: float = 1.0):
    def call(x, state, backend, cu_seqlens):
        o, S = vla(
            x["q"],
            x["k"],
            x["v"],
            x["u"],
            lam0=0.3,
            rho=rho,
            initial_state=state,
            output_final_state=True,
            cu_seqlens=cu_seqlens,
            backend=backend,
        )
        return _flat(o, S)

    return call


def _ccq(**options):
    def call(x, state, backend, cu_seqlens):
        o, S = ccq_query(
            x["q"],
            x["k"],
            x["lam"],
            g=x.get("g"),
            **options,
            initial_state=state,
            output_final_state=True,
            cu_seqlens=cu_seqlens,
            backend=backend,
        )
        return _flat(o, S)

    return call


def _ccq_init(leaves):
    C, m, Z = leaves
    return C @ C.transpose(-1, -2), m, Z.abs()


def _ccq_tokens(decay):
    def tokens(s, gen):
        x = {
            "q": randn(gen, s.B, s.T, s.H, s.K),
            "k": randn(gen, s.B, s.T, s.H, s.K),
            "lam": torch.rand(s.B, s.T, s.H, generator=gen, dtype=F64),
        }
        if decay:
            x["g"] = log_decay(gen, s.B, s.T, s.H) * 0.1
        return x

    return tokens


def _ccq_state(s, N, gen):
    return randn(gen, N, s.H, s.K, s.K), randn(gen, N, s.H, s.K), randn(gen, N, s.H) * 3


def _tokens(q=randn, k=randn, **more):
    """Token inputs q, k, v plus extra named draws `name=(draw, per_channel)`."""

    def tokens(s, gen):
        x = _qkv(s, gen, q=q, k=k)
        for name, (draw, per_channel) in more.items():
            x[name] = draw(gen, *((s.B, s.T, s.H, s.K) if per_channel else (s.B, s.T, s.H)))
        return x

    return tokens


def _vla_tokens(s, gen):
    return {
        "q": positive(gen, s.B, s.T, s.H, s.K),
        "k": positive(gen, s.B, s.T, s.H, s.K),
        "v": randn(gen, s.B, s.T, s.H, s.V),
        "u": unit(gen, s.B, s.T, s.H, s.K) / s.K**0.5,
    }


def _vla_gate_tokens(s, gen):
    x = _vla_tokens(s, gen)
    return {"k": x["k"], "u": x["u"]}


def _uniform(gen, *shape):
    return torch.rand(*shape, generator=gen, dtype=F64)


CASES = [
    Case("linear", _tokens(), _state_kv, _linear(False)),
    Case(
        "linear-normalized",
        _tokens(q=positive, k=positive),
        lambda s, N, g: (randn(g, N, s.H, s.K, s.V), positive(g, N, s.H, s.K)),
        _linear(True),
    ),
    Case("gla-scalar", _tokens(g=(log_decay, False)), _state_kv, _gla),
    Case("gla-channel", _tokens(g=(log_decay, True)), _state_kv, _gla),
    Case("deltanet-beta1", _tokens(k=unit), _state_kv, _delta()),
    Case("deltanet", _tokens(k=unit, beta=(_uniform, False)), _state_kv, _delta(beta=lambda x: x["beta"])),
    Case(
        "gated-deltanet",
        _tokens(k=unit, beta=(_uniform, False), g=(log_decay, False)),
        _state_kv,
        _delta(beta=lambda x: x["beta"], g=lambda x: x["g"]),
    ),
    Case(
        "two-key",
        _tokens(k=unit, beta=(_uniform, False), g=(log_decay, False), w=(unit, True)),
        _state_kv,
        _delta(w=lambda x: x["w"], beta=lambda x: x["beta"], g=lambda x: x["g"]),
    ),
    Case(
        "kla",
        _tokens(eta=(_uniform, False), g=(log_decay, False)),
        _state_kv,
        _delta(beta=lambda x: kaczmarz_beta(x["k"], x["eta"]), g=lambda x: x["g"]),
    ),
    Case(
        "kla-kaczmarz-eps",
        _tokens(eta=(_uniform, False), g=(log_decay, False)),
        _state_kv,
        _delta(beta=lambda x: x["eta"], g=lambda x: x["g"], kaczmarz_eps=lambda x: 1e-6),
    ),
    Case(
        "vla-gate",
        _vla_gate_tokens,
        lambda s, N, g: (randn(g, N, s.H, s.K, s.K),),
        _vla_gate,
        init=lambda leaves: (spd(leaves[0]),),
    ),
    Case(
        "vla",
        _vla_tokens,
        lambda s, N, g: (randn(g, N, s.H, s.K, s.V), randn(g, N, s.H, s.K, s.K)),
        _vla(),
        init=lambda leaves: (leaves[0], spd(leaves[1])),
    ),
    Case(  # a forgetting factor mild enough for the token loop's backward (`test_vla_forgetting.py`)
        "vla-forget",
        _vla_tokens,
        lambda s, N, g: (randn(g, N, s.H, s.K, s.V), randn(g, N, s.H, s.K, s.K)),
        _vla(rho=0.99),
        init=lambda leaves: (leaves[0], spd(leaves[1])),
    ),
    Case("ccq", _ccq_tokens(False), _ccq_state, _ccq(), init=_ccq_init),
    Case("ccq-decay-uncentered", _ccq_tokens(True), _ccq_state, _ccq(centered=False), init=_ccq_init),
    Case("ccq-decay-rawkeys", _ccq_tokens(True), _ccq_state, _ccq(normalize_keys=False), init=_ccq_init),
]


def draw(case: Case, sizes: Sizes, seed: int = 0, *, N: int | None = None, requires_grad: bool = False):
    """Inputs of `case` at `sizes`: `(tokens, state)`, leaves optionally requiring grad."""
    gen = torch.Generator().manual_seed(seed)
    tokens = case.tokens(sizes, gen)
    state = case.state(sizes, sizes.B if N is None else N, gen)
    if requires_grad:
        for x in (*tokens.values(), *state):
            x.requires_grad_(True)
    return tokens, state


def grads(outs, leaves, seed: int = 1) -> list[torch.Tensor]:
    """The gradients of `Σ_i ⟨outs[i], c_i⟩` for fixed random float64 cotangents `c_i` (zeros for an unused leaf)."""
    gen = torch.Generator().manual_seed(seed)
    loss = sum((o.double() * torch.randn(o.shape, generator=gen, dtype=F64)).sum() for o in outs)
    found = torch.autograd.grad(loss, leaves, allow_unused=True)
    return [torch.zeros_like(x) if d is None else d for x, d in zip(leaves, found)]


def check_chaining(run, leaves: dict[str, torch.Tensor], out_tol: float, grad_tol: float, t: int = 70) -> None:
    """`run(span, state) -> [o, *final_state]` over `[0:t]`, then `[t:]` from the carried state, equals one run
    over everything: outputs and final states within `out_tol`, and the gradients of `leaves` (through the carried
    state too) within `grad_tol`, relative RMS."""
    whole = run(slice(None), None)
    first = run(slice(0, t), None)
    second = run(slice(t, None), tuple(first[1:]))
    chained = [torch.cat([first[0], second[0]], 1), *second[1:]]
    for i, (a, b) in enumerate(zip(chained, whole)):
        assert rel_err(a, b) < out_tol, f"output {i}: {rel_err(a, b):.2e}"
    xs = list(leaves.values())
    for name, a, b in zip(leaves, grads(chained, xs, seed=3), grads(whole, xs, seed=3)):
        assert rel_err(a, b) < grad_tol, f"d{name}: {rel_err(a, b):.2e}"


def check_float32_against_naive(case: Case, sizes: Sizes, backend: str, out_tol: float, grad_tol: float) -> None:
    """`backend` in float32 against `naive` in float64 on the same values: outputs and final states (float32)
    within `out_tol`, and every gradient (tokens, then initial states) within `grad_tol`, relative RMS."""
    tokens, state = draw(case, sizes, requires_grad=True)
    low = {n: x.float().detach().requires_grad_() for n, x in tokens.items()}
    leaves32 = tuple(s.float().detach().requires_grad_() for s in state)
    got = case.run(low, leaves32, backend)
    want = case.run(tokens, state, "naive")
    for a, b in zip(got, want):
        assert a.dtype == torch.float32 and rel_err(a, b) < out_tol
    gen = torch.Generator().manual_seed(3)
    cot = [torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in want]
    g_got = torch.autograd.grad(sum((o * c.float()).sum() for o, c in zip(got, cot)), [*low.values(), *leaves32])
    g_want = torch.autograd.grad(sum((o * c).sum() for o, c in zip(want, cot)), [*tokens.values(), *state])
    for a, b in zip(g_got, g_want):
        assert rel_err(a, b) < grad_tol
