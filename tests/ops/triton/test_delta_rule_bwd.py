"""The chunked Triton backward of the delta rule, and `delta_rule(..., backend="triton")` end to end (on a GPU if
there is one, else in Triton's interpreter on CPU, see tests/conftest.py).

Each backward stage is checked against its PyTorch reference fed the kernels' own inputs, and every gradient of the
public function against autograd of the float64 `naive` recurrence. `torch.empty` is poisoned with NaN
(tests/conftest.py), so an element a kernel forgets to write fails the checks.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import pytest
import torch

from linattn.ops.delta_rule import delta_rule, kaczmarz_beta
from linattn.ops.delta_rule.triton import backward
from linattn.ops.delta_rule.triton import state_bwd as state_bwd_module
from linattn.ops.delta_rule.triton.cumsum import chunk_cumsum, chunk_cumsum_ref
from linattn.ops.delta_rule.triton.local_bwd import local_bwd, local_bwd_ref
from linattn.ops.delta_rule.triton.recompute import wy_apply
from linattn.ops.delta_rule.triton.state import state_fwd
from linattn.ops.delta_rule.triton.state_bwd import state_bwd, state_bwd_ref
from linattn.ops.delta_rule.triton.transpose import chunk_transpose, chunk_transpose_ref
from linattn.ops.delta_rule.triton.wy import wy_fwd, wy_ref
from linattn.ops.utils.layout import chunk_layout
from tests.ops.cases import CASES, rel_err
from tests.ops.triton.test_delta_rule_fwd import (
    DEVICE,
    FLOOR,
    INTERPRETED_BF16_ROUNDING,
    Config,
    check,
    check_shared_case,
    make_inputs,
)

F32_TOL = 5e-5  # float32 inputs against the float64 recurrence, every gradient
STAGE_TOL = 5e-6  # one stage against its float64 reference on the same inputs
CASE_TOL = 1e-5  # the shared cases (tests/ops/cases.py) in float32 against naive in float64
GRADS = ("q", "k", "v", "w", "beta", "g", "initial_state")


def draw_cotangents(x: dict, dtype: torch.dtype, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """`(do, dS)`: the gradient of `o` exactly representable in `dtype` (so the float64 reference sees the same
    values) and of the final state in float32."""
    gen = torch.Generator().manual_seed(seed)
    B, T, H, K = x["q"].shape
    N = B if x["cu_seqlens"] is None else len(x["cu_seqlens"]) - 1
    do = torch.randn(B, T, H, x["v"].shape[-1], generator=gen).to(DEVICE, dtype)
    dS = torch.randn(N, H, K, x["v"].shape[-1], generator=gen).to(DEVICE)
    return do, dS


def run_grads(x: dict, backend: str, scale: float, do, dS, dtype: torch.dtype | None = None) -> tuple[list, dict]:
    """`([o, final_state], {name: gradient})` of `⟨o, do⟩ + ⟨final_state, dS⟩` (`do` or `dS` None: that term is left
    out, and without `dS` no final state is asked for), the floating-point inputs cast to `dtype` if given."""
    leaves = {}
    for name in GRADS:
        t = x[name]
        if t is not None:
            leaves[name] = (t if dtype is None else t.to(dtype)).detach().clone().requires_grad_()
    kwargs = {n: leaves.get(n) for n in ("w", "beta", "g", "initial_state")}
    o, S = delta_rule(
        leaves["q"], leaves["k"], leaves["v"], **kwargs, kaczmarz_eps=x["kaczmarz_eps"], scale=scale,
        output_final_state=dS is not None, cu_seqlens=x["cu_seqlens"], backend=backend,
    )  # fmt: skip
    loss = 0.0
    if do is not None:
        loss = loss + (o.double() * do.double()).sum()
    if dS is not None:
        loss = loss + (S.double() * dS.double()).sum()
    grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
    # an input that does not reach the loss (q when only the final state is used) has a zero gradient
    return [o, S], {n: torch.zeros_like(t) if d is None else d for (n, t), d in zip(leaves.items(), grads)}


def check_grads(x: dict, scale: float, do, dS, tol: float, what: str) -> None:
    """Outputs and every gradient of the triton backend against naive in float64."""
    outs, got = run_grads(x, "triton", scale, do, dS)
    want_outs, want = run_grads(x, "naive", scale, do, dS, torch.float64)
    (o, S), (want_o, want_S) = outs, want_outs
    assert o.dtype == x["v"].dtype and (S is None or S.dtype == torch.float32), f"{what}: o, final state dtypes"
    assert set(got) == set(want)
    for n, d in got.items():
        assert d.dtype == x[n].dtype, f"{what} d{n}: dtype {d.dtype}, expected {x[n].dtype}"
    pairs = {"o": (o, want_o), "final state": (S, want_S), **{f"d{n}": (got[n], want[n]) for n in got}}
    for name, (a, b) in pairs.items():
        if b is not None:
            check(a, b, tol, f"{what} {name}")


# (config, with a gradient for the final state)
SWEEP = {
    "gdn": (Config(), True),
    "two-key": (Config(two_key=True), True),
    "plain": (Config(beta=False, gate=None, h0=False), False),
    "kla": (Config(kaczmarz=True), True),
}


@pytest.mark.parametrize("T", [1, 63, 64, 65, 200])
@pytest.mark.parametrize("name", list(SWEEP))
def test_gradients_match_naive_f32(name, T):
    cfg, final_grad = SWEEP[name]
    cfg = replace(cfg, T=T)
    x = make_inputs(cfg)
    do, dS = draw_cotangents(x, torch.float32)
    check_grads(x, cfg.K**-0.5, do, dS if final_grad else None, F32_TOL, f"{name} T={T}")


AWKWARD = {
    "deltanet": (Config(T=130, gate=None), False),
    "K96": (Config(T=65, H=1, K=96, V=40, two_key=True), True),
    "V96": (Config(T=63, H=1, K=24, V=96, h0=False), True),
    "K>V": (Config(T=130, B=2, H=1, K=32, V=16), True),
    "strong-decay": (Config(T=127, gate="strong", two_key=True), True),
    "varlen": (Config(T=140, B=1, two_key=True, lengths=(1, 70, 5, 64)), True),
    "varlen-plain": (Config(T=196, B=1, beta=False, gate=None, lengths=(65, 1, 130)), False),
    "varlen-no-h0": (Config(T=129, B=1, h0=False, lengths=(63, 64, 2)), True),
    "kla-K96-no-eta": (Config(T=65, H=1, K=96, V=40, two_key=True, beta=False, kaczmarz=True), True),
    "kla-varlen": (Config(T=140, B=1, lengths=(1, 70, 5, 64), kaczmarz=True), True),
    "kla-strong-decay": (Config(T=127, gate="strong", kaczmarz=True), False),
}


@pytest.mark.parametrize("name", list(AWKWARD))
def test_gradients_awkward_shapes(name):
    cfg, final_grad = AWKWARD[name]
    x = make_inputs(cfg)
    do, dS = draw_cotangents(x, torch.float32)
    check_grads(x, cfg.K**-0.5, do, dS if final_grad else None, F32_TOL, name)


# a single sequence of these lengths is cut in two for the backward when SPLIT_BYTES is lowered to 1
CUT = {
    "gdn": (Config(T=200, B=1), True),
    "two-key-odd": (Config(T=131, B=1, two_key=True), True),
    "plain": (Config(T=130, B=1, beta=False, gate=None, h0=False), False),
    "kla": (Config(T=200, B=1, kaczmarz=True), True),
    "one-token-after-the-cut": (Config(T=65, B=1, two_key=True), True),
}


@pytest.mark.parametrize("name", list(CUT))
def test_a_long_sequence_cut_in_two_for_the_backward(name, monkeypatch):
    """The backward of one long sequence in two spans (`backward.py`'s memory note) equals the float64 recurrence's:
    every gradient, the initial state's included, and the state handed from the first span to the second."""
    cfg, final_grad = CUT[name]
    monkeypatch.setattr(backward, "SPLIT_BYTES", 1)
    cut = backward._cut(chunk_layout(1, cfg.T, None, DEVICE), 4 * cfg.H * cfg.K * cfg.V)
    assert cut is not None and 0 < cut < cfg.T and cut % 64 == 0
    x = make_inputs(cfg)
    do, dS = draw_cotangents(x, torch.float32)
    check_grads(x, cfg.K**-0.5, do, dS if final_grad else None, F32_TOL, f"{name} cut at {cut}")


def test_the_cut_allocates_the_whole_gradients_after_the_first_spans_walk(monkeypatch):
    """The memory order of `backward.py`'s docstring: the second span's walk, then the first span's, and only then
    the whole sequence's gradients (alive through neither walk)."""
    events = []

    def recorded(name, fn):
        def call(*args, **kwargs):
            events.append(name)
            return fn(*args, **kwargs)

        return call

    monkeypatch.setattr(backward, "SPLIT_BYTES", 1)
    monkeypatch.setattr(backward, "state_bwd", recorded("walk", backward.state_bwd))
    monkeypatch.setattr(backward, "local_bwd_outputs", recorded("whole gradients", backward.local_bwd_outputs))
    cfg = Config(T=200, B=1, two_key=True)
    x = make_inputs(cfg)
    do, dS = draw_cotangents(x, torch.float32)
    check_grads(x, cfg.K**-0.5, do, dS, F32_TOL, "cut, in order")
    assert events == ["walk", "walk", "whole gradients"], events


def test_short_packed_and_batched_inputs_are_not_cut():
    """The cut counts the bytes of the chunk states and their gradients (`SPLIT_BYTES`): at H = 16, K = V = 128 from
    32K tokens (float32 `h`, `dh`), and at the fast level (bfloat16 `h`, `dh`) from 64K."""
    chunk_state = (4 + 4) * 16 * 128 * 128
    assert backward._cut(chunk_layout(1, 16384, None, DEVICE), chunk_state) is None  # 512 MiB of h and dh
    assert backward._cut(chunk_layout(1, 16384, None, DEVICE), 2 * chunk_state) is not None  # 32 heads
    fast = (2 + 2) * 16 * 128 * 128
    assert backward._cut(chunk_layout(1, 61440, None, DEVICE), fast) is None
    assert backward._cut(chunk_layout(1, 65536, None, DEVICE), fast) is not None
    long = 32768
    assert backward._cut(chunk_layout(1, long, None, DEVICE), chunk_state) == 64 * round(backward.CUT * long / 64)
    assert backward._cut(chunk_layout(2, long, None, DEVICE), chunk_state) is None
    assert backward._cut(chunk_layout(1, long, torch.tensor([0, 5, long]), DEVICE), chunk_state) is None


def test_only_the_final_state_is_used():
    """`o` unused: its gradient arrives as None and the backward runs on `dht` alone."""
    cfg = Config(T=100, two_key=True)
    x = make_inputs(cfg)
    _, dS = draw_cotangents(x, torch.float32)
    check_grads(x, cfg.K**-0.5, None, dS, F32_TOL, "final state only")


LOW_PRECISION = {
    "gdn": Config(T=200),
    "two-key": Config(T=200, two_key=True),
    "varlen": Config(T=200, two_key=True, lengths=(1, 70, 5, 124)),
    "kla": Config(T=200, kaczmarz=True),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(LOW_PRECISION))
def test_low_precision_gradients_within_twice_naive(name, dtype):
    """Against float64 on the same rounded inputs: every gradient within 2× the error of the naive recurrence run in
    `dtype` (float32 state and accumulation, gradients rounded to `dtype`). `dq, dk, dv, dw` are rounded to `dtype`
    inside the kernels, where the interpreter truncates bfloat16 (see test_delta_rule_fwd.py); `dβ, dg` are rounded
    by torch and the initial state's gradient stays float32."""
    cfg = LOW_PRECISION[name]
    x = make_inputs(cfg, dtype)
    scale = cfg.K**-0.5
    do, dS = draw_cotangents(x, dtype)
    _, got = run_grads(x, "triton", scale, do, dS)
    _, want = run_grads(x, "naive", scale, do, dS, torch.float64)
    _, naive = run_grads(x, "naive", scale, do, dS)
    for n in got:
        assert got[n].dtype == x[n].dtype, f"{name} d{n}: dtype {got[n].dtype} != {x[n].dtype}"
        truncated = dtype == torch.bfloat16 and n in ("q", "k", "v", "w")
        rounding = INTERPRETED_BF16_ROUNDING if truncated else 1.0
        check(got[n], want[n], max(2 * rounding * rel_err(naive[n], want[n]), FLOOR), f"{name} {dtype} d{n}")


CHAINING = {
    "gdn": Config(T=150, B=2),
    "two-key": Config(T=150, B=2, two_key=True),
    "kla": Config(T=150, B=2, kaczmarz=True),
}


@pytest.mark.parametrize("name", list(CHAINING))
def test_state_chaining_gradients(name):
    """`[0:t]` then `[t:T]` from the carried final state gives the outputs and gradients of `[0:T]` (the carried
    state's gradient goes back through `dht` of the first call and `dh_0` of the second)."""
    T, t = 150, 67
    x = make_inputs(CHAINING[name])
    do, dS = draw_cotangents(x, torch.float32)
    leaves = {n: x[n].detach().clone().requires_grad_() for n in GRADS if x[n] is not None}
    opts = {"scale": 0.3, "output_final_state": True, "backend": "triton", "kaczmarz_eps": x["kaczmarz_eps"]}

    def call(sl, state):
        p = {n: leaves[n][:, sl] for n in ("q", "k", "v", "w", "beta", "g") if n in leaves}
        return delta_rule(p["q"], p["k"], p["v"], w=p.get("w"), beta=p["beta"], g=p["g"], initial_state=state, **opts)

    def grads(o, S):
        loss = (o * do).sum() + (S * dS).sum()
        return [o, S, *torch.autograd.grad(loss, list(leaves.values()))]

    whole = grads(*call(slice(None), leaves["initial_state"]))
    o1, S1 = call(slice(0, t), leaves["initial_state"])
    o2, S2 = call(slice(t, T), S1)
    chained = grads(torch.cat([o1, o2], dim=1), S2)
    for what, a, b in zip(["o", "final state", *(f"d{n}" for n in leaves)], chained, whole):
        check(a, b, 1e-5, f"chaining {what}")


STAGES = {
    "gdn": (Config(T=200, B=2), True),
    "two-key-varlen": (Config(T=140, two_key=True, lengths=(1, 70, 5, 64)), True),
    "K96-plain": (Config(T=65, H=1, K=96, V=40, beta=False, gate=None, h0=False), False),
    "strong-decay": (Config(T=127, gate="strong", two_key=True), True),
    "T1": (Config(T=1, beta=False, h0=False), False),
    "kla-two-key-varlen": (Config(T=140, two_key=True, lengths=(1, 70, 5, 64), kaczmarz=True), True),
}


@pytest.mark.parametrize(
    ("B", "T", "K", "lengths"), [(2, 130, 96, None), (1, 64, 1, None), (1, 140, 33, (1, 70, 5, 64))]
)
def test_chunk_transpose_is_exact(B, T, K, lengths):
    """The state backward's K̃ᵀ per chunk: a copy, so exactly the reference's, zeros past each sequence's end (the
    poisoned `torch.empty` would show a slot left unwritten)."""
    x = torch.randn(B, T, 3, K, generator=torch.Generator().manual_seed(0)).to(DEVICE)
    cu = None if lengths is None else torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    layout = chunk_layout(B, T, None if cu is None else cu.to(DEVICE), x.device)
    assert torch.equal(chunk_transpose(x, layout), chunk_transpose_ref(x, layout))


# what the state backward's tests take of `walk_inputs`, in this order
WALK = ("q", "k", "v", "beta", "w_or_k", "G", "T_inv", "inv_sq_norm", "layout", "do", "dS")


def walk_inputs(cfg: Config) -> dict:
    """What the state backward's tests feed it, from `make_inputs(cfg)`: the inputs, `w_or_k` (the write key), the
    cotangents `do`, `dS`, the layout, the chunk-local cumulative decay `G` (or None) and the forward's `T_inv`, with
    KLA's `inv_sq_norm`."""
    x = make_inputs(cfg)
    w = x["k"] if x["w"] is None else x["w"]
    do, dS = draw_cotangents(x, torch.float32)
    layout = chunk_layout(cfg.B, cfg.T, x["cu_seqlens"], x["q"].device)
    G = None if x["g"] is None else chunk_cumsum(x["g"], layout)
    T_inv, _, _, inv_sq_norm = wy_fwd(x["k"], x["v"], w, x["beta"], G, layout, x["kaczmarz_eps"])
    return {**x, "w_or_k": w, "do": do, "dS": dS, "layout": layout, "G": G, "T_inv": T_inv, "inv_sq_norm": inv_sq_norm}


@pytest.mark.parametrize("name", list(STAGES))
def test_backward_stages_match_references(name):
    """Each backward stage against its float64 reference, both fed the kernels' outputs of the stages before;
    `local_bwd_ref` is autograd of each chunk's forward, so it checks the derivation, not a transcription of it
    (for KLA with the step `η / (‖k‖² + ε)` inside, so also the step's `dk` and `dη`)."""
    cfg, final_grad = STAGES[name]
    x = walk_inputs(cfg)
    q, k, v, beta, w, G, T_inv, inv_sq_norm, layout, do, dS = (x[n] for n in WALK)
    h0, eps = x["initial_state"], x["kaczmarz_eps"]
    dht = dS if final_grad else None
    scale = 0.3

    u_tilde, k_tilde, k_tilde_t = wy_apply(k, v, beta, G, T_inv, layout, inv_sq_norm)
    step = beta if eps is None else kaczmarz_beta(k.double(), beta.double(), eps)
    _, want_u, want_k = wy_ref(k, v, w, step, G, layout)
    check(u_tilde, want_u, STAGE_TOL, "recompute Ũ")
    check(k_tilde, want_k, STAGE_TOL, "recompute K̃")
    # the transposed keys are the rows' values, stored from the same registers, whichever parts are asked for
    assert torch.equal(k_tilde_t, chunk_transpose(k_tilde, layout))
    assert torch.equal(wy_apply(k, v, beta, G, T_inv, layout, inv_sq_norm, values=False)[2], k_tilde_t)
    only_rows = wy_apply(k, v, beta, G, T_inv, layout, inv_sq_norm, keys_t=False)
    assert torch.equal(only_rows[0], u_tilde) and torch.equal(only_rows[1], k_tilde) and only_rows[2] is None
    h, U, _ = state_fwd(k_tilde, u_tilde, w, G, h0, False, layout)

    got = state_bwd(q, w, G, T_inv, k_tilde_t, do, dht, scale, h0 is not None, layout)
    want = state_bwd_ref(q, w, G, T_inv, k_tilde, do, dht, scale, layout)
    for what, a, b in zip(("dh", "dṼ", "dh0"), got, want):
        if a is not None:
            check(a, b, STAGE_TOL, f"state_bwd {what}")
    dh, dv_tilde, _ = got

    got = local_bwd(q, k, v, x["w"], beta, G, h, dh, U, dv_tilde, do, scale, layout, inv_sq_norm=inv_sq_norm)
    want = local_bwd_ref(q, k, v, x["w"], beta, G, h, dh, do, scale, layout, kaczmarz_eps=eps)
    for what, a, b in zip(("dq", "dk", "dv", "dw", "dβ", "dG"), got, want):
        assert (a is None) == (b is None), what
        if a is not None:
            check(a, b, STAGE_TOL, f"local_bwd {what}")
    dG = got[-1]
    if dG is not None:
        check(chunk_cumsum(dG, layout, reverse=True), chunk_cumsum_ref(dG, layout, reverse=True), STAGE_TOL, "dg")


@pytest.mark.parametrize("name", list(STAGES))
def test_the_walk_reads_ahead_the_same_values(name, monkeypatch):
    """The state backward's walk with its plain loads one step ahead (`reads_ahead`, one-pass launches) gives the
    same bits as the walk that reads them in their own step, whatever the precision."""
    cfg, final_grad = STAGES[name]
    x = walk_inputs(cfg)
    q, k, v, beta, w, G, T_inv, inv_sq_norm, layout, do, dS = (x[n] for n in WALK)
    h0 = x["initial_state"]
    _, _, k_tilde_t = wy_apply(k, v, beta, G, T_inv, layout, inv_sq_norm, values=False)
    got = {}
    for ahead in (False, True):
        monkeypatch.setattr(state_bwd_module, "reads_ahead", lambda precision, ahead=ahead: ahead)
        got[ahead] = state_bwd(q, w, G, T_inv, k_tilde_t, do, dS if final_grad else None, 0.3, h0 is not None, layout)
    for a, b in zip(got[False], got[True]):
        assert (a is None and b is None) or torch.equal(a, b)


SEGMENTED = {
    "gdn-rows": (Config(T=200, B=2), True),
    "two-key-varlen": (Config(T=460, two_key=True, lengths=(1, 200, 5, 254)), True),
    "kla-varlen-no-final-grad": (Config(T=460, lengths=(130, 66, 264), kaczmarz=True, h0=False), False),
    "no-decay": (Config(T=300, gate=None), True),
    "wide-keys": (Config(T=200, K=48, V=40), True),  # the combine's product over two 32-row blocks, one cut
}


# each sequence in 2 – 7 segments (7: more than a packed sequence's chunks), unequal chunk counts among them
@pytest.mark.parametrize(
    ("name", "segments"),
    [("gdn-rows", 2), ("two-key-varlen", 7), ("kla-varlen-no-final-grad", 3), ("no-decay", 2), ("wide-keys", 3)],
)
def test_the_state_backward_in_segments_equals_the_one_pass(name, segments):
    """The state backward with each sequence's segments walked at once (`segments.py`, from each sequence's end)
    against the float64 reference: `dh`, `dṼ` and `dh_0`, with and without the final state's gradient, rows and
    packed sequences, more segments asked than a short sequence has chunks; and without the erase term (linear
    attention's walk: `dṼ = dU`)."""
    cfg, final_grad = SEGMENTED[name]
    x = walk_inputs(cfg)
    q, k, v, beta, w, G, T_inv, inv_sq_norm, layout, do, dS = (x[n] for n in WALK)
    dht = dS if final_grad else None
    _, k_tilde, k_tilde_t = wy_apply(k, v, beta, G, T_inv, layout, inv_sq_norm)
    for erase in (True, False):
        args = (T_inv, k_tilde_t) if erase else (None, None)
        got = state_bwd(q, w, G, *args, do, dht, 0.3, True, layout, segments=segments)
        want = state_bwd_ref(q, w, G, T_inv if erase else None, k_tilde if erase else None, do, dht, 0.3, layout)
        for what, a, b in zip(("dh", "dṼ", "dh0"), got, want):
            check(a, b, STAGE_TOL, f"state_bwd {what}{'' if erase else ' (no erase term)'}")


@pytest.mark.parametrize("segments", [1, 3])
def test_the_state_backward_stores_bfloat16_state_gradients(segments):
    """The fast level's `store=torch.bfloat16`: `E_c` parked in `dh`'s slots and the chunks' `dh` in bfloat16, the
    walk in float32: every output within a few times bfloat16's rounding of the float64 reference (the rounded `E_c`
    accumulate over the chunks walked: `dh` errs 5.2e-3 here, the reference rounded to bfloat16 1.6e-3); the one
    pass and segments alike. The whole op at this level is held to its contract in `test_fast_precision.py`."""
    x = walk_inputs(SEGMENTED["gdn-rows"][0])
    q, k, v, beta, _, G, T_inv, _, layout, do, dS = (x[n] for n in WALK)
    _, k_tilde, k_tilde_t = wy_apply(k, v, beta, G, T_inv, layout)
    got = state_bwd(q, k, G, T_inv, k_tilde_t, do, dS, 0.3, True, layout, segments=segments, store=torch.bfloat16)
    want = state_bwd_ref(q, k, G, T_inv, k_tilde, do, dS, 0.3, layout)
    assert got[0].dtype == torch.bfloat16 and got[1].dtype == got[2].dtype == torch.float32
    for what, a, b, tol in zip(("dh", "dṼ", "dh0"), got, want, (2**-7, 2**-8, 2**-7)):
        check(a.float(), b, tol, f"state_bwd {what} (bfloat16 dh)")


@pytest.mark.parametrize("name", ["varlen", "K>V"])
def test_delta_rule_with_segments_forced_matches_naive(name, monkeypatch):
    """`delta_rule`'s whole forward and backward (the state pass, its recompute and the state backward's walk) with
    every walk in 3 segments a sequence: outputs and every gradient against the float64 recurrence, packed
    sequences and rows."""
    from linattn.ops.delta_rule.triton import forward

    for module in (forward, backward):
        monkeypatch.setattr(module, "state_fwd", partial(module.state_fwd, segments=3))
    monkeypatch.setattr(backward, "state_bwd", partial(backward.state_bwd, segments=3))
    cfg, final_grad = AWKWARD[name]
    x = make_inputs(cfg)
    do, dS = draw_cotangents(x, torch.float32)
    check_grads(x, cfg.K**-0.5, do, dS if final_grad else None, F32_TOL, f"{name}, 3 segments")


@pytest.mark.parametrize(
    ("name", "width", "segments"),
    [("V96", 64, 1), ("K96", 64, 1), ("varlen", 32, 1), ("varlen", 64, 3)],
)
def test_delta_rule_with_wide_value_blocks_matches_naive(name, width, segments, monkeypatch):
    """`delta_rule`'s forward and backward with the state walks' programs on `width` value columns
    (`value_block.FORCED`; the backward's walk at most 32 wide, 16 from K = 256 — its tile limit): outputs and every
    gradient against the float64 recurrence, value dims the blocks do not divide, packed sequences, and with the
    walks in segments."""
    from linattn.ops.delta_rule.triton import forward, value_block

    monkeypatch.setattr(value_block, "FORCED", width)
    for module in (forward, backward):
        monkeypatch.setattr(module, "state_fwd", partial(module.state_fwd, segments=segments))
    monkeypatch.setattr(backward, "state_bwd", partial(backward.state_bwd, segments=segments))
    cfg, final_grad = AWKWARD[name]
    x = make_inputs(cfg)
    do, dS = draw_cotangents(x, torch.float32)
    check_grads(x, cfg.K**-0.5, do, dS if final_grad else None, F32_TOL, f"{name}, value blocks of {width}")


DELTA_IDS = ("deltanet-beta1", "deltanet", "gated-deltanet", "two-key", "kla", "kla-kaczmarz-eps")
DELTA_CASES = [c for c in CASES if c.id in DELTA_IDS]


def test_delta_cases_are_found():
    assert len(DELTA_CASES) == len(DELTA_IDS)


@pytest.mark.parametrize("case", DELTA_CASES, ids=[c.id for c in DELTA_CASES])
def test_shared_cases_f32(case):
    check_shared_case(case, CASE_TOL)


def test_float64_is_refused():
    x = make_inputs(Config(T=8), torch.float64)
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        delta_rule(x["q"], x["k"], x["v"], backend="triton")
    # auto never picks the float32 kernels for float64 inputs (on CPU it is the chunk backend anyway)
    o, _ = delta_rule(x["q"], x["k"], x["v"], backend="auto")
    assert o.dtype == torch.float64


def test_mixed_input_dtypes():
    """VLA's backend passes float32 `k̂`, `α̂` beside bfloat16 `q`, `v`: the final state and the float32 keys'
    gradients keep float32 accuracy against float64 on the same rounded inputs, and every gradient comes back in
    its input's dtype."""
    from linattn.ops.delta_rule.triton.function import delta_rule_triton

    x = make_inputs(Config(T=130, two_key=True))
    low = {n: x[n].to(torch.bfloat16) if n in ("q", "v") else x[n] for n in ("q", "k", "v", "w", "initial_state")}
    leaves = {n: t.detach().clone().requires_grad_() for n, t in low.items()}
    exact = {n: t.detach().double().requires_grad_() for n, t in low.items()}
    do, dS = draw_cotangents(x, torch.float32)
    do = do.bfloat16().float()  # o is bfloat16, so its gradient arrives rounded so
    o, S = delta_rule_triton(leaves["q"], leaves["k"], leaves["v"], leaves["w"], None, None, 0.3,
                             leaves["initial_state"], True, None)  # fmt: skip
    o64, S64 = delta_rule(exact["q"], exact["k"], exact["v"], w=exact["w"], scale=0.3,
                          initial_state=exact["initial_state"], output_final_state=True, backend="naive")  # fmt: skip
    assert o.dtype == torch.bfloat16 and S.dtype == torch.float32
    check(S, S64, F32_TOL, "mixed dtypes: final state")
    got = torch.autograd.grad((o.float() * do).sum() + (S * dS).sum(), list(leaves.values()))
    want = torch.autograd.grad((o64 * do.double()).sum() + (S64 * dS.double()).sum(), list(exact.values()))
    for n, a, b in zip(leaves, got, want):
        assert a.dtype == leaves[n].dtype, f"d{n}: dtype {a.dtype} != {leaves[n].dtype}"
        check(a, b, F32_TOL if a.dtype == torch.float32 else 2e-2, f"mixed dtypes: d{n}")


def test_beta_reaches_the_kernels_in_qs_dtype(monkeypatch):
    """A bfloat16 `beta` beside float32 `q, k, v` (a layer under autocast) reaches the kernels as float32, the
    dtype they are checked with; on a GPU the mixed pair gave wrong gradients with the Kaczmarz step and packed
    sequences (which the interpreter does not reproduce). Its gradient comes back in its own dtype."""
    from linattn.ops.delta_rule.triton import function

    seen = []
    apply = function.DeltaRuleTriton.apply
    monkeypatch.setattr(function.DeltaRuleTriton, "apply", lambda *a: seen.append(a[4].dtype) or apply(*a))
    q, k, v = (torch.randn(1, 20, 2, 16, generator=torch.Generator().manual_seed(s)) for s in (1, 2, 3))
    eta = torch.rand(1, 20, 2, dtype=torch.bfloat16).requires_grad_()
    o, _ = delta_rule(q, k, v, beta=eta, kaczmarz_eps=1e-6, cu_seqlens=torch.tensor([0, 7, 20]), backend="triton")
    o.sum().backward()
    assert seen == [torch.float32] and eta.grad.dtype == torch.bfloat16


def test_a_float32_beta_is_not_rounded_to_bfloat16_qs_dtype():
    """Rounding it put bfloat16's 2⁻⁹ into a single token's final state, far above the naive recurrence's error."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 1, 32, generator=gen).to(torch.bfloat16) for _ in range(3))
    k = torch.nn.functional.normalize(k.float(), dim=-1).to(torch.bfloat16)
    beta = torch.rand(1, 1, 1, generator=gen) * 0.9 + 0.05
    S = {b: delta_rule(q, k, v, beta=beta, output_final_state=True, backend=b)[1].double() for b in ("naive", "triton")}
    want = (beta.double()[0, 0, 0] * k.double()[0, 0, 0, :, None] * v.double()[0, 0, 0, None, :])[None, None]
    assert (S["triton"] - want).norm() / want.norm() < 1e-6 and (S["naive"] - want).norm() / want.norm() < 1e-6
