"""Low precision (docs/design.md §4): each backend's error against float64 is at most 2× the naive recurrence's own
error in the same input dtype (states and accumulation are float32 in both).

The bound has a floor of 1e-6 (about 8 ulp of float32, the accumulation dtype): with float32 inputs both
backends sit at rounding level, where the ratio of two ~1e-7 errors says nothing.
"""

from __future__ import annotations

import pytest
import torch

from tests.ops.cases import CASES, Sizes, draw, grads, rel_err

FLOOR = 1e-6


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_chunk_error_within_twice_naive(case, dtype):
    """Outputs, final states and the gradients of every input and initial state, the same cotangents for all."""
    tokens, state = draw(case, Sizes(B=2, T=300, K=32, V=32))
    low = {name: x.to(dtype) for name, x in tokens.items()}

    def run(backend, token_dtype, state_dtype):
        xs = [x.to(token_dtype).requires_grad_() for x in low.values()]
        ss = [s.to(state_dtype).requires_grad_() for s in state]
        outs = case.run(dict(zip(low, xs)), tuple(ss), backend)
        return [o.detach() for o in outs], grads(outs, [*xs, *ss])

    reference = run("naive", torch.float64, torch.float64)
    naive, chunk = run("naive", dtype, torch.float32), run("chunk", dtype, torch.float32)
    names = [f"output[{i}]" for i in range(len(naive[0]))] + [f"d{n}" for n in low]
    names += [f"d initial_state[{i}]" for i in range(len(state))]
    for name, n, c, ref in zip(names, [*naive[0], *naive[1]], [*chunk[0], *chunk[1]], [*reference[0], *reference[1]]):
        assert c.dtype == n.dtype, f"{case.id} {name}: dtype {c.dtype} != naive's {n.dtype}"
        bound = max(2 * rel_err(n, ref), FLOOR)
        assert rel_err(c, ref) <= bound, f"{case.id} {name}: error {rel_err(c, ref):.2e} > {bound:.2e}"
