"""`vla(backend="triton")`: the chunk gate, then the two-key delta rule on the Triton engine, against the float64
naive recurrence (forward, final `(S, A)` and every gradient, initial states included)."""

from __future__ import annotations

import pytest
import torch

from linattn.ops import vla
from tests.ops.cases import CASES, Sizes, check_float32_against_naive, draw, rel_err

VLA = next(c for c in CASES if c.id == "vla")


@pytest.mark.parametrize("T", [1, 65, 130])
def test_forward_and_gradients_match_naive(T):
    check_float32_against_naive(VLA, Sizes(B=2, T=T, K=16, V=24), "triton", 1e-5, 5e-5)


def test_varlen_in_one_launch_and_float64_is_refused():
    lengths = [1, 70, 7]
    tokens, state = draw(VLA, Sizes(B=1, T=sum(lengths), K=8, V=8), N=len(lengths))
    cu = torch.tensor([0, 1, 71, 78])
    got = VLA.run({n: x.float() for n, x in tokens.items()}, tuple(s.float() for s in state), "triton", cu_seqlens=cu)
    want = VLA.run(tokens, state, "naive", cu_seqlens=cu)
    assert all(rel_err(a, b) < 1e-5 for a, b in zip(got, want))
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        vla(tokens["q"], tokens["k"], tokens["v"], tokens["u"], backend="triton")


def test_bfloat16_inputs_run_at_their_precision():
    """A bfloat16 model's q, k, v, u: the gate's float32 `α̂` and `k̂` enter the engine in bfloat16."""
    tokens, _ = draw(VLA, Sizes(B=1, T=70, K=16, V=16))
    low = {n: x.bfloat16() for n, x in tokens.items()}
    o, (S, A) = vla(**low, output_final_state=True, backend="triton")
    want, (S_want, A_want) = vla(**tokens, output_final_state=True, backend="naive")
    assert o.dtype == torch.bfloat16 and rel_err(o, want) < 1e-2 and rel_err(S, S_want) < 1e-2  # 5e-3 measured
    assert rel_err(A, A_want) < 2e-3
