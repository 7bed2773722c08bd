"""`ccq_query(backend="triton")`: the running sums on the Triton engine, against the float64 naive recurrence."""

from __future__ import annotations

import pytest
import torch

from linattn.ops import ccq_query
from tests.ops.cases import CASES, Sizes, check_float32_against_naive, draw, rel_err

CCQ_CASES = [c for c in CASES if c.id.startswith("ccq")]


@pytest.mark.parametrize("T", [1, 65, 130])
@pytest.mark.parametrize("case", CCQ_CASES, ids=[c.id for c in CCQ_CASES])
def test_forward_and_gradients_match_naive(case, T):
    check_float32_against_naive(case, Sizes(B=2, T=T, K=16), "triton", 1e-5, 2e-5)


def test_varlen_in_one_launch_and_float64_is_refused():
    case = CCQ_CASES[1]
    lengths = [1, 40, 7]
    tokens, state = draw(case, Sizes(B=1, T=sum(lengths), K=8), N=len(lengths))
    cu = torch.tensor([0, 1, 41, 48])
    low = {n: x.float() for n, x in tokens.items()}
    got = case.run(low, tuple(s.float() for s in state), "triton", cu_seqlens=cu)
    want = case.run(tokens, state, "naive", cu_seqlens=cu)
    assert all(rel_err(a, b) < 1e-5 for a, b in zip(got, want))
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        ccq_query(tokens["q"], tokens["k"], tokens["lam"], backend="triton")
