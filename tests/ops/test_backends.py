"""Every backend against the `naive` recurrence in float64: outputs, final states, gradients, varlen, chaining."""

from __future__ import annotations

import pytest
import torch

from tests.ops.cases import CASES, Sizes, draw, grads, rel_err

TOL = 1e-9
IDS = [c.id for c in CASES]


def _assert_close(got, want, what):
    assert len(got) == len(want), what
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape, f"{what}[{i}]: shape {tuple(a.shape)} != {tuple(b.shape)}"
        assert torch.isfinite(a).all(), f"{what}[{i}]: non-finite values"
        err = rel_err(a, b)
        assert err <= TOL, f"{what}[{i}]: relative error {err:.2e} > {TOL:.0e}"


@pytest.mark.parametrize("T", [1, 63, 64, 65, 200])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_chunk_forward_matches_naive(case, T):
    tokens, state = draw(case, Sizes(B=2, T=T))
    for init in (state, None):
        want = case.run(tokens, init, "naive")
        got = case.run(tokens, init, "chunk")
        _assert_close(got, want, f"{case.id} T={T} initial_state={'yes' if init else 'no'}")


def _leaf_names(tokens, state):
    return [*tokens, *(f"initial_state[{i}]" for i in range(len(state)))]


@pytest.mark.parametrize("T", [1, 63, 64, 65, 200])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_chunk_gradients_match_naive(case, T):
    tokens, state = draw(case, Sizes(B=2, T=T), requires_grad=True)
    leaves = [*tokens.values(), *state]
    want = grads(case.run(tokens, state, "naive"), leaves)
    got = grads(case.run(tokens, state, "chunk"), leaves)
    _assert_close(got, want, f"{case.id} T={T} gradients {_leaf_names(tokens, state)}")


@pytest.mark.parametrize("backend", ["naive", "chunk"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_varlen_equals_separate_sequences(case, backend):
    """Packed sequences (`cu_seqlens`, one initial state each) give each sequence's own outputs, final states and
    gradients, every token's and every initial state's."""
    lengths = [1, 70, 5, 64]
    tokens, state = draw(case, Sizes(B=1, T=sum(lengths)), N=len(lengths), requires_grad=True)
    leaves = [*tokens.values(), *state]
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    packed = case.run(tokens, state, backend, cu_seqlens=cu)
    pieces = []
    for i, (bos, eos) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist())):
        piece = {name: x[:, bos:eos] for name, x in tokens.items()}
        pieces.append(case.run(piece, tuple(s[i : i + 1] for s in state), backend))
    want = [torch.cat([p[0] for p in pieces], dim=1)]
    want += [torch.cat([p[j] for p in pieces], dim=0) for j in range(1, len(packed))]
    d_packed = grads(packed, leaves)
    _assert_close(packed, want, f"{case.id} varlen")
    _assert_close(d_packed, grads(want, leaves), f"{case.id} varlen gradients")
    if backend == "chunk":
        naive = case.run(tokens, state, "naive", cu_seqlens=cu)
        _assert_close(packed, naive, f"{case.id} varlen chunk/naive")
        _assert_close(d_packed, grads(naive, leaves), f"{case.id} varlen chunk/naive gradients")


@pytest.mark.parametrize("backend", ["naive", "chunk"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_state_chaining(case, backend):
    """Running `[0:t]`, then `[t:T]` from the carried state, equals running `[0:T]`: outputs, final state, and the
    gradients of every token (through the carried state too)."""
    T, t = 150, 67
    tokens, _ = draw(case, Sizes(B=2, T=T), requires_grad=True)
    leaves = list(tokens.values())
    whole = case.run(tokens, None, backend)
    first = case.run({n: x[:, :t] for n, x in tokens.items()}, None, backend)
    second = case.call({n: x[:, t:] for n, x in tokens.items()}, tuple(first[1:]), backend, None)
    chained = [torch.cat([first[0], second[0]], dim=1), *second[1:]]
    _assert_close(chained, whole, f"{case.id} chaining")
    _assert_close(grads(chained, leaves), grads(whole, leaves), f"{case.id} chaining gradients")


def _assert_gate_matches_the_token_loop(gate, B: int, T: int, H: int, d: int):
    """`gate(k, u, A0) -> (α̂, A_T)` against `naive_vla_gate` in float64 from an SPD initial state: α̂, `A_T` and the
    gradients of k, u and the initial state's factor."""
    from linattn.ops.vla.naive import naive_vla_gate

    gen = torch.Generator().manual_seed(0)
    k = torch.randn(B, T, H, d, generator=gen, dtype=torch.float64).requires_grad_()
    u = (torch.randn(B, T, H, d, generator=gen, dtype=torch.float64) / d).requires_grad_()
    X = torch.randn(B, H, d, d, generator=gen, dtype=torch.float64).requires_grad_()
    cot = [
        torch.randn(B, T, H, d, generator=gen, dtype=torch.float64),
        torch.randn(B, H, d, d, generator=gen, dtype=torch.float64),
    ]

    def run(gate):
        outs = gate(k, u, X @ X.mT / d + torch.eye(d, dtype=torch.float64))
        grads = torch.autograd.grad(sum((o * c).sum() for o, c in zip(outs, cot)), (k, u, X))
        return [*outs, *grads]

    loop = run(lambda k, u, A0: naive_vla_gate(k, u, A0, lam0=0.3))
    for name, a, b in zip(("alpha_hat", "A", "dk", "du", "dA0"), run(gate), loop):
        assert rel_err(a, b) <= TOL, f"{name}: relative error {rel_err(a, b):.2e}"


def test_vla_gate_with_wide_heads_runs_longer_chunks():
    """d ≥ 128 gives the gate chunks of 128 (`gate_chunk`): forward, final state and gradients still equal the
    token loop's, over several chunks with padding and an initial state."""
    from linattn.ops import vla_gate
    from linattn.ops.vla.chunk import gate_chunk

    assert gate_chunk(380, 128) == 128

    def gate(k, u, A0):
        return vla_gate(k, u, initial_state=A0, output_final_state=True, backend="chunk")

    _assert_gate_matches_the_token_loop(gate, B=1, T=380, H=1, d=128)


@pytest.mark.parametrize("carry", [2, 3, 8])
def test_vla_gate_carried_between_factorisations_equals_the_token_loop(carry):
    """`carry` chunks share one `d × d` factorisation, the others follow by Woodbury downdates; the last group is
    padded when `carry` does not divide the chunks (T = 300: 5 chunks of 64)."""
    from linattn.ops.vla.chunk import chunk_vla_gate

    def gate(k, u, A0):
        return chunk_vla_gate(k, u, A0, lam0=0.3, carry=carry)

    _assert_gate_matches_the_token_loop(gate, B=2, T=300, H=2, d=12)


def test_vla_gate_backward_in_slices_equals_the_token_loop(monkeypatch):
    """A long call's gate backward walks the sequence in slices of chunks from the last (`penalty_grads`), each
    slice's later-chunk sums carried into the one before: forced here at 300 tokens, 5 chunks of 64 in slices of 2,
    the first slice shorter and the last chunk padded; the final state's gradient included."""
    from linattn.ops.vla import chunk

    monkeypatch.setattr(chunk, "SLICE_FROM_BYTES", 0)
    monkeypatch.setattr(chunk, "BWD_SLICES", 3)

    def gate(k, u, A0):
        return chunk.chunk_vla_gate(k, u, A0, lam0=0.3)

    _assert_gate_matches_the_token_loop(gate, B=2, T=300, H=2, d=12)


def test_vla_gate_keeps_no_float32_copy_of_bfloat16_inputs():
    """Memory: for bfloat16 `k`, `u` the gate keeps `k` and `u` themselves for its backward, and one float32
    `[B, T, H, d]` tensor (`α̂`, which the delta rule after the gate keeps too), not float32 copies of its inputs."""
    from linattn.ops.vla.chunk import chunk_vla_gate

    k, u = (torch.randn(1, 200, 2, 16, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    saved = {}

    def keep(t):
        saved[t.data_ptr()] = t
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        chunk_vla_gate(k, u, None, lam0=0.3)
    rows = [t for t in saved.values() if t.shape == k.shape]
    assert sorted(str(t.dtype) for t in rows) == ["torch.bfloat16", "torch.bfloat16", "torch.float32"]


def test_vla_normalises_its_keys_once(monkeypatch):
    """`vla` hands the same `k̂ = unit_rows(k)` to the gate and the delta rule: one normalisation pass over `k`
    forward (and one backward), not one per consumer."""
    from importlib import import_module  # `linattn.ops.vla` the attribute is the function, so modules by name

    from linattn.ops import vla
    from linattn.ops.unit_rows import unit_rows

    api, chunk = import_module("linattn.ops.vla.api"), import_module("linattn.ops.vla.chunk")

    k = torch.randn(1, 40, 2, 8)
    seen = []

    def counting(x):
        seen.append(x.data_ptr() == k.data_ptr())
        return unit_rows(x)

    monkeypatch.setattr(api, "unit_rows", counting)
    monkeypatch.setattr(chunk, "unit_rows", counting)
    vla(torch.randn(1, 40, 2, 8), k, torch.randn(1, 40, 2, 8), torch.randn(1, 40, 2, 8) / 8, backend="chunk")
    assert seen.count(True) == 1, seen


@pytest.mark.parametrize("backend", ["chunk", "triton"])
def test_vla_initial_penalty_gradient_is_the_same_matrix_on_every_backend(backend):
    """A user's `A_0` as a leaf: every backend returns the same symmetric gradient (naive reads A_0 through its
    symmetric part), so an optimiser step keeps `A_0` symmetric whichever backend trained it."""
    from linattn.ops import vla_gate

    gen = torch.Generator().manual_seed(1)
    B, T, H, d = 1, 40, 2, 8
    k = torch.randn(B, T, H, d, generator=gen, dtype=torch.float64)
    u = torch.randn(B, T, H, d, generator=gen, dtype=torch.float64) / d
    X = torch.randn(B, H, d, d, generator=gen, dtype=torch.float64)
    A0 = X @ X.mT / d + torch.eye(d, dtype=torch.float64)
    dtype = torch.float64 if backend == "chunk" else torch.float32

    def grad(name):
        a0 = A0.to(dtype).requires_grad_()
        alpha, A = vla_gate(k.to(dtype), u.to(dtype), initial_state=a0, output_final_state=True, backend=name)
        (alpha.sum() + (A * A).sum()).backward()
        return a0.grad.double()

    want, got = grad("naive"), grad(backend)
    assert rel_err(want, want.mT) <= TOL, "naive's dA0 is symmetric"
    assert rel_err(got, want) <= (TOL if backend == "chunk" else 1e-5), f"{backend}'s dA0 differs from naive's"
