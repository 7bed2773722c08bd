"""The precision of the products of two raw inputs (`K Wᵀ`, `Q Wᵀ`), chosen by the inputs' dtypes.

Every `tl.dot` in the kernels multiplies float32 registers (inputs upcast on load, intermediates float32) and
accumulates in float32. Products that involve an intermediate (the WY inverse, pseudo-values, chunk states,
decay-scaled rows) ask for `"tf32x3"`: three tf32 passes, about 22 bits, the float32 recurrence's accuracy that
DESIGN §4 holds every dtype to (Triton's default on NVIDIA, one tf32 pass, errs by ~1e-3 per product). A product
of two raw inputs is different: a tf32 operand carries 11 significant bits, so bfloat16 (8) and float16 (11)
inputs enter it exactly and one pass gives the same float32-accumulated result as three.

One case more: when the forward's only output is a bfloat16 `o` (no final state asked, as in training), the state
pass's products (stage 3) take one tf32 pass. Their error, ~2⁻¹¹ relative, is then under `o`'s own bfloat16
rounding (2⁻⁹), so `o` errs as the float32 recurrence rounded to bfloat16 does, which is what DESIGN §4 asks
(`verify`'s `no-ht` cases on the H200); the state pass runs 2.2× as fast. A float32 final state (or a float16 /
float32 `o`, rounded to 11 or 24 bits) keeps three passes, and so does the backward's recomputed state pass. Stage
4 keeps three passes too: on the H200 one pass made it 6% slower, not faster.
"""

from __future__ import annotations

import torch


def raw_precision(*dtypes: torch.dtype) -> str:
    """`input_precision` of the products of raw inputs of these dtypes: one tf32 pass when it is exact (no operand
    is float32; a float32 key beside bfloat16 queries, as VLA's `α̂` is, needs three)."""
    return "tf32x3" if torch.float32 in dtypes else "tf32"


def state_precision(out_dtype: torch.dtype, output_final_state: bool) -> str:
    """`input_precision` of the forward state pass's products (stage 3) for the outputs asked of the forward."""
    return "tf32" if out_dtype == torch.bfloat16 and not output_final_state else "tf32x3"
