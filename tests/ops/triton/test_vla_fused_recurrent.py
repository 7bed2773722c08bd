"""`vla(backend="fused_recurrent")` and `vla_gate(backend="fused_recurrent")`, VLA's decode path (the gate's step
kernel, then the delta rule's): float32 against the float64 token loop, from carried states, with a forgetting factor,
packed sequences in one launch; and refused where a gradient is asked for."""

from __future__ import annotations

import pytest
import torch

from linattn.ops import vla, vla_gate
from tests.ops.cases import CASES, Sizes, draw, rel_err

VLA = next(c for c in CASES if c.id == "vla")
TOL = 2e-5  # float32 against the float64 recurrence


def _run(tokens, state, backend, rho, cu_seqlens=None):
    o, (S, A) = vla(**tokens, lam0=0.3, rho=rho, initial_state=state, output_final_state=True, cu_seqlens=cu_seqlens,
                    backend=backend)  # fmt: skip
    return [o, S, A]


@pytest.mark.parametrize("rho", [1.0, 0.9])
@pytest.mark.parametrize(("T", "K", "V", "with_state"), [(1, 16, 24, True), (7, 24, 16, False), (40, 32, 32, True)])
def test_decode_matches_the_token_loop(T, K, V, with_state, rho):
    tokens, state = draw(VLA, Sizes(B=2, T=T, K=K, V=V))
    state = VLA.init(state) if with_state else None
    want = _run(tokens, state, "naive", rho)
    with torch.no_grad():
        got = _run({n: x.float() for n, x in tokens.items()},
                   None if state is None else tuple(s.float() for s in state), "fused_recurrent", rho)  # fmt: skip
    for name, a, b in zip(("o", "S", "A"), got, want):
        assert a.dtype == torch.float32 and rel_err(a, b) < TOL, f"{name}: {rel_err(a, b):.2e}"


def test_packed_sequences_in_one_launch_and_the_gate_alone():
    lengths = [3, 1, 9]
    tokens, state = draw(VLA, Sizes(B=1, T=sum(lengths), K=16, V=16), N=3)
    state = VLA.init(state)
    cu = torch.tensor([0, 3, 4, 13])
    want = _run(tokens, state, "naive", 0.95, cu)
    with torch.no_grad():
        got = _run({n: x.float() for n, x in tokens.items()}, tuple(s.float() for s in state), "fused_recurrent",
                   0.95, cu)  # fmt: skip
        k, u, A0 = tokens["k"].float(), tokens["u"].float(), state[1].float()
        alpha, A = vla_gate(k, u, lam0=0.3, rho=0.95, initial_state=A0, output_final_state=True, cu_seqlens=cu,
                            backend="fused_recurrent")  # fmt: skip
    alpha_want, A_want = vla_gate(tokens["k"], tokens["u"], lam0=0.3, rho=0.95, initial_state=state[1],
                                  output_final_state=True, cu_seqlens=cu, backend="naive")  # fmt: skip
    for name, a, b in zip(("o", "S", "A", "alpha_hat", "A (gate)"), [*got, alpha, A], [*want, alpha_want, A_want]):
        assert rel_err(a, b) < TOL, f"{name}: {rel_err(a, b):.2e}"


def test_training_and_wide_heads_are_refused():
    tokens, _ = draw(VLA, Sizes(B=1, T=4, K=16, V=16))
    x = {n: t.float().requires_grad_() for n, t in tokens.items()}
    with pytest.raises(ValueError, match="forward-only"):
        vla(**x, backend="fused_recurrent")
    wide, _ = draw(VLA, Sizes(B=1, T=2, K=160, V=8))
    with torch.no_grad(), pytest.raises(ValueError, match="up to 128"):
        vla(**{n: t.float() for n, t in wide.items()}, backend="fused_recurrent")
