"""The precision of the products of two raw inputs (`K Wᵀ`, `Q Wᵀ`), chosen by the inputs' dtypes.

Every `tl.dot` in the kernels multiplies float32 registers (inputs upcast on load, intermediates float32) and
accumulates in float32. Products that involve an intermediate (the WY inverse, pseudo-values, chunk states,
decay-scaled rows) ask for `"tf32x3"`: three tf32 passes, about 22 bits, the float32 recurrence's accuracy that
DESIGN §4 holds every dtype to (Triton's default on NVIDIA, one tf32 pass, errs by ~1e-3 per product). A product
of two raw inputs is different: a tf32 operand carries 11 significant bits, so bfloat16 (8) and float16 (11)
inputs enter it exactly and one pass gives the same float32-accumulated result as three.
"""

from __future__ import annotations

import torch


def raw_precision(*dtypes: torch.dtype) -> str:
    """`input_precision` of the products of raw inputs of these dtypes: one tf32 pass when it is exact (no operand
    is float32; a float32 key beside bfloat16 queries, as VLA's `α̂` is, needs three)."""
    return "tf32x3" if torch.float32 in dtypes else "tf32"
