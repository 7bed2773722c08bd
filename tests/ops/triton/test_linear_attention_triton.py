"""`linear_attention` and `gated_linear_attention` with `backend="triton"`: the chunked delta-rule kernels without
the erase term (`ERASE` off) for no or a scalar decay, GLA's own kernels (`linear_attention/triton/`) for a
per-channel one; on a GPU if there is one, else in Triton's interpreter on CPU (see tests/conftest.py).

Outputs, final states and every gradient (q, k, v, g, initial state) against autograd of the float64 `naive`
recurrence (`naive_gated_linear_attention`); each no-erase stage against its PyTorch reference. `torch.empty` is
poisoned with NaN (tests/conftest.py), so an element a kernel forgets to write fails the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
import torch
import torch.nn.functional as F

from linattn.ops import gated_linear_attention, linear_attention
from linattn.ops.checks import check_backend
from linattn.ops.delta_rule.triton.cumsum import chunk_cumsum
from linattn.ops.delta_rule.triton.local_bwd import local_bwd, local_bwd_ref
from linattn.ops.delta_rule.triton.output import output_fwd, output_ref
from linattn.ops.delta_rule.triton.state import state_fwd, state_ref
from linattn.ops.delta_rule.triton.state_bwd import state_bwd, state_bwd_ref
from linattn.ops.linear_attention.api import BACKENDS
from linattn.ops.utils.layout import chunk_layout
from tests.ops.cases import CASES, rel_err
from tests.ops.triton.test_delta_rule_fwd import DEVICE, FLOOR, INTERPRETED_BF16_ROUNDING, check, check_shared_case

F32_TOL = 5e-5  # float32 inputs against the float64 recurrence: outputs and every gradient
STAGE_TOL = 5e-6  # one stage against its float64 reference on the same inputs
CASE_TOL = 1e-5  # the shared cases (tests/ops/cases.py) in float32 against naive in float64
GRADS = ("q", "k", "v", "g", "S0", "z0")


@dataclass(frozen=True)
class Config:
    """One call: sizes, decay, initial state, packed sequence lengths (then B = 1), normaliser."""

    T: int = 64
    B: int = 1
    H: int = 2
    K: int = 16
    V: int = 32
    # None (linear attention), "mild" (the state lives across chunks), "strong" (about e^-100 across a chunk) or
    # "extreme" (about e^-1300); one decay per head, or per key channel (GLA's kernels) with `per_channel`
    gate: str | None = "mild"
    per_channel: bool = False
    h0: bool = True
    lengths: tuple[int, ...] | None = None
    normalize: bool = False  # linear_attention(normalize=True): positive q, k (ELU+1), state (S, z); no gate


GATES = {  # log-decays from `u(*shape)` (uniform on [0, 1))
    "mild": lambda u, shape: -0.1 * u(*shape),
    "strong": lambda u, shape: -(3 * u(*shape) + 0.05),
    "extreme": lambda u, shape: -(20 + u(*shape)),  # no factor may overflow
}


def make_inputs(cfg: Config, dtype: torch.dtype = torch.float32, seed: int = 0) -> dict:
    """Inputs in `dtype` (the initial state in float32)."""
    assert not (cfg.normalize and cfg.gate), "normalize=True is linear attention (no g)"
    gen = torch.Generator().manual_seed(seed)
    B, T, H, K, V = cfg.B, cfg.T, cfg.H, cfg.K, cfg.V
    if cfg.lengths is not None:
        assert B == 1 and sum(cfg.lengths) == T
    N = B if cfg.lengths is None else len(cfg.lengths)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)
    u = lambda *s: torch.rand(*s, generator=gen, dtype=torch.float64)
    feature = (lambda x: F.elu(x) + 1) if cfg.normalize else (lambda x: x)
    x = {
        "q": feature(r(B, T, H, K)),
        "k": feature(r(B, T, H, K)),
        "v": r(B, T, H, V),
        "g": None if cfg.gate is None else GATES[cfg.gate](u, (B, T, H, K) if cfg.per_channel else (B, T, H)),
    }
    x = {n: None if t is None else t.to(DEVICE, dtype) for n, t in x.items()}
    x["S0"] = r(N, H, K, V).to(DEVICE, torch.float32) if cfg.h0 else None
    x["z0"] = (F.elu(r(N, H, K)) + 1).to(DEVICE, torch.float32) if cfg.h0 and cfg.normalize else None
    x["cu_seqlens"] = None if cfg.lengths is None else torch.tensor([0, *cfg.lengths], device=DEVICE).cumsum(0)
    x["normalize"] = cfg.normalize
    return x


def draw_cotangents(x: dict, dtype: torch.dtype, seed: int = 1) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """`(do, dS)`: the gradient of `o` exactly representable in `dtype`, and of the final state (a pair `(dS, dz)`
    with the normaliser) in float32."""
    gen = torch.Generator().manual_seed(seed)
    B, T, H, K = x["q"].shape
    V = x["v"].shape[-1]
    N = B if x["cu_seqlens"] is None else len(x["cu_seqlens"]) - 1
    do = torch.randn(B, T, H, V, generator=gen).to(DEVICE, dtype)
    dS = [torch.randn(N, H, K, V, generator=gen).to(DEVICE)]
    if x["normalize"]:
        dS.append(torch.randn(N, H, K, generator=gen).to(DEVICE))
    return do, tuple(dS)


def call(x: dict, leaves: dict, backend: str, want_final: bool, precision: str = "exact"):
    """The public op on `leaves` (the differentiable inputs) and `x`'s options: `(o, final_state)`."""
    opts = {"output_final_state": want_final, "cu_seqlens": x["cu_seqlens"], "backend": backend}
    opts |= {"precision": precision} if precision != "exact" else {}
    if x["normalize"]:
        init = (leaves["S0"], leaves["z0"]) if "S0" in leaves else None
        return linear_attention(leaves["q"], leaves["k"], leaves["v"], normalize=True, initial_state=init, **opts)
    if "g" in leaves:
        return gated_linear_attention(
            leaves["q"], leaves["k"], leaves["v"], leaves["g"], initial_state=leaves.get("S0"), **opts
        )
    return linear_attention(leaves["q"], leaves["k"], leaves["v"], initial_state=leaves.get("S0"), **opts)


def run_grads(
    x: dict, backend: str, do, dS, dtype: torch.dtype | None = None, precision: str = "exact"
) -> tuple[dict, dict]:
    """`({output name: tensor}, {input name: gradient})` of `⟨o, do⟩ + ⟨final state, dS⟩` (`do` or `dS` None: that
    term is left out, and without `dS` no final state is asked for), the inputs cast to `dtype` if given; the op at
    `precision`."""
    leaves = {
        n: (x[n] if dtype is None else x[n].to(dtype)).detach().clone().requires_grad_()
        for n in GRADS
        if x[n] is not None
    }
    o, S = call(x, leaves, backend, dS is not None, precision)
    S = () if S is None else (S if isinstance(S, tuple) else (S,))
    loss = 0.0 if do is None else (o.double() * do.double()).sum()
    for s, ds in zip(S, dS or ()):
        loss = loss + (s.double() * ds.double()).sum()
    grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
    outs = {"o": o, **{f"final state[{i}]": s for i, s in enumerate(S)}}
    # an input that does not reach the loss (q when only the final state is used) has a zero gradient
    return outs, {n: torch.zeros_like(t) if d is None else d for (n, t), d in zip(leaves.items(), grads)}


def check_all(x: dict, do, dS, tol: float, what: str) -> dict:
    """Outputs, final states and every gradient of the triton backend against naive in float64; returns the
    errors by name."""
    outs, grads = run_grads(x, "triton", do, dS)
    want_outs, want_grads = run_grads(x, "naive", do, dS, torch.float64)
    assert outs["o"].dtype == x["v"].dtype, f"{what}: o has dtype {outs['o'].dtype}"
    for n, d in grads.items():
        assert d.dtype == x[n].dtype, f"{what} d{n}: dtype {d.dtype}, expected {x[n].dtype}"
    pairs = {**{n: (outs[n], want_outs[n]) for n in outs}, **{f"d{n}": (grads[n], want_grads[n]) for n in grads}}
    for name, (a, b) in pairs.items():
        check(a, b, tol, f"{what} {name}")
    return {name: rel_err(a, b) for name, (a, b) in pairs.items()}


SWEEP = {
    "linear": Config(gate=None, h0=False),
    "gla": Config(),
    "gla-channel": Config(per_channel=True),
}


@pytest.mark.parametrize("T", [1, 63, 64, 65, 200])
@pytest.mark.parametrize("name", list(SWEEP))
def test_matches_naive_f32(name, T):
    cfg = replace(SWEEP[name], T=T)
    x = make_inputs(cfg)
    do, dS = draw_cotangents(x, torch.float32)
    check_all(x, do, dS, F32_TOL, f"{name} T={T}")


AWKWARD = {
    "K96": Config(T=65, H=1, K=96, V=40),
    "V96-linear": Config(T=63, H=1, K=24, V=96, gate=None),
    "K256": Config(T=65, H=1, K=256, V=16),
    "K>V": Config(T=130, B=2, H=1, K=32, V=16),
    # a one-wide key, K + 1 values (a mass beside a sum, as CCQ's (m, Z); on Hopper 16-wide key blocks fault here)
    "K1-V33": Config(T=13, B=3, K=1, V=33),
    "strong-decay": Config(T=127, gate="strong"),
    "varlen": Config(T=140, lengths=(1, 70, 5, 64)),
    "channel-K96": Config(T=65, H=1, K=96, V=40, per_channel=True),
    "channel-K256": Config(T=40, H=1, K=256, V=16, per_channel=True),
    "channel-K>V": Config(T=130, B=2, H=1, K=32, V=16, per_channel=True, h0=False),
    "channel-K1-V33": Config(T=13, B=3, K=1, V=33, per_channel=True),
    "channel-strong": Config(T=127, gate="strong", per_channel=True),
    "channel-varlen": Config(T=140, lengths=(1, 70, 5, 64), per_channel=True),
    "varlen-linear": Config(T=196, gate=None, h0=False, lengths=(65, 1, 130)),
    "normalized": Config(T=130, gate=None, normalize=True),
    "normalized-no-h0": Config(T=65, B=2, gate=None, h0=False, normalize=True),
    "normalized-varlen": Config(T=76, gate=None, lengths=(1, 70, 5), normalize=True),
    "normalized-V256": Config(T=65, H=1, K=16, V=256, gate=None, normalize=True),
}


@pytest.mark.parametrize("name", list(AWKWARD))
def test_awkward_shapes(name):
    cfg = AWKWARD[name]
    x = make_inputs(cfg)
    do, dS = draw_cotangents(x, torch.float32)
    check_all(x, do, dS, F32_TOL, name)


def test_extreme_channel_decay():
    """About e^-20 a token and channel (e^-1300 across a chunk): every factor of GLA's kernels stays finite, and all
    but `dg` keep float32 accuracy. `dg = Σ (q ⊙ dq − k ⊙ dk)` is then a difference of terms some 10⁸ times its
    size, so it is checked at float32 rounding of those terms; the chunk backend's autograd loses it as well (17×
    its size against triton's 321× here), only the token loop keeps it."""
    x = make_inputs(Config(T=90, gate="extreme", per_channel=True))
    do, dS = draw_cotangents(x, torch.float32)
    outs, grads = run_grads(x, "triton", do, dS)
    want_outs, want_grads = run_grads(x, "naive", do, dS, torch.float64)
    for name in outs:
        check(outs[name], want_outs[name], F32_TOL, f"extreme {name}")
    for name in ("q", "k", "v", "S0"):
        check(grads[name], want_grads[name], F32_TOL, f"extreme d{name}")
    scale = (x["q"].double() * want_grads["q"]).norm()
    assert torch.isfinite(grads["g"]).all()
    assert (grads["g"].double() - want_grads["g"]).norm() / scale < 1e-5


@pytest.mark.parametrize("normalize", [False, True], ids=["plain", "normalized"])
@pytest.mark.parametrize("only", ["o", "final state"])
def test_one_output_unused(only, normalize):
    """An unused output's gradient arrives as None: the backward runs on `do` alone, or on `dht` alone (with the
    normaliser, on `(dS, dz)`)."""
    x = make_inputs(Config(T=100, gate=None, normalize=True) if normalize else Config(T=100))
    do, dS = draw_cotangents(x, torch.float32)
    check_all(x, do if only == "o" else None, dS if only == "final state" else None, F32_TOL, f"only {only}")


def test_normalized_backward_cut_in_two(monkeypatch):
    """A long single sequence's backward runs in two spans (`SPLIT_BYTES` lowered); the normalised op's outputs and
    gradients stay those of the float64 recurrence."""
    from linattn.ops.delta_rule.triton import backward

    monkeypatch.setattr(backward, "SPLIT_BYTES", 1)
    x = make_inputs(Config(T=200, gate=None, normalize=True))
    do, dS = draw_cotangents(x, torch.float32)
    check_all(x, do, dS, F32_TOL, "normalized, cut")


# the mean the values share (in standard deviations), by case: one for all tokens, per packed sequence, or drifting
NORMALIZED_MEANS = {
    "offset 0": 0.0,
    "offset 4": 4.0,
    "offset 30": 30.0,
    "h0": 4.0,  # with an initial state
    "varlen": torch.tensor([4.0] * 71 + [-4.0] * 5 + [30.0] * 124)[:, None, None],
    "drift": torch.linspace(0, 8, 200)[:, None, None],
}


def _normalized_inputs(name: str) -> tuple[dict, torch.Tensor, bool]:
    """bfloat16 inputs of normalised linear attention whose values share `NORMALIZED_MEANS[name]`, `do`, and whether
    they carry an initial state."""
    lengths = (1, 70, 5, 124) if name == "varlen" else None
    h0 = name == "h0"
    x = make_inputs(Config(T=200, gate=None, normalize=True, h0=h0, lengths=lengths), torch.bfloat16)
    x["v"] = (x["v"].double() + torch.as_tensor(NORMALIZED_MEANS[name], dtype=torch.float64)).to(torch.bfloat16)
    return x, draw_cotangents(x, torch.bfloat16)[0], h0


def _errors(x: dict, do, **opts) -> tuple[dict, dict]:
    """`(ours, naive's)`: the relative errors of the triton backend (Hopper's arithmetic emulated) and of the naive
    recurrence in bfloat16 against float64, by output and gradient name, with no final state."""
    from tests.ops.triton.hopper_arithmetic import hopper_arithmetic

    with hopper_arithmetic():
        got = run_grads(x, "triton", do, None, **opts)
    want, naive = run_grads(x, "naive", do, None, torch.float64), run_grads(x, "naive", do, None)
    names = [(part, n) for part in (0, 1) for n in got[part]]
    label = {(part, n): n if part == 0 else f"d{n}" for part, n in names}
    ours = {label[p, n]: rel_err(got[p][n], want[p][n]) for p, n in names}
    return ours, {label[p, n]: rel_err(naive[p][n], want[p][n]) for p, n in names}


def _spy_precisions(monkeypatch) -> list:
    """The precision choices of the engine's forward and backward calls, in order, as they are made."""
    from linattn.ops.delta_rule.triton import backward, forward
    from linattn.ops.utils import precision

    taken = []
    for module, chooser in ((forward, "forward_precision"), (backward, "backward_precision")):
        chosen = getattr(module, chooser)
        monkeypatch.setattr(module, chooser, lambda *a, _f=chosen, **kw: taken.append(_f(*a, **kw)) or taken[-1])
    monkeypatch.setattr(precision, "ONE_PASS_TOKENS", 1)  # these calls are shorter than the one-pass threshold
    return taken


@pytest.mark.parametrize("level", ["exact", "fast"])
@pytest.mark.parametrize("name", list(NORMALIZED_MEANS))
def test_normalized_bfloat16_training_within_twice_naive(name, level, monkeypatch):
    """A bfloat16 training call (no final state), Hopper's arithmetic emulated: three passes forward and backward at
    either level (the fast one runs the exact one), within 2× the naive recurrence's error whatever mean the values
    share, per sequence or drifting along one."""
    taken = _spy_precisions(monkeypatch)
    x, do, _ = _normalized_inputs(name)
    ours, naive = _errors(x, do, precision=level)
    assert [(p.state, p.store) for p in taken] == [("tf32x3", torch.float32)] * 2, taken
    for what, err in ours.items():
        assert err <= max(2 * naive[what], FLOOR), f"{name} {level} {what}: {err:.2e} against naive's {naive[what]:.2e}"


@pytest.mark.parametrize("name", list(NORMALIZED_MEANS))
def test_normalized_bfloat16_inference_in_one_pass(name, monkeypatch):
    """Where no gradient will be taken the kernels' float32 `o` is only the division's operand: one tf32 pass, as the
    unnormalised op, and the output within 2× the naive recurrence's error (Hopper's arithmetic emulated)."""
    from tests.ops.triton.hopper_arithmetic import hopper_arithmetic

    taken = _spy_precisions(monkeypatch)
    x, _, h0 = _normalized_inputs(name)
    state = (x["S0"], x["z0"]) if h0 else None
    with torch.no_grad(), hopper_arithmetic():
        o, _ = linear_attention(
            x["q"], x["k"], x["v"], normalize=True, initial_state=state, cu_seqlens=x["cu_seqlens"], backend="triton"
        )
    assert [p.state for p in taken] == ["tf32"], taken
    opts = {"normalize": True, "cu_seqlens": x["cu_seqlens"], "backend": "naive"}
    want = linear_attention(*(x[n].double() for n in "qkv"), initial_state=state and tuple(t.double() for t in state),
                            **opts)[0]  # fmt: skip
    naive = linear_attention(x["q"], x["k"], x["v"], initial_state=state, **opts)[0]
    assert rel_err(o, want) <= 2 * rel_err(naive, want), (rel_err(o, want), rel_err(naive, want))


@pytest.mark.parametrize("variant", ["one-pass forward", "fast states"])
def test_normalized_training_needs_three_passes(variant, monkeypatch):
    """Why a training call keeps three passes in its forward and the exact level: on values that share a mean `dq`'s
    two shares (`S do / z`, `z oᵀdo / z`, with the forward's `o`) cancel, and a one-pass forward (a mean of 30
    standard deviations: 12×) or the fast level's bfloat16 chunk states (4: 11×) err over 5× the naive recurrence
    (Hopper's arithmetic emulated). The backward's products keep three passes anyway (its `do / z` is float32)."""
    from linattn.ops.linear_attention import api

    taken = _spy_precisions(monkeypatch)
    if variant == "one-pass forward":
        monkeypatch.setattr(api, "_run", lambda *a, _run=api._run, **kw: _run(*a, **{**kw, "derived_output": True}))
    else:
        monkeypatch.setattr(api, "_run", lambda *a, _run=api._run, **kw: _run(*a, **{**kw, "fast": True}))
    x, do, _ = _normalized_inputs("offset 30" if variant == "one-pass forward" else "offset 4")
    ours, naive = _errors(x, do)
    assert taken[1].state == "tf32x3" and taken[0].state == "tf32", taken
    assert ours["dq"] > 5 * naive["dq"], (ours["dq"], naive["dq"])


LOW_PRECISION = {
    "gla": Config(T=200),
    "gla-channel": Config(T=200, per_channel=True),
    "linear-varlen": Config(T=200, gate=None, lengths=(1, 70, 5, 124)),
    "normalized": Config(T=200, gate=None, normalize=True),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(LOW_PRECISION))
def test_low_precision_within_twice_naive(name, dtype):
    """Against float64 on the same rounded inputs: within 2× the error of the naive recurrence run in `dtype`
    (float32 state and accumulation). `o` (without the normaliser) and `dq, dk, dv` are rounded to `dtype` inside
    the kernels, where the interpreter truncates bfloat16 (see test_delta_rule_fwd.py); the normalised `o` leaves
    the kernels in float32 and is divided and rounded by torch, as `dg` is (but GLA's kernels round a per-channel
    `dg` themselves); the initial state's gradient stays float32."""
    cfg = LOW_PRECISION[name]
    x = make_inputs(cfg, dtype)
    do, dS = draw_cotangents(x, dtype)
    got = run_grads(x, "triton", do, dS)
    want = run_grads(x, "naive", do, dS, torch.float64)
    naive = run_grads(x, "naive", do, dS)
    assert got[0]["o"].dtype == dtype
    rounded_in_kernel = {"dq", "dk", "dv"} | (set() if cfg.normalize else {"o"})
    if cfg.per_channel:  # GLA's kernels round dg too
        rounded_in_kernel.add("dg")
    for part in (0, 1):
        for n in got[part]:
            what = n if part == 0 else f"d{n}"
            truncated = dtype == torch.bfloat16 and what in rounded_in_kernel
            rounding = INTERPRETED_BF16_ROUNDING if truncated else 1.0
            tol = max(2 * rounding * rel_err(naive[part][n], want[part][n]), FLOOR)
            check(got[part][n], want[part][n], tol, f"{name} {dtype} {what}")


@pytest.mark.parametrize("per_channel", [False, True], ids=["scalar", "channel"])
def test_state_chaining(per_channel):
    """`[0:t]` then `[t:T]` from the carried final state gives the outputs and gradients of `[0:T]` (cut inside a
    chunk)."""
    T, t = 100, 37
    x = make_inputs(Config(T=T, B=2, per_channel=per_channel))
    do, (dS,) = draw_cotangents(x, torch.float32)
    leaves = {n: x[n].detach().clone().requires_grad_() for n in ("q", "k", "v", "g", "S0")}
    opts = {"scale": 0.3, "output_final_state": True, "backend": "triton"}

    def run(sl, state):
        q, k, v, g = (leaves[n][:, sl] for n in ("q", "k", "v", "g"))
        return gated_linear_attention(q, k, v, g, initial_state=state, **opts)

    def grads(o, S):
        return [o, S, *torch.autograd.grad((o * do).sum() + (S * dS).sum(), list(leaves.values()))]

    whole = grads(*run(slice(None), leaves["S0"]))
    o1, S1 = run(slice(0, t), leaves["S0"])
    o2, S2 = run(slice(t, T), S1)
    chained = grads(torch.cat([o1, o2], dim=1), S2)
    for what, a, b in zip(["o", "final state", *(f"d{n}" for n in leaves)], chained, whole):
        check(a, b, 1e-5, f"chaining {what}")


STAGES = {
    "gla": Config(T=200, B=2),
    "gla-varlen": Config(T=140, lengths=(1, 70, 5, 64)),
    "K96-linear": Config(T=65, H=1, K=96, V=40, gate=None, h0=False),
    "strong-decay": Config(T=127, gate="strong"),
}


@pytest.mark.parametrize("name", list(STAGES))
def test_no_erase_stages_match_references(name):
    """Stages 3 and 4 and the backward's B2 and B3 with the erase term off (`k_tilde`, `T_inv` None, `U = V`),
    each against its float64 reference fed the kernels' outputs of the stages before; `local_bwd_ref` is autograd
    of each chunk's forward."""
    cfg = STAGES[name]
    x = make_inputs(cfg)
    q, k, v, g, h0 = (x[n] for n in ("q", "k", "v", "g", "S0"))
    do, (dht,) = draw_cotangents(x, torch.float32)
    scale = 0.3
    layout = chunk_layout(cfg.B, cfg.T, x["cu_seqlens"], q.device)
    G = None if g is None else chunk_cumsum(g, layout)

    h, U, final = state_fwd(None, v, k, G, h0, True, layout)
    assert U is None
    want_h, _, want_final = state_ref(None, v, k, G, h0, layout)
    check(h, want_h, STAGE_TOL, "state h")
    check(final, want_final, STAGE_TOL, "state final")
    check(output_fwd(q, k, G, h, v, scale, layout, torch.float32), output_ref(q, k, G, h, v, scale, layout),
          STAGE_TOL, "output o")  # fmt: skip

    got = state_bwd(q, k, G, None, None, do, dht, scale, h0 is not None, layout)
    want = state_bwd_ref(q, k, G, None, None, do, dht, scale, layout)
    for what, a, b in zip(("dh", "dṼ", "dh0"), got, want):
        if a is not None:
            check(a, b, STAGE_TOL, f"state_bwd {what}")
    dh, dv_tilde, _ = got

    got = local_bwd(q, k, v, None, None, G, h, dh, v, dv_tilde, do, scale, layout, erase=False)
    want = local_bwd_ref(q, k, v, None, None, G, h, dh, do, scale, layout, erase=False)
    for what, a, b in zip(("dq", "dk", "dv", "dw", "dβ", "dG"), got, want):
        assert (a is None) == (b is None), what
        if a is not None:
            check(a, b, STAGE_TOL, f"local_bwd {what}")


LINEAR_CASES = [c for c in CASES if c.id in ("linear", "linear-normalized", "gla-scalar", "gla-channel")]


def test_linear_cases_are_found():
    assert len(LINEAR_CASES) == 4


@pytest.mark.parametrize("case", LINEAR_CASES, ids=[c.id for c in LINEAR_CASES])
def test_shared_cases_f32(case):
    check_shared_case(case, CASE_TOL)


def test_auto_takes_the_kernels_on_cuda_for_every_decay():
    """A per-channel `g` runs on GLA's kernels (`backend="triton"`, and `"auto"` on CUDA); float64 stays on the
    chunk backend."""
    x = make_inputs(Config(T=8, per_channel=True))
    got, _ = gated_linear_attention(x["q"], x["k"], x["v"], x["g"], backend="triton")
    want, _ = gated_linear_attention(x["q"], x["k"], x["v"], x["g"], backend="chunk")
    check(got, want, F32_TOL, "per-channel triton")
    cuda = torch.device("cuda")
    assert check_backend("auto", cuda, BACKENDS, torch.float32) == "triton"
    assert check_backend("auto", cuda, BACKENDS, torch.float64) == "chunk"
    assert check_backend("auto", torch.device("cpu"), BACKENDS, torch.float32) == "chunk"


def test_head_dims_over_256_are_refused():
    x = make_inputs(Config(T=4, H=1, K=16, V=257, gate=None, h0=False))
    with pytest.raises(ValueError, match=r"^q, k, v: .*up to 256, got K=16, V=257"):
        linear_attention(x["q"], x["k"], x["v"], backend="triton")


def test_float64_is_refused():
    x = make_inputs(Config(T=8), torch.float64)
    with pytest.raises(TypeError, match=r"^linear_attention\(backend='triton'\): .*float32, bfloat16 or float16"):
        linear_attention(x["q"], x["k"], x["v"], backend="triton")
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        gated_linear_attention(x["q"], x["k"], x["v"], x["g"], backend="triton")
    o, _ = linear_attention(x["q"], x["k"], x["v"], normalize=True, backend="auto")
    assert o.dtype == torch.float64
