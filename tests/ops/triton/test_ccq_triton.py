"""`ccq_query(backend="triton")`: CCQ's fused kernels (linattn/ops/ccq/triton/) against the float64 naive recurrence.

Outputs, final states `(C, m, Z)` and every gradient (q, k, λ, g and the initial state's) for the cases of
tests/ops/cases.py (centred or not, decayed or not, normalised keys or raw), awkward lengths, head dims 16 … 128
(96 padded), packed sequences in one launch, state chaining and low precision. `torch.empty` is poisoned with NaN
(tests/conftest.py), so an element a kernel forgets to write fails the checks.
"""

from __future__ import annotations

import pytest
import torch

from linattn.ops import ccq_query
from tests.ops.cases import CASES, Sizes, check_chaining, check_float32_against_naive, draw, grads, rel_err
from tests.ops.triton.test_delta_rule_fwd import FLOOR, INTERPRETED_BF16_ROUNDING

CCQ_CASES = [c for c in CASES if c.id.startswith("ccq")]
IDS = [c.id for c in CCQ_CASES]
OUT_TOL, GRAD_TOL = 1e-5, 2e-5  # float32 inputs against the float64 recurrence


@pytest.mark.parametrize("T", [1, 63, 65, 200])
@pytest.mark.parametrize("case", CCQ_CASES, ids=IDS)
def test_forward_and_gradients_match_naive(case, T):
    check_float32_against_naive(case, Sizes(B=2, T=T, K=16), "triton", OUT_TOL, GRAD_TOL)


@pytest.mark.parametrize("K", [32, 64, 96, 128])
@pytest.mark.parametrize("case", CCQ_CASES, ids=IDS)
def test_head_dims(case, K):
    """Several key and column blocks (64 wide), a padded one at K = 96, the whole key dim in the state walks."""
    check_float32_against_naive(case, Sizes(B=1, T=65, H=1, K=K), "triton", OUT_TOL, GRAD_TOL)


# the second set walks more chunks than one step of the state scan takes (state.SCAN_CB = 16), in both directions
@pytest.mark.parametrize("lengths", [[1, 70, 7, 64], [1093, 5, 1030]], ids=["short", "many-chunks"])
@pytest.mark.parametrize("case", CCQ_CASES[:2], ids=IDS[:2])
def test_varlen_in_one_launch(case, lengths):
    tokens, state = draw(case, Sizes(B=1, T=sum(lengths), K=16), N=len(lengths))
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    f32 = [x.float().requires_grad_() for x in (*tokens.values(), *state)]
    f64 = [x.detach().requires_grad_() for x in (*tokens.values(), *state)]
    n = len(tokens)
    got = case.run(dict(zip(tokens, f32[:n])), tuple(f32[n:]), "triton", cu_seqlens=cu)
    want = case.run(dict(zip(tokens, f64[:n])), tuple(f64[n:]), "naive", cu_seqlens=cu)
    for a, b in zip(got, want):
        assert rel_err(a, b) < OUT_TOL
    for a, b in zip(grads(got, f32, seed=3), grads(want, f64, seed=3)):
        assert rel_err(a, b) < GRAD_TOL


def test_state_chaining():
    """Running `[0:t]` then `[t:T]` from the carried `(C, m, Z)` equals running `[0:T]`: outputs, final states and
    the gradients of q, k, λ and g, through the carried state too."""
    tokens, _ = draw(CCQ_CASES[1], Sizes(B=2, T=150, K=32))
    xs = {n: tokens[n].float().requires_grad_() for n in ("q", "k", "lam", "g")}

    def run(span, state):
        q, k, lam, g = (x[:, span] for x in xs.values())
        y, S = ccq_query(q, k, lam, g=g, initial_state=state, output_final_state=True, backend="triton")
        return [y, *S]

    check_chaining(run, xs, OUT_TOL, GRAD_TOL)


def test_initial_state_gradient_is_not_symmetrised():
    """The state is read as `C_tᵀ q_t`, as the naive recurrence reads it: a non-symmetric `C_0` gets the same
    (non-symmetric) gradient from both, and only the final state's gradient flows when `q'` is unused."""
    gen = torch.Generator().manual_seed(5)
    B, T, H, K = 1, 80, 2, 16
    q, k = torch.randn(B, T, H, K, generator=gen, dtype=torch.float64), torch.randn(B, T, H, K, generator=gen)
    lam, g = torch.rand(B, T, H, generator=gen), -torch.rand(B, T, H, generator=gen) * 0.2
    state = (torch.randn(B, H, K, K, generator=gen), torch.randn(B, H, K, generator=gen), torch.rand(B, H) + 1)
    leaves = [x.double().detach() for x in (q, k, lam, g, *state)]

    def run(backend, dtype, drop_output):
        xs = [x.to(dtype).requires_grad_() for x in leaves]
        y, S = ccq_query(*xs[:3], g=xs[3], initial_state=tuple(xs[4:]), output_final_state=True, backend=backend)
        outs = list(S) if drop_output else [y, *S]
        return outs, grads(outs, xs, seed=3)

    for drop_output in (False, True):
        (got, dgot), (want, dwant) = run("triton", torch.float32, drop_output), run("naive", torch.float64, drop_output)
        for a, b in zip([*got, *dgot], [*want, *dwant]):
            assert rel_err(a, b) < GRAD_TOL
    y, S = ccq_query(*(x.float() for x in leaves[:3]), backend="triton")
    assert S is None and torch.isfinite(y).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", CCQ_CASES, ids=IDS)
def test_low_precision_within_twice_naive(case, dtype):
    """docs/design.md §4: every output and gradient within 2× the naive recurrence's own error in the same dtype
    (float32 states both); the interpreter truncates float32 → bfloat16 casts, so what the kernels round to bfloat16
    (q' and the token gradients) is allowed that factor on CPU."""
    tokens, state = draw(case, Sizes(B=1, T=130, K=32), requires_grad=True)
    reference = case.run(tokens, state, "naive")
    d_reference = grads(reference, [*tokens.values(), *state], seed=3)
    low = {n: x.detach().to(dtype) for n, x in tokens.items()}
    results = {}
    for backend in ("naive", "triton"):
        xs = [x.detach().requires_grad_() for x in (*low.values(), *(s.detach().float() for s in state))]
        outs = case.run(dict(zip(low, xs[: len(low)])), tuple(xs[len(low) :]), backend)
        results[backend] = [*outs, *grads(outs, xs, seed=3)]
    rounded = [True, False, False, False, *[True] * len(low), False, False, False]
    rounding = INTERPRETED_BF16_ROUNDING if dtype == torch.bfloat16 else 1.0
    for i, (ours, naive, ref) in enumerate(zip(results["triton"], results["naive"], [*reference, *d_reference])):
        bound = max(2 * (rounding if rounded[i] else 1.0) * rel_err(naive, ref), FLOOR)
        assert rel_err(ours, ref) <= bound, f"{case.id} {dtype} quantity {i}: {rel_err(ours, ref):.2e} > {bound:.2e}"


def test_float64_is_refused():
    tokens, _ = draw(CCQ_CASES[0], Sizes(B=1, T=5, K=8))
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        ccq_query(tokens["q"], tokens["k"], tokens["lam"], backend="triton")


def test_normalised_keys_keep_their_dtype():
    """The keys are normalised in float32 (`unit_rows`) and must come back in their own dtype: the kernels refuse a
    float32 `k` beside a bfloat16 `q`."""
    tokens, _ = draw(CCQ_CASES[0], Sizes(B=1, T=20, K=16))
    q, k = (tokens[n].to(torch.bfloat16) for n in "qk")
    out, _ = ccq_query(q, k, tokens["lam"], normalize_keys=True, backend="triton")
    assert out.dtype == torch.bfloat16


# the cases' options, called as a training step calls them: no initial state, no final state, a gradient asked for
TRAINING_OPTIONS = {
    "ccq": {},
    "ccq-decay-uncentered": {"centered": False},
    "ccq-decay-rawkeys": {"normalize_keys": False},
}


def _training_call(case, tokens, backend):
    x = dict(tokens)
    y, S = ccq_query(x.pop("q"), x.pop("k"), x.pop("lam"), **x, **TRAINING_OPTIONS[case.id], backend=backend)
    assert S is None
    return y


@pytest.mark.parametrize("K", [16, 64])
@pytest.mark.parametrize("T", [63, 65, 200])
@pytest.mark.parametrize("case", CCQ_CASES, ids=IDS)
def test_training_call_matches_naive(case, T, K):
    """Without states, up to `KEEP_STATES_MAX_K`, the forward keeps its chunk-start states and its read `u, b, z, ρ`,
    and the backward's row scalars come from them (`local_bwd.rows_kept`): `q'` and every gradient against float64."""
    tokens, _ = draw(case, Sizes(B=2, T=T, K=K), requires_grad=True)
    low = {n: x.detach().float().requires_grad_() for n, x in tokens.items()}
    got, want = _training_call(case, low, "triton"), _training_call(case, tokens, "naive")
    assert rel_err(got, want) < OUT_TOL
    for a, b in zip(grads([got], list(low.values())), grads([want], list(tokens.values()))):
        assert rel_err(a, b) < GRAD_TOL


@pytest.mark.parametrize("case", CCQ_CASES, ids=IDS)
def test_training_call_of_one_token(case):
    """At T = 1 from no state the centred covariance `k kᵀ − k kᵀ` is 0 exactly, so `q' = q` and the gradients of
    `k` and `λ` vanish (the reference's are 0, and a relative error has no scale): absolute errors, inputs of unit
    scale."""
    tokens, _ = draw(case, Sizes(B=2, T=1, K=32), requires_grad=True)
    low = {n: x.detach().float().requires_grad_() for n, x in tokens.items()}
    got, want = _training_call(case, low, "triton"), _training_call(case, tokens, "naive")
    assert (got.double() - want).abs().max() < 1e-6
    for a, b in zip(grads([got], list(low.values())), grads([want], list(tokens.values()))):
        assert (a.double() - b).abs().max() < 1e-5


@pytest.mark.parametrize("case", CCQ_CASES, ids=IDS)
def test_training_call_in_bfloat16_within_twice_naive(case, monkeypatch):
    """docs/design.md §4 for the kept path with one tf32 pass (a bfloat16 training call, `ONE_PASS_TOKENS` lowered so
    that 130 tokens take it): `q'` and every gradient within 2× the naive recurrence's error in bfloat16."""
    from linattn.ops.utils import precision

    monkeypatch.setattr(precision, "ONE_PASS_TOKENS", 1)
    tokens, _ = draw(case, Sizes(B=1, T=130, K=32), requires_grad=True)
    reference = _training_call(case, tokens, "naive")
    d_reference = grads([reference], list(tokens.values()))
    results = {}
    for backend in ("naive", "triton"):
        xs = {n: x.detach().to(torch.bfloat16).requires_grad_() for n, x in tokens.items()}
        out = _training_call(case, xs, backend)
        results[backend] = [out, *grads([out], list(xs.values()))]
    for i, (ours, naive, ref) in enumerate(zip(results["triton"], results["naive"], [reference, *d_reference])):
        bound = max(2 * INTERPRETED_BF16_ROUNDING * rel_err(naive, ref), FLOOR)
        assert rel_err(ours, ref) <= bound, f"{case.id} quantity {i}: {rel_err(ours, ref):.2e} > {bound:.2e}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_kept_forward_spares_the_backward_its_state_pass_and_score_tiles(dtype, monkeypatch):
    """Up to `KEEP_STATES_MAX_K` the backward takes the forward's chunk-start states and read instead of recomputing
    them: one state pass instead of two, `rows_kept` instead of `rows_bwd`, and the same gradients to float32's
    rounding (the kept `u`, `b` come from products where `rows_bwd` takes row sums of score tiles)."""
    from linattn.ops.ccq.triton import function
    from linattn.ops.utils import precision

    monkeypatch.setattr(precision, "ONE_PASS_TOKENS", 1)  # a bfloat16 training call at a short length
    gen = torch.Generator().manual_seed(0)
    shape = (1, 140, 2, 32)
    q = torch.randn(*shape, generator=gen).to(dtype).requires_grad_()
    k = torch.nn.functional.normalize(torch.randn(*shape, generator=gen), dim=-1).to(dtype).requires_grad_()
    lam = torch.rand(*shape[:3], generator=gen).requires_grad_()
    g = (-0.1 * torch.rand(*shape[:3], generator=gen)).requires_grad_()
    w = torch.randn(*shape, generator=gen)
    calls = []
    for name in ("state_fwd", "rows_bwd", "rows_kept"):
        kernel = getattr(function, name)
        monkeypatch.setattr(function, name, lambda *a, _n=name, _f=kernel: calls.append(_n) or _f(*a))

    def gradients():
        calls.clear()
        y, _ = ccq_query(q, k, lam, g=g, normalize_keys=False, backend="triton")
        return torch.autograd.grad((y.float() * w).sum(), (q, k, lam, g))

    kept = gradients()
    assert calls == ["state_fwd", "rows_kept"]
    monkeypatch.setattr(function, "KEEP_STATES_MAX_K", 0)
    recomputed = gradients()
    assert calls == ["state_fwd", "state_fwd", "rows_bwd"]
    for a, b in zip(kept, recomputed):
        assert rel_err(a, b) < 1e-5


def test_inference_keeps_nothing(monkeypatch):
    """Without a gradient to come (no input requiring one, or grad mode off) the forward writes only `q'`."""
    from linattn.ops.ccq.triton import function

    keeps = []
    output_fwd = function.output_fwd
    monkeypatch.setattr(function, "output_fwd", lambda *a, keep: keeps.append(keep) or output_fwd(*a, keep=keep))
    x = torch.randn(1, 70, 2, 16)
    lam = torch.rand(1, 70, 2)
    ccq_query(x, x, lam, backend="triton")
    with torch.no_grad():
        ccq_query(x.requires_grad_(), x, lam, backend="triton")
    ccq_query(x, x, lam, backend="triton")
    assert keeps == [False, False, True]


def test_states_are_kept_only_where_the_backward_would_recompute_them_alike():
    from linattn.ops.ccq.triton.function import keeps_states
    from linattn.ops.utils.precision import ONE_PASS_TOKENS

    x = torch.zeros(1, ONE_PASS_TOKENS, 1, 32, dtype=torch.bfloat16)
    assert keeps_states(x, x, None, False, "tf32")
    assert not keeps_states(x, x.float(), None, False, "tf32")  # float32 keys: the backward takes three passes
    assert not keeps_states(x, x, None, True, "tf32") and not keeps_states(x, x, (x,), False, "tf32")
    assert not keeps_states(torch.zeros(1, 8, 1, 128), torch.zeros(1, 8, 1, 128), None, False, "tf32x3")  # K > 64
