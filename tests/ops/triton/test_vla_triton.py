"""`vla(backend="triton")` and `vla_gate(backend="triton")`: the gate's kernel, then the two-key delta rule on the
Triton engine, against the float64 naive recurrence (forward, final `(S, A)` and every gradient, initial states
included)."""

from __future__ import annotations

import pytest
import torch

from linattn.ops import vla, vla_gate
from tests.ops.cases import CASES, Sizes, check_chaining, check_float32_against_naive, draw, grads, rel_err
from tests.ops.triton.test_delta_rule_fwd import DEVICE

VLA = next(c for c in CASES if c.id == "vla")


OUT_TOL, GRAD_TOL = 1e-5, 5e-5  # float32 inputs against the float64 recurrence


@pytest.mark.parametrize("T", [1, 63, 64, 65, 200])
def test_forward_and_gradients_match_naive(T):
    check_float32_against_naive(VLA, Sizes(B=2, T=T, K=16, V=24), "triton", OUT_TOL, GRAD_TOL)


def test_varlen_in_one_launch_and_float64_is_refused():
    """Packed sequences, one initial `(S, A)` each: outputs, final states and every gradient."""
    lengths = [1, 70, 7]
    tokens, state = draw(VLA, Sizes(B=1, T=sum(lengths), K=8, V=8), N=len(lengths))
    cu = torch.tensor([0, 1, 71, 78])
    f32 = [x.float().requires_grad_() for x in (*tokens.values(), *state)]
    f64 = [x.detach().requires_grad_() for x in (*tokens.values(), *state)]
    n = len(tokens)
    got = VLA.run(dict(zip(tokens, f32[:n])), tuple(f32[n:]), "triton", cu_seqlens=cu)
    want = VLA.run(dict(zip(tokens, f64[:n])), tuple(f64[n:]), "naive", cu_seqlens=cu)
    for i, (a, b) in enumerate(zip(got, want)):
        assert rel_err(a, b) < OUT_TOL, f"output {i}: {rel_err(a, b):.2e}"
    for name, a, b in zip([*tokens, "dS0", "dA0"], grads(got, f32, seed=3), grads(want, f64, seed=3)):
        assert rel_err(a, b) < GRAD_TOL, f"d{name}: {rel_err(a, b):.2e}"
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        vla(tokens["q"], tokens["k"], tokens["v"], tokens["u"], backend="triton")


def test_state_chaining():
    """Running `[0:t]` then `[t:T]` from the carried `(S, A)` equals running `[0:T]`: outputs, final states and the
    gradients of every token, through the carried state too."""
    tokens, _ = draw(VLA, Sizes(B=2, T=150, K=16, V=24))
    xs = {n: x.float().requires_grad_() for n, x in tokens.items()}

    def run(span, state):
        o, S = vla(**{n: x[:, span] for n, x in xs.items()}, initial_state=state, output_final_state=True,
                   backend="triton")  # fmt: skip
        return [o, *S]

    check_chaining(run, xs, OUT_TOL, GRAD_TOL)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_low_precision_within_twice_naive(dtype):
    """docs/design.md §4 as `python -m linattn.bench verify` applies it: o, the final `(S, A)` and every gradient
    (initial states included) within 2× the naive recurrence's error in the same dtype; in the interpreter with
    Hopper's arithmetic emulated (`hopper_arithmetic.py`)."""
    from linattn.bench.verify import Case, check
    from tests.ops.triton.test_one_pass_precision import _arithmetic

    with _arithmetic():
        row = check(Case(130, 16, 16, dtype, H=2, op="vla"), "triton", DEVICE)
    assert row["ok"], {k: v for k, v in row.items() if isinstance(v, float)}


def test_bfloat16_inputs_run_at_their_precision():
    """A bfloat16 model's q, k, v, u: the output in bfloat16; the gate's `α̂` and `k̂` enter the engine in float32."""
    tokens, _ = draw(VLA, Sizes(B=1, T=70, K=16, V=16))
    low = {n: x.bfloat16() for n, x in tokens.items()}
    o, (S, A) = vla(**low, output_final_state=True, backend="triton")
    want, (S_want, A_want) = vla(**tokens, output_final_state=True, backend="naive")
    assert o.dtype == torch.bfloat16 and rel_err(o, want) < 1e-2 and rel_err(S, S_want) < 1e-2  # 5e-3 measured
    assert rel_err(A, A_want) < 2e-3


@pytest.mark.parametrize("C, R, T, d", [(16, 3, 100, 24), (16, 1, 40, 24), (32, 2, 64, 24), (16, 3, 70, 40)])
def test_gate_kernel_matches_the_token_loop(C, R, T, d):
    """The kernels with small groups (several groups, the last one padded or cut short), from an SPD initial state:
    α̂, `A_T` and the gradients of k, u and the initial state, float32 against the float64 token loop. `d` padded
    inside to 32 (one warp, `L⁻¹` by substitution) or 64 (four warps, `L⁻¹` in product form)."""
    from linattn.ops.unit_rows import unit_rows
    from linattn.ops.vla.chunk import GateKernels, Grouping, gate
    from linattn.ops.vla.naive import naive_vla_gate
    from linattn.ops.vla.triton.cholesky import triton_spd_inverse
    from linattn.ops.vla.triton.gate import triton_apply
    from linattn.ops.vla.triton.penalty_grads import triton_penalty_grads

    B, H = 2, 2
    gen = torch.Generator().manual_seed(0)
    k = torch.randn(B, T, H, d, generator=gen, dtype=torch.float64)
    u = torch.randn(B, T, H, d, generator=gen, dtype=torch.float64) / d
    X = torch.randn(B, H, d, d, generator=gen, dtype=torch.float64)
    A0 = X @ X.mT / d + torch.eye(d, dtype=torch.float64)
    cot = [torch.randn(B, T, H, d, generator=gen, dtype=torch.float64), torch.randn(B, H, d, d, generator=gen)]

    def run(fn, dtype):
        leaves = [x.to(dtype).requires_grad_() for x in (k, u, A0)]
        outs = fn(*leaves)
        grads = torch.autograd.grad(sum((o.double() * c.double()).sum() for o, c in zip(outs, cot)), leaves)
        return [*outs, *grads[:2], (grads[2] + grads[2].mT) / 2]  # only the symmetric part of dA0 is defined

    kernels = GateKernels(triton_apply, triton_penalty_grads, triton_spd_inverse)
    got = run(lambda k, u, A0: gate(unit_rows(k), u, A0, 0.1, Grouping(C, R), kernels), torch.float32)
    want = run(lambda k, u, A0: naive_vla_gate(k, u, A0, lam0=0.1), torch.float64)
    for name, a, b in zip(("alpha_hat", "A", "dk", "du", "dA0"), got, want):
        assert rel_err(a, b) < 2e-5, f"{name}: relative error {rel_err(a, b):.2e}"


@pytest.mark.parametrize("d", [24, 128])
def test_kept_factors_give_the_recomputed_gradients(d):
    """The forward's call keeps every chunk's `L⁻¹` and the backward's reads them in place of its elimination: the
    same gradient bits as a backward that forms them again (they depend on `u` and the groups' `A` only); with no
    gradient asked for, none are kept."""
    from linattn.ops.unit_rows import unit_rows
    from linattn.ops.vla.chunk import GateKernels, Grouping, gate
    from linattn.ops.vla.triton.cholesky import triton_spd_inverse
    from linattn.ops.vla.triton.gate import triton_apply
    from linattn.ops.vla.triton.penalty_grads import triton_penalty_grads

    gen = torch.Generator().manual_seed(5)
    k = torch.randn(1, 100, 2, d, generator=gen).requires_grad_()
    u = (torch.randn(1, 100, 2, d, generator=gen) / d).requires_grad_()
    cot = torch.randn(1, 100, 2, d, generator=gen)
    calls = []

    def recording(*args, keep=False, factors=None, **kwargs):
        calls.append((keep, factors is not None))
        return triton_apply(*args, keep=keep, factors=factors, **kwargs)

    def forming(*args, keep=False, factors=None, **kwargs):
        return triton_apply(*args, **kwargs)

    def gradients(apply):
        kernels = GateKernels(apply, triton_penalty_grads, triton_spd_inverse)
        alpha_hat, _ = gate(unit_rows(k), u, None, 0.1, Grouping(16, 3), kernels)
        return torch.autograd.grad((alpha_hat * cot).sum(), (k, u))

    kept, formed = gradients(recording), gradients(forming)
    assert calls == [(True, False), (False, True)]
    for a, b in zip(kept, formed):
        assert torch.equal(a, b)
    with torch.no_grad():
        gate(unit_rows(k), u, None, 0.1, Grouping(16, 3), GateKernels(recording))
    assert calls[-1] == (False, False)


@pytest.mark.parametrize("d", [24, 128])
def test_kernel_forms_the_normalisations_gradient(d):
    """The backward's call takes `∂L/∂α̂` and forms `∂L/∂α` row by row inside the kernel (`unit_grad`): as
    `unit_rows_grad` then the plain call, a row whose norm is under the clamp (a zero `α`) included."""
    from linattn.ops.unit_rows.pytorch import unit_rows_grad
    from linattn.ops.vla.chunk import Grouping
    from linattn.ops.vla.triton.gate import triton_apply

    gen = torch.Generator().manual_seed(6)
    B, T, H, g = 1, 50, 2, Grouping(16, 2)
    alpha = torch.randn(B, T, H, d, generator=gen)
    alpha[0, 7, 1] = 0  # under the clamp: ∂L/∂α = g / EPS there
    norms = alpha.norm(dim=-1)
    alpha_hat = alpha / norms.clamp_min(1e-12)[..., None]
    g_hat = torch.randn(B, T, H, d, generator=gen)
    u = torch.randn(B, T, H, d, generator=gen) / d
    P = torch.randn(B, H, 2, 8, d, generator=gen) / d**0.5
    A = torch.linalg.inv(0.1 * torch.eye(d) + P.mT @ P)  # the two groups' first A, SPD
    got, _, _ = triton_apply(g_hat, u, A, g, unit_grad=(alpha_hat, norms))
    want, _, _ = triton_apply(unit_rows_grad(alpha_hat, norms[..., None], g_hat), u, A, g)
    clamped = torch.zeros(B, T, H, dtype=torch.bool)
    clamped[0, 7, 1] = True  # its ∂L/∂α is 1e12 times the others': compared on its own
    assert rel_err(got[clamped], want[clamped]) < 1e-6 and rel_err(got[~clamped], want[~clamped]) < 1e-6


@pytest.mark.parametrize("d", [5, 24, 32, 64, 96, 128])
def test_spd_inverse_kernel_matches_float64(d):
    """The groups' `d × d` inverses in one launch (float32, bfloat16 models' factorisation dtype): against float64 on
    penalty-like matrices `λ0 I + Σ u uᵀ`, as `group_inverses` makes them: one padded 16-block (d = 5), a padded
    second one (24), whole 16-blocks (32, 64) and whole 32-blocks (96, 128: three and four a side)."""
    from linattn.ops.vla.triton.cholesky import triton_spd_inverse

    gen = torch.Generator().manual_seed(3)
    u = torch.randn(2, 1, 3, 64, d, generator=gen, dtype=torch.float64) / d**0.5
    M = (u.mT @ u).cumsum(2) + 0.1 * torch.eye(d, dtype=torch.float64)
    got = triton_spd_inverse(M.float())
    assert got.dtype == torch.float32 and rel_err(got, torch.linalg.inv(M)) < 1e-5


@pytest.mark.parametrize("d", [24, 64, 96, 128])
@pytest.mark.parametrize("with_F", [False, True], ids=["no-dA_T", "dA_T"])
def test_penalty_grads_kernels_match_pytorch(d, with_F):
    """`∂L/∂u`, `∂L/∂M_0` of the gate's backward: the Triton kernels (float32) against `chunk.penalty_grads` in
    float64 on the same inputs, over more chunks than one step of the reverse scan (1,100 tokens: 18 chunks); at
    d > 64 in two slices of 9 chunks, the second's sums carried into the first's."""
    from linattn.ops.vla.chunk import penalty_grads
    from linattn.ops.vla.triton.penalty_grads import triton_penalty_grads

    B, T, H = 2, 1100, 2
    gen = torch.Generator().manual_seed(2)
    u, a, alpha = (torch.randn(B, T, H, d, generator=gen, dtype=torch.float64) for _ in range(3))
    n = alpha.norm(dim=-1, keepdim=True)
    F_T = torch.randn(B, H, d, d, generator=gen, dtype=torch.float64) if with_F else None
    want = penalty_grads(u, a, alpha / n, n, F_T)
    got = triton_penalty_grads(*(x.float() for x in (u, a, alpha / n, n)), None if F_T is None else F_T.float())
    for name, x, y in zip(("du", "dM0"), got, want):
        assert x.dtype == torch.float32 and rel_err(x, y) < 1e-5, f"{name}: relative error {rel_err(x, y):.2e}"


def test_gate_backend_is_public_and_packs_sequences():
    """`vla_gate(backend="triton")` equals the token loop on packed sequences with their own initial states."""
    lengths, d = [5, 70, 33], 16
    gen = torch.Generator().manual_seed(1)
    k = torch.randn(1, sum(lengths), 2, d, generator=gen)
    u = torch.randn(1, sum(lengths), 2, d, generator=gen) / d
    X = torch.randn(3, 2, d, d, generator=gen)
    A0 = X @ X.mT / d + torch.eye(d)
    cu = torch.tensor([0, 5, 75, 108])
    got = vla_gate(k, u, initial_state=A0, output_final_state=True, cu_seqlens=cu, backend="triton")
    want = vla_gate(k.double(), u.double(), initial_state=A0.double(), output_final_state=True, cu_seqlens=cu,
                    backend="naive")  # fmt: skip
    assert all(rel_err(a, b) < 1e-5 for a, b in zip(got, want))
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        vla_gate(k.double(), u.double(), backend="triton")


def test_gate_batches_packed_sequences_of_similar_lengths():
    """Without forgetting the gate runs once per group of similar lengths (`split_packed`), the sequences zero-padded
    to the group's length: each still equals the token loop, three of them sharing one group."""
    lengths, d = [5, 70, 6, 33, 7], 16
    gen = torch.Generator().manual_seed(2)
    k = torch.randn(1, sum(lengths), 2, d, generator=gen)
    u = torch.randn(1, sum(lengths), 2, d, generator=gen) / d
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    got = vla_gate(k, u, output_final_state=True, cu_seqlens=cu, backend="triton")
    want = vla_gate(k.double(), u.double(), output_final_state=True, cu_seqlens=cu, backend="naive")
    assert all(rel_err(a, b) < 1e-5 for a, b in zip(got, want))


def test_penalty_grads_take_one_pass_only_for_bfloat16_training_calls():
    """The gate backward's `∂L/∂u` products take one tf32 pass only where the engine's backward does (bfloat16
    tokens, at least `ONE_PASS_TOKENS` of them) and no initial `A` is given; three otherwise."""
    from linattn.ops.utils.precision import ONE_PASS_TOKENS
    from linattn.ops.vla.triton.gate import penalty_precision

    u = torch.zeros(1, ONE_PASS_TOKENS, 2, 16, dtype=torch.bfloat16)
    A0 = torch.eye(16).expand(1, 2, 16, 16)
    assert penalty_precision(u, None) == "tf32"
    assert penalty_precision(u, A0) == "tf32x3"
    assert penalty_precision(u.float(), None) == "tf32x3"
    assert penalty_precision(u[:, 1:], None) == "tf32x3"


def test_float32_initial_state_gradient_meets_the_verify_rule_at_wide_heads():
    """`verify`'s float32 `K = 128, T = 63 / 65` VLA cases, which need the `d × d` factorisations of float32 inputs
    in float64 (in float32 the initial `A`'s gradient errs about 1.1e-6, over the 1e-6 floor): within 2× the naive
    recurrence's own error, here on the kernels in the interpreter."""
    from linattn.bench import verify

    for T in (63, 65):
        case = next(
            c for c in verify.matrix() if c.op == "vla" and c.dtype == torch.float32 and c.K == 128 and c.T == T
        )
        row = verify.check(case, "triton", device="cpu")
        assert row["ok"], {n: v for n, v in row.items() if n.startswith("dstate_A")}


@pytest.mark.parametrize("d, given", [(24, False), (128, True)], ids=["d24-lam0", "d128-M0"])
def test_group_penalties_kernel_matches_pytorch(d, given):
    """`M` at every group start and after the last token (the kernel's Grams, then a prefix sum) for bfloat16 `u`:
    against `chunk.group_penalties` in float64 on the same rows, a last group cut short (T = 300, groups of 128),
    `M_0` as `λ0 I` and as a given matrix; other dtypes are refused (they keep PyTorch's path)."""
    from linattn.ops.vla.chunk import group_penalties
    from linattn.ops.vla.triton.group_penalties import triton_group_penalties

    B, T, H, L = 2, 300, 2, 128
    gen = torch.Generator().manual_seed(4)
    u = (torch.randn(B, T, H, d, generator=gen) / d**0.5).bfloat16()
    X = torch.randn(B, H, d, d, generator=gen)
    M0 = X @ X.mT / d + torch.eye(d) if given else 0.1
    got = triton_group_penalties(u, M0, L)
    want = group_penalties(u.double(), M0.double() if given else M0, L)
    assert got.dtype == torch.float32 and got.shape == (B, H, 4, d, d)
    assert rel_err(got, want) < 1e-6
    with pytest.raises(TypeError, match="bfloat16 u expected"):
        triton_group_penalties(u.half(), M0, L)
