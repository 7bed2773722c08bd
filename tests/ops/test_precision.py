"""Low precision (DESIGN §4): each backend's error against float64 is at most 2× the naive recurrence's own error
in the same input dtype (states and accumulation are float32 in both).

The bound has a floor of 1e-6 (about 8 ulp of float32, the accumulation dtype): with float32 inputs both
backends sit at rounding level, where the ratio of two ~1e-7 errors says nothing.
"""

from __future__ import annotations

import pytest
import torch

from tests.ops.cases import CASES, Sizes, draw, rel_err

FLOOR = 1e-6


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_chunk_error_within_twice_naive(case, dtype):
    tokens, state = draw(case, Sizes(B=2, T=300, K=32, V=32))
    low = {name: x.to(dtype) for name, x in tokens.items()}
    state32 = tuple(s.float() for s in state)
    reference = case.run({name: x.double() for name, x in low.items()}, state, "naive")
    naive = case.run(low, state32, "naive")
    chunk = case.run(low, state32, "chunk")
    for i, (n, c, ref) in enumerate(zip(naive, chunk, reference)):
        assert c.dtype == n.dtype, f"{case.id}[{i}]: dtype {c.dtype} != naive's {n.dtype}"
        bound = max(2 * rel_err(n, ref), FLOOR)
        assert rel_err(c, ref) <= bound, f"{case.id}[{i}]: error {rel_err(c, ref):.2e} > {bound:.2e}"
