"""KLA's step inside the Triton kernels (the chunked forward's stage 2 and the decode kernel): the twin of
`linattn.ops.delta_rule.kaczmarz.kaczmarz_step`, so that every backend writes the same way."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def kaczmarz_reciprocal(sq_norm, eps):
    """`1 / (‖k‖² + eps)` from `sq_norm = ‖k‖²`, or 0 where that is not finite: a zero key with `eps = 0`, or one too
    small for the reciprocal, has nothing to project onto and writes nothing."""
    x = sq_norm + eps
    r = 1.0 / tl.where(x > 0, x, 1.0)
    return tl.where((x > 0) & (r < float("inf")), r, 0.0)
