"""The chunked Triton forward of the delta rule (on a GPU if there is one, else in Triton's interpreter on CPU,
see tests/conftest.py).

Each stage is checked against its PyTorch reference fed the kernel's own inputs, and the whole forward against
the float64 `naive` recurrence. Launchers allocate with `torch.empty`, which tests/conftest.py fills with NaN, so
an element a kernel forgets to write comes out non-finite and fails the checks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import pytest
import torch
import torch.nn.functional as F

from linattn.ops.delta_rule import delta_rule, kaczmarz_beta
from linattn.ops.delta_rule.triton import delta_rule_fwd
from linattn.ops.delta_rule.triton import segments as segments_module
from linattn.ops.delta_rule.triton import value_block as value_block_module
from linattn.ops.delta_rule.triton.cumsum import chunk_cumsum, chunk_cumsum_ref
from linattn.ops.delta_rule.triton.output import output_fwd, output_ref
from linattn.ops.delta_rule.triton.segments import segment_count
from linattn.ops.delta_rule.triton.state import state_fwd, state_ref
from linattn.ops.delta_rule.triton.value_block import value_block
from linattn.ops.delta_rule.triton.wy import wy_fwd, wy_ref
from linattn.ops.utils.layout import chunk_layout
from linattn.ops.utils.precision import state_precision
from tests.ops.cases import Case, Sizes, draw, rel_err

F32_TOL = 2e-5  # float32 inputs against the float64 recurrence
STAGE_TOL = 2e-6  # one stage against its float64 reference on the same inputs
FLOOR = 1e-6  # low precision: as tests/ops/test_precision.py, 2× naive's error but at least ~8 float32 ulp
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclass(frozen=True)
class Config:
    """One forward: sizes, which optional inputs are given, and packed sequence lengths (then B = 1)."""

    T: int = 64
    B: int = 1
    H: int = 2
    K: int = 16
    V: int = 32
    two_key: bool = False  # w ≠ k
    beta: bool = True
    # None, "mild" (the state lives across chunks) or "strong" (about e^-100 across a chunk: exp(G_t − G_s)
    # overflows float32 wherever it is not masked first)
    gate: str | None = "mild"
    h0: bool = True
    lengths: tuple[int, ...] | None = None
    kaczmarz: bool = False  # KLA: raw keys, the step β = η / (‖k‖² + ε) formed by the op (`beta` is η)


KACZMARZ_EPS = 1e-6


def make_inputs(cfg: Config, dtype: torch.dtype = torch.float32, seed: int = 0) -> dict:
    """Inputs in `dtype` (the state in float32); unit keys and write directions keep the recurrence stable. KLA's raw
    keys get norms from about 0.3 to 15 (the Kaczmarz step keeps the write a contraction whatever the norm)."""
    gen = torch.Generator().manual_seed(seed)
    B, T, H, K, V = cfg.B, cfg.T, cfg.H, cfg.K, cfg.V
    if cfg.lengths is not None:
        assert B == 1 and sum(cfg.lengths) == T
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)
    u = lambda *s: torch.rand(*s, generator=gen, dtype=torch.float64)
    k = F.normalize(r(B, T, H, K), dim=-1)
    g = {None: None, "mild": -0.1 * u(B, T, H), "strong": -(3 * u(B, T, H) + 0.05)}[cfg.gate]
    N = B if cfg.lengths is None else len(cfg.lengths)
    x = {
        "q": r(B, T, H, K),
        "k": k,
        "v": r(B, T, H, V),
        # a write direction near the key, as VLA's α̂ (α̂ᵀk̂ > 0): the two-key write stays a contraction
        "w": F.normalize(k + 0.5 * r(B, T, H, K), dim=-1) if cfg.two_key else None,
        "beta": u(B, T, H) if cfg.beta else None,
        "g": g,
    }
    if cfg.kaczmarz:
        x["k"] = k * (0.1 + 3 * u(B, T, H, 1))
    x = {n: None if t is None else t.to(DEVICE, dtype) for n, t in x.items()}
    x["initial_state"] = r(N, H, K, V).to(DEVICE, torch.float32) if cfg.h0 else None
    x["cu_seqlens"] = None if cfg.lengths is None else torch.tensor([0, *cfg.lengths], device=DEVICE).cumsum(0)
    x["kaczmarz_eps"] = KACZMARZ_EPS if cfg.kaczmarz else None
    return x


def run_triton(x: dict, scale: float):
    o, S, _ = delta_rule_fwd(
        x["q"], x["k"], x["v"], x["w"], x["beta"], x["g"], scale, x["initial_state"], True, x["cu_seqlens"],
        kaczmarz_eps=x["kaczmarz_eps"],
    )  # fmt: skip
    return o, S


def run_naive(x: dict, scale: float, dtype: torch.dtype | None = None):
    """The naive recurrence on `x`, its floating-point inputs (the state included) cast to `dtype` if given."""
    cast = lambda n, t: t.to(dtype) if dtype is not None and torch.is_tensor(t) and n != "cu_seqlens" else t
    y = {n: cast(n, t) for n, t in x.items()}
    kwargs = {n: y[n] for n in ("w", "beta", "g", "initial_state", "cu_seqlens", "kaczmarz_eps")}
    return delta_rule(y["q"], y["k"], y["v"], scale=scale, output_final_state=True, backend="naive", **kwargs)


def check(got: torch.Tensor, want: torch.Tensor, tol: float, what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert torch.isfinite(got).all(), f"{what}: non-finite values (an unwritten or overflowing element)"
    err = rel_err(got, want)
    assert err <= tol, f"{what}: relative RMS error {err:.2e} > {tol:.0e}"


def check_shared_case(case: Case, tol: float) -> None:
    """One case of the backend tests (tests/ops/cases.py), T = 70 and packed, with the triton backend in float32
    against naive in float64 on the same float32 values: outputs, final states and every gradient."""
    lengths = [1, 70, 5]
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], device=DEVICE)
    for sizes, cu_seqlens in ((Sizes(B=2, T=70), None), (Sizes(B=1, T=sum(lengths)), cu)):
        tokens, state = draw(case, sizes, N=None if cu_seqlens is None else len(lengths))
        tokens = {n: t.to(DEVICE, torch.float32) for n, t in tokens.items()}
        state = tuple(s.to(DEVICE, torch.float32) for s in state)
        leaves = [*tokens.values(), *state]
        gen = torch.Generator().manual_seed(1)

        def run(backend, dtype):
            cast = [x.detach().to(dtype).requires_grad_() for x in leaves]
            outs = case.run(dict(zip(tokens, cast)), tuple(cast[len(tokens) :]), backend, cu_seqlens)
            cot = [torch.randn(o.shape, generator=gen.manual_seed(i)).to(DEVICE) for i, o in enumerate(outs)]
            loss = sum((o.double() * c.double()).sum() for o, c in zip(outs, cot))
            return [*outs, *torch.autograd.grad(loss, cast)]

        got, want = run("triton", torch.float32), run("naive", torch.float64)
        names = ["o", *(f"final state[{i}]" for i in range(len(state))), *(f"d{n}" for n in tokens)]
        names += [f"dinitial_state[{i}]" for i in range(len(state))]
        assert len(names) == len(got) == len(want)
        for what, a, b in zip(names, got, want):
            check(a, b, tol, f"{case.id} {'packed' if cu_seqlens is not None else 'B=2'} {what}")


def test_empty_is_poisoned():
    """The NaN checks below prove something only while tests/conftest.py poisons `torch.empty`."""
    assert torch.isnan(torch.empty(4, device=DEVICE)).all()


FORWARD = {
    "deltanet": Config(gate=None),
    "gdn": Config(),
    "two-key": Config(two_key=True),
    "plain": Config(beta=False, gate=None, h0=False),
    "kla": Config(kaczmarz=True),
}


@pytest.mark.parametrize("T", [1, 63, 64, 65, 200])
@pytest.mark.parametrize("name", list(FORWARD))
def test_forward_matches_naive_f32(name, T):
    cfg = replace(FORWARD[name], T=T)
    x = make_inputs(cfg)
    scale = cfg.K**-0.5
    o, S = run_triton(x, scale)
    want_o, want_S = run_naive(x, scale, torch.float64)
    assert o.dtype == torch.float32 and S.dtype == torch.float32
    check(o, want_o, F32_TOL, f"{name} T={T} o")
    check(S, want_S, F32_TOL, f"{name} T={T} final state")


AWKWARD = {
    "K96": Config(T=65, H=1, K=96, V=40, two_key=True),
    "V96": Config(T=63, H=1, K=24, V=96),
    "K>V": Config(T=130, B=2, H=1, K=32, V=16),
    "strong-decay": Config(T=127, gate="strong", two_key=True),
    "varlen": Config(T=140, B=1, two_key=True, lengths=(1, 70, 5, 64)),
    "varlen-plain": Config(T=196, B=1, beta=False, gate=None, lengths=(65, 1, 130)),
    "varlen-no-h0": Config(T=129, B=1, h0=False, lengths=(63, 64, 2)),
    "kla-K96-no-eta": Config(T=65, H=1, K=96, V=40, two_key=True, beta=False, kaczmarz=True),
    "kla-varlen": Config(T=140, B=1, lengths=(1, 70, 5, 64), kaczmarz=True),
}


@pytest.mark.parametrize("name", list(AWKWARD))
def test_forward_awkward_shapes(name):
    cfg = AWKWARD[name]
    x = make_inputs(cfg)
    scale = cfg.K**-0.5
    o, S = run_triton(x, scale)
    want_o, want_S = run_naive(x, scale, torch.float64)
    check(o, want_o, F32_TOL, f"{name} o")
    check(S, want_S, F32_TOL, f"{name} final state")


# Triton's interpreter truncates float32 -> bfloat16 casts (`cast_impl` in triton/runtime/interpreter.py passes no
# rounding mode), twice the RMS error of the round-to-nearest that the GPU and torch (hence `naive`) apply; the
# kernels store `o` in the input dtype, so on CPU a bfloat16 `o` may carry that factor on top of the 2× rule.
INTERPRETED_BF16_ROUNDING = 2.0 if os.environ.get("TRITON_INTERPRET") == "1" else 1.0


LOW_PRECISION = {
    "gdn": Config(T=200),
    "two-key": Config(T=200, two_key=True),
    "varlen": Config(T=200, two_key=True, lengths=(1, 70, 5, 124)),
    "kla": Config(T=200, kaczmarz=True),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(LOW_PRECISION))
def test_low_precision_within_twice_naive(name, dtype):
    """Against float64 on the same rounded inputs: at most 2× the error of the naive recurrence in `dtype`
    (which, like the kernels, keeps its state in float32)."""
    cfg = LOW_PRECISION[name]
    x = make_inputs(cfg, dtype)
    scale = cfg.K**-0.5
    o, S = run_triton(x, scale)
    assert o.dtype == dtype and S.dtype == torch.float32
    (want_o, want_S), (naive_o, naive_S) = run_naive(x, scale, torch.float64), run_naive(x, scale)
    rounding = INTERPRETED_BF16_ROUNDING if dtype == torch.bfloat16 else 1.0
    check(o, want_o, max(2 * rounding * rel_err(naive_o, want_o), FLOOR), f"{name} {dtype} o")
    check(S, want_S, max(2 * rel_err(naive_S, want_S), FLOOR), f"{name} {dtype} final state")


def test_without_final_state():
    x = make_inputs(Config(T=65))
    o, S, saved = delta_rule_fwd(x["q"], x["k"], x["v"], None, x["beta"], x["g"], 0.25, None, False, None)
    assert S is None and torch.isfinite(o).all()
    assert saved.T_inv.shape == (1, 65, 2, 64) and saved.G.shape == (1, 65, 2)


def test_a_bfloat16_o_alone_takes_one_tf32_pass():
    """The state products' precision follows the outputs asked (`precision.py`); the interpreter computes both
    exactly, so here the bfloat16 forward without a final state is held to the rule of the one with it. On a GPU,
    `python -m linattn.bench verify`'s `no-ht` cases check the tf32 pass itself."""
    assert state_precision(torch.bfloat16, output_final_state=False) == "tf32"
    for dtype, final in ((torch.bfloat16, True), (torch.float16, False), (torch.float32, False)):
        assert state_precision(dtype, output_final_state=final) == "tf32x3"
    x = make_inputs(Config(T=130, two_key=True), torch.bfloat16)
    o, S, _ = delta_rule_fwd(x["q"], x["k"], x["v"], x["w"], x["beta"], x["g"], 0.25, x["initial_state"], False, None)
    (want_o, _), (naive_o, _) = run_naive(x, 0.25, torch.float64), run_naive(x, 0.25)
    bound = max(2 * INTERPRETED_BF16_ROUNDING * rel_err(naive_o, want_o), FLOOR)
    assert S is None
    check(o, want_o, bound, "bfloat16 o without a final state")


STAGES = {
    "gdn": Config(T=200, B=2),
    "two-key-varlen": Config(T=140, two_key=True, lengths=(1, 70, 5, 64)),
    "K96-plain": Config(T=65, H=1, K=96, V=40, beta=False, gate=None),
    "strong-decay": Config(T=127, gate="strong", two_key=True),
    "T1": Config(T=1, beta=False, h0=False),
    "kla-varlen": Config(T=140, lengths=(1, 70, 5, 64), kaczmarz=True),
}


@pytest.mark.parametrize("name", list(STAGES))
def test_stages_match_references(name):
    """Each stage against its reference, both fed the kernels' outputs of the stages before; for KLA the WY stage
    against `wy_ref` given the step `kaczmarz_beta(k, η)`, and its saved `r` against `1 / (‖k‖² + ε)`."""
    cfg = STAGES[name]
    x = make_inputs(cfg)
    q, k, v, beta, g, h0 = (x[n] for n in ("q", "k", "v", "beta", "g", "initial_state"))
    w = k if x["w"] is None else x["w"]
    layout = chunk_layout(cfg.B, cfg.T, x["cu_seqlens"], q.device)

    G = None
    if g is not None:
        G = chunk_cumsum(g, layout)
        check(G, chunk_cumsum_ref(g, layout), STAGE_TOL, "cumsum G")

    eps = x["kaczmarz_eps"]
    *got, inv_sq_norm = wy_fwd(k, v, w, beta, G, layout, eps)
    step = beta if eps is None else kaczmarz_beta(k.double(), beta.double(), eps)
    for what, a, b in zip(("T", "Ũ", "K̃"), got, wy_ref(k, v, w, step, G, layout)):
        check(a, b, STAGE_TOL, f"wy {what}")
    if eps is None:
        assert inv_sq_norm is None
    else:
        check(inv_sq_norm, 1 / (k.double().pow(2).sum(-1) + eps), STAGE_TOL, "wy r")
    _, u_tilde, k_tilde = got

    got = state_fwd(k_tilde, u_tilde, w, G, h0, True, layout)
    for what, a, b in zip(("h", "U", "final"), got, state_ref(k_tilde, u_tilde, w, G, h0, layout)):
        check(a, b, STAGE_TOL, f"state {what}")
    h, U, _ = got

    o = output_fwd(q, w, G, h, U, 0.3, layout, torch.float32)
    check(o, output_ref(q, w, G, h, U, 0.3, layout), STAGE_TOL, "output o")


SEGMENTED = {
    "gdn-rows": Config(T=200, B=2),
    "two-key-varlen": Config(T=460, two_key=True, lengths=(1, 200, 5, 254)),
    "no-decay-two-key": Config(T=300, two_key=True, gate=None),  # float32 w without a decay: read transposed
    "wide-keys": Config(T=200, K=48, V=40),  # the combine's product over two 32-row blocks of the state, one cut
}


# each sequence in 2 – 7 segments (7: more than a packed sequence's chunks), unequal chunk counts among them; keys
# wider than the combine's 32-row blocks
@pytest.mark.parametrize(
    ("name", "segments"),
    [("gdn-rows", 2), ("two-key-varlen", 7), ("no-decay-two-key", 2), ("wide-keys", 3)],
)
def test_the_state_pass_in_segments_equals_the_one_pass(name, segments):
    """The state pass with each sequence cut into segments walked at once (`segments.py`: their transitions, the
    combined start states, then each segment again) against the float64 reference: chunk states, pseudo-values and
    final states, with an initial state, rows and packed sequences, segments of unequal chunk counts, more segments
    asked than a short sequence has chunks; and without the erase term (linear attention's pass)."""
    cfg = SEGMENTED[name]
    x = make_inputs(cfg)
    k, v, beta, g, h0 = (x[n] for n in ("k", "v", "beta", "g", "initial_state"))
    w = k if x["w"] is None else x["w"]
    layout = chunk_layout(cfg.B, cfg.T, x["cu_seqlens"], k.device)
    G = None if g is None else chunk_cumsum(g, layout)
    eps = x["kaczmarz_eps"]
    step = beta if eps is None else kaczmarz_beta(k, beta, eps)
    _, u_tilde, k_tilde, _ = wy_fwd(k, v, w, step if eps is None else beta, G, layout, eps)
    want = state_ref(k_tilde, u_tilde, w, G, h0, layout)
    got = state_fwd(k_tilde, u_tilde, w, G, h0, True, layout, segments=segments)
    for what, a, b in zip(("h", "U", "final"), got, want):
        check(a, b, STAGE_TOL, f"state {what}")
    h, _, final = state_fwd(None, v, k, G, h0, True, layout, segments=segments)
    for what, a, b in zip(("h", "final"), (h, final), state_ref(None, v, k, G, h0, layout)[::2]):
        check(a, b, STAGE_TOL, f"linear attention's state {what}")


@pytest.mark.parametrize(
    ("heads", "T", "lengths", "want"),
    [(1, 131072, None, 16), (2, 131072, None, 8), (4, 65536, None, 4), (8, 65536, None, 1), (16, 65536, None, 1),
     (1, 65536, None, 10), (1, 32768, None, 5), (1, 16384, None, 1), (1, 70000, (63000, 7000), 1),
     (1, 2 * 65536, (65536, 65536), 8)],
)  # fmt: skip
def test_segment_count_fills_the_sms_once_where_the_one_pass_leaves_them_idle(heads, T, lengths, want):
    """The chooser on a 132-SM GPU at K = V = 128 (8 value blocks a sequence-head): 16, 8, 4 segments for 1, 2, 4
    sequence-heads on long sequences (two packed sequences count as two), the one pass from 8 on; fewer where a
    segment would be shorter than 96 chunks, and the one pass where the shortest sequence has fewer than 4 × 96
    chunks; off CUDA always the one pass."""
    cu = None if lengths is None else torch.tensor([0, *lengths]).cumsum(0)
    layout = chunk_layout(1, T, cu, torch.device("cpu"))
    programs = layout.N * heads * 8

    class Properties:
        multi_processor_count = 132

    with pytest.MonkeyPatch.context() as m:
        m.setattr(segments_module.torch.cuda, "get_device_properties", lambda device: Properties())
        assert segment_count(layout, programs, torch.device("cuda")) == want
    assert segment_count(layout, programs, torch.device("cpu")) == 1


@pytest.mark.parametrize(
    ("sequence_heads", "K", "wide", "backward", "want"),
    [(16, 128, True, False, 16), (32, 128, True, False, 32), (256, 128, True, False, 64), (256, 128, True, True, 32),
     (16, 128, True, True, 16), (256, 128, False, False, 16), (256, 256, True, False, 32), (256, 256, True, True, 16)],
)  # fmt: skip
def test_value_block_widens_where_the_narrow_grid_takes_several_waves(sequence_heads, K, wide, backward, want):
    """The value-block chooser on a 132-SM GPU at V = 128, for the GDN configuration's operands (bfloat16 `w`,
    float32 `K̃` and `Ũ`): 16 columns where the narrowest blocks' programs fit in one wave (one sequence, 16 heads),
    wider as the sequence-heads grow (32 at two waves of 16-column programs, 64 at sixteen; the backward's walk at
    most 32), 16 for three-pass launches (`wide` off), within the tile limits at K = 256; 16 with float32 `w` (VLA's),
    whose pipelined operands would not fit beside the rest at 32 or 64; off CUDA 16, unless forced (then within the
    limits)."""

    def pipelined(w_bytes):
        return lambda bv: (3 if K <= 128 else 1) * 64 * (K * (4 + w_bytes) + bv * 4)

    class Properties:
        multi_processor_count = 132

    gdn = pipelined(2)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(value_block_module.torch.cuda, "get_device_properties", lambda device: Properties())
        assert value_block(sequence_heads, K, 128, torch.device("cuda"), gdn, wide=wide, backward=backward) == want
        if K == 128 and not backward:
            assert value_block(sequence_heads, K, 128, torch.device("cuda"), pipelined(4), wide=wide) == 16
        m.setattr(value_block_module, "FORCED", 64)
        assert value_block(1, K, 128, torch.device("cpu"), gdn, wide=False, backward=backward) == (
            16 if backward and K == 256 else 32 if backward or K == 256 else 64
        )
        assert value_block(1, K, 40, torch.device("cpu"), gdn, wide=True) == (64 if K == 128 else 32)
        assert value_block(1, K, 20, torch.device("cpu"), gdn, wide=True) == 32
    assert value_block(sequence_heads, K, 128, torch.device("cpu"), gdn, wide=wide, backward=backward) == 16


def test_output_stage_one_pass_launch_matches_reference():
    """The output stage as a training call launches it (16-bit keys, one pass: 32-wide key and 64-wide value
    blocks) on a value dim its blocks do not divide and a short last chunk, against the float64 reference."""
    cfg = Config(T=130, K=48, V=96)
    x = make_inputs(cfg, torch.bfloat16)
    q, k, g = x["q"], x["k"], x["g"]
    layout = chunk_layout(cfg.B, cfg.T, None, q.device)
    G = chunk_cumsum(g, layout)
    gen = torch.Generator(device=q.device).manual_seed(1)
    h = torch.randn(cfg.B, layout.NT, cfg.H, cfg.K, cfg.V, device=q.device, generator=gen)
    U = torch.randn(cfg.B, cfg.T, cfg.H, cfg.V, device=q.device, generator=gen)
    o = output_fwd(q, k, G, h, U, 0.3, layout, torch.float32, precision="tf32")
    check(o, output_ref(q, k, G, h, U, 0.3, layout), STAGE_TOL, "one-pass output o")


def test_launcher_asserts_its_assumptions():
    x = make_inputs(Config(T=8))
    q, k, v = x["q"], x["k"], x["v"]
    with pytest.raises(ValueError, match="q must be contiguous"):
        delta_rule_fwd(q.transpose(1, 2).contiguous().transpose(1, 2), k, v, None, None, None, 1.0, None, False, None)
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"):
        delta_rule_fwd(q.double(), k.double(), v.double(), None, None, None, 1.0, None, False, None)
    with pytest.raises(ValueError, match="needs the erase term"):
        delta_rule_fwd(q, k, v, None, None, None, 1.0, None, False, None, erase=False, kaczmarz_eps=1e-6)
    big = torch.zeros(1, 8, 1, 300, device=DEVICE)
    with pytest.raises(ValueError, match="head dims up to 256"):
        delta_rule_fwd(big, big, torch.zeros(1, 8, 1, 16, device=DEVICE), None, None, None, 1.0, None, False, None)
