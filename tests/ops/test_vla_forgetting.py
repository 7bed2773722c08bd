"""VLA's gate with a forgetting factor `ρ < 1` (`linattn/ops/vla/forgetting.py`): the chunk and Triton gates run it
as rescaled segments; the token loop forgets token by token. `cases.py`'s `vla-forget` runs every generic check at
`ρ = 0.99` in one segment; here the segments are cut short so that a sequence crosses several, and a stronger `ρ`
is held to a direct solve, since the token loop's backward amplifies rounding by up to `ρ^{−T}`."""

from __future__ import annotations

import importlib

import pytest
import torch
import torch.nn.functional as F

from linattn.ops import vla, vla_gate
from tests.ops.cases import CASES, Sizes, check_chaining, draw, grads, rel_err

forgetting = importlib.import_module("linattn.ops.vla.forgetting")
VLA_FORGET = next(c for c in CASES if c.id == "vla-forget")


@pytest.fixture
def short_segments(monkeypatch):
    """Segments of 64 tokens at `ρ = 0.99` (of 1,536 otherwise)."""
    monkeypatch.setattr(forgetting, "MAX_LOG_SCALE", 0.4)
    assert forgetting.segment_length(0.99) == 64


def test_segment_lengths():
    assert [forgetting.segment_length(r) for r in (0.99, 0.9, 0.1)] == [1536, 128, 6]


@pytest.mark.parametrize("backend", ["chunk", "triton"])
def test_segments_equal_the_token_loop(short_segments, backend):
    """Across four segments (T = 200), from an initial `(S, A)`: outputs, final states and every gradient."""
    if backend == "chunk":
        tokens, state = draw(VLA_FORGET, Sizes(B=2, T=200), requires_grad=True)
        tol = 1e-9
    else:  # float32 in the interpreter
        tokens, state = draw(VLA_FORGET, Sizes(B=2, T=200, K=16, V=24), requires_grad=True)
        tol = 5e-5
    leaves = [*tokens.values(), *state]
    dt = torch.float64 if backend == "chunk" else torch.float32
    mine = [x.detach().to(dt).requires_grad_() for x in leaves]
    n = len(tokens)
    got = VLA_FORGET.run(dict(zip(tokens, mine[:n])), tuple(mine[n:]), backend)
    want = VLA_FORGET.run(tokens, state, "naive")
    for i, (a, b) in enumerate(zip(got, want)):
        assert rel_err(a, b) < tol, f"output {i}: {rel_err(a, b):.2e}"
    for name, a, b in zip([*tokens, "dS0", "dA0"], grads(got, mine), grads(want, leaves)):
        assert rel_err(a, b) < tol, f"d{name}: {rel_err(a, b):.2e}"


def test_segments_chain_and_pack(short_segments):
    """State chaining at a point inside a segment, and packed sequences, each across segments."""
    tokens, _ = draw(VLA_FORGET, Sizes(B=2, T=200))
    xs = {n: x.detach().requires_grad_() for n, x in tokens.items()}

    def run(span, state):
        o, S = vla(**{n: x[:, span] for n, x in xs.items()}, lam0=0.3, rho=0.99, initial_state=state,
                   output_final_state=True, backend="chunk")  # fmt: skip
        return [o, *S]

    check_chaining(run, xs, 1e-9, 1e-9, t=100)
    lengths = [150, 1, 90]
    packed, state = draw(VLA_FORGET, Sizes(B=1, T=sum(lengths)), N=3)
    cu = torch.tensor([0, 150, 151, 241])
    got = VLA_FORGET.run(packed, state, "chunk", cu_seqlens=cu)
    want = VLA_FORGET.run(packed, state, "naive", cu_seqlens=cu)
    for i, (a, b) in enumerate(zip(got, want)):
        assert rel_err(a, b) < 1e-9, f"output {i}: {rel_err(a, b):.2e}"


def test_strong_forgetting_equals_a_direct_solve():
    """`ρ = 0.9` over 300 tokens (three segments of 128), against `α_t = M_t⁻¹ k̂_t` with `M_t` formed and solved
    token by token: α̂, `A_T` and the gradients of `k`, `u` and `A_0` (its symmetric part: the gate's `A_0` is
    symmetric, and its gradient is given as such)."""
    gen = torch.Generator().manual_seed(0)
    T, K, rho = 300, 4, 0.9
    k = (F.elu(torch.randn(1, T, 1, K, generator=gen, dtype=torch.float64)) + 1).requires_grad_()
    u = (F.normalize(torch.randn(1, T, 1, K, generator=gen, dtype=torch.float64), dim=-1) / K**0.5).requires_grad_()
    A0 = (3 * torch.eye(K, dtype=torch.float64))[None, None].requires_grad_()

    def direct():
        M, k_hat, alphas = torch.linalg.inv(A0[0, 0]), F.normalize(k[0, :, 0], dim=-1), []
        for t in range(T):
            M = rho * M + torch.outer(u[0, t, 0], u[0, t, 0])
            alphas.append(F.normalize(torch.linalg.solve(M, k_hat[t]), dim=0))
        return [torch.stack(alphas)[None, :, None], torch.linalg.inv(M)[None, None]]

    def chunk():
        return list(vla_gate(k, u, rho=rho, initial_state=A0, output_final_state=True, backend="chunk"))

    results = []
    for run in (chunk, direct):
        outs = run()
        dk, du, dA0 = grads(outs, [k, u, A0])
        results.append([*outs, dk, du, dA0 + dA0.transpose(-1, -2)])
    for name, a, b in zip(["alpha_hat", "A_T", "dk", "du", "dA0"], *results):
        assert rel_err(a, b) < 1e-11, f"{name}: {rel_err(a, b):.2e}"


def test_rho_to_one_tends_to_the_gate_without_forgetting():
    """`ρ = 1` runs the gate without forgetting; `ρ < 1` the forgetting paths (the token loop's `/ ρ`, the chunk
    gate's rescaled segments). As `ρ → 1` these tend to the former, to first order in `1 − ρ` (α̂ and `A_T` within
    `100 (1 − ρ)`: about 4 and 44 times `1 − ρ` here), while `ρ = 0.99` is far from it: the forgetting factor acts.
    (`ρ` left at its default is `ρ = 1.0`, the same call, so comparing the two would test nothing.)"""
    tokens, _ = draw(VLA_FORGET, Sizes(B=1, T=70))
    for backend in ("naive", "chunk"):

        def gate(rho):
            return vla_gate(tokens["k"], tokens["u"], rho=rho, output_final_state=True, backend=backend)

        one = gate(1.0)
        for delta in (1e-9, 1e-7):
            for name, a, b in zip(["alpha_hat", "A_T"], gate(1 - delta), one):
                assert rel_err(a, b) < 100 * delta, f"{backend}, 1 - rho = {delta}, {name}: {rel_err(a, b):.2e}"
        for name, a, b in zip(["alpha_hat", "A_T"], gate(0.99), one):
            assert rel_err(a, b) > 1e-2, f"{backend}, rho = 0.99, {name}: {rel_err(a, b):.2e}"


def test_an_ill_conditioned_penalty_is_a_clear_error():
    """A 2-token window (`ρ = 0.5`) against 32 dims: the float32 `A` carried between segments stops being positive
    definite, and the error names `rho`, not the initial state the caller never gave."""
    tokens, _ = draw(VLA_FORGET, Sizes(B=1, T=300, H=1, K=32))
    with pytest.raises(ValueError, match="rho: the inverse penalty A carried to token"):
        vla_gate(tokens["k"].float(), tokens["u"].float(), rho=0.5, backend="chunk")


@pytest.mark.parametrize("backend", ["chunk", "triton", "fused_recurrent"])
def test_refresh_on_packed_sequences_from_their_positions(backend):
    """`refresh=True` on three packed sequences, each from its own position and initial `(S, A)`: every backend
    against the float64 token loop, outputs, final states and (but the decode kernel's) every gradient; the Triton
    and decode kernels in float32."""
    cu, position = torch.tensor([0, 5, 45, 62]), torch.tensor([0, 7, 130])
    tokens, leaves = draw(VLA_FORGET, Sizes(B=1, T=62, K=8, V=6), N=3, requires_grad=True)
    leaves = [*tokens.values(), *leaves]
    n = len(tokens)

    def run(leaves, backend):
        o, (S, A) = vla(**dict(zip(tokens, leaves[:n])), lam0=0.3, rho=0.9, refresh=True, position=position,
                        initial_state=VLA_FORGET.init(leaves[n:]), output_final_state=True, cu_seqlens=cu,
                        backend=backend)  # fmt: skip
        return [o, S, A]

    want = run(leaves, "naive")
    tol = 1e-10 if backend == "chunk" else 1e-4
    mine = [x.detach().to(torch.float64 if backend == "chunk" else torch.float32) for x in leaves]
    if backend == "fused_recurrent":
        with torch.no_grad():
            got = run(mine, backend)
    else:
        mine = [x.requires_grad_() for x in mine]
        got = run(mine, backend)
        for name, a, b in zip([*tokens, "dS0", "dP"], grads(got, mine), grads(want, leaves)):
            assert rel_err(a, b) < tol, f"d{name}: {rel_err(a, b):.2e}"
    for name, a, b in zip(["o", "S", "A"], got, want):
        assert rel_err(a, b) < tol, f"{name}: {rel_err(a, b):.2e}"


def test_refresh_keeps_a_penalty_that_u_stops_visiting():
    """`u` fixed along one direction, `ρ = 0.9`, 1,000 tokens: plain forgetting winds up (an error naming `rho`);
    with the refresh the token loop and the chunk gate run, `A ⪯ ρ^{½−K} / λ0` as `refresh.py` bounds it (the Triton
    gate runs the chunk gate's rows: the test above)."""
    T, K = 1000, 4
    q, k, v = torch.randn(1, T, 1, K), torch.randn(1, T, 1, K), torch.randn(1, T, 1, K)
    u = torch.zeros(1, T, 1, K)
    u[..., 0] = K**-0.5
    with pytest.raises(ValueError, match="^rho: the inverse penalty A overflows"):
        vla(q, k, v, u, rho=0.9, backend="chunk")
    for backend in ("naive", "chunk"):
        o, (S, A) = vla(q, k, v, u, lam0=0.1, rho=0.9, refresh=True, output_final_state=True, backend=backend)
        assert o.isfinite().all() and S.isfinite().all(), backend
        assert torch.linalg.eigvalsh(A.double()).max() <= 0.9 ** (0.5 - K) / 0.1 * (1 + 1e-4), backend


def test_refresh_arguments_are_checked():
    k, u = torch.randn(2, 9, 1, 4), torch.randn(2, 9, 1, 4) / 2
    with pytest.raises(TypeError, match="^refresh: expected a bool, got int"):
        vla_gate(k, u, rho=0.9, refresh=1)
    with pytest.raises(ValueError, match=r"^position: expected shape \[N\] = \[2\], got \[3\]"):
        vla_gate(k, u, rho=0.9, refresh=True, position=torch.zeros(3, dtype=torch.long))
    with pytest.raises(TypeError, match="^position: expected an integer tensor, got dtype torch.float32"):
        vla_gate(k, u, rho=0.9, refresh=True, position=torch.zeros(2))
    with pytest.raises(ValueError, match="^position: expected an int >= 0 or an integer tensor"):
        vla_gate(k, u, rho=0.9, refresh=True, position=-1)
    with pytest.raises(TypeError, match=r"^position: expected an int or an integer tensor \[N\], got bool"):
        vla_gate(k, u, rho=0.9, position=True)  # checked also where nothing reads it


def test_refresh_names_rho_where_its_window_is_too_short_for_the_head_dim():
    """`ρ = 0.3` at K = 64 in float32: the refresh's floor `λ0 ρ^{K−½}` leaves `M` too ill-conditioned; the error
    names the caller's `ρ` and `K` (not the interleaved rows' `√ρ`, nor an initial state nobody passed)."""
    k, u = torch.randn(1, 400, 1, 64), F.normalize(torch.randn(1, 400, 1, 64), dim=-1) / 8
    with pytest.raises(ValueError, match=r"^rho: with refresh=True .* at rho = 0.3, K = 64 \(cond"):
        vla_gate(k, u, rho=0.3, refresh=True, backend="chunk")
