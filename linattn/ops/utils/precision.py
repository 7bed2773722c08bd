"""The precision of the kernels' products: three tf32 passes, or one where that is exact or under bfloat16's rounding.

Every `tl.dot` in the kernels multiplies float32 registers (inputs upcast on load, intermediates float32) and
accumulates in float32. Products that involve an intermediate (the WY inverse, pseudo-values, chunk states,
decay-scaled rows) ask for `"tf32x3"`: three tf32 passes, about 22 bits, the float32 recurrence's accuracy that
docs/design.md §4 holds every dtype to (Triton's default on NVIDIA, one tf32 pass, errs by ~1e-3 per product). A product
of two raw inputs is different: a tf32 operand carries 11 significant bits, so bfloat16 (8) and float16 (11)
inputs enter it exactly and one pass gives the same float32-accumulated result as three.

One case more: when the forward's only output is a bfloat16 `o` (no final state asked, as in training), the products
that form `T` and apply it to the chunk's rows for `Ũ`, `K̃` (stage 2), the state pass's (stage 3) and the output
stage's with `h` and `U` (stage 4; in stages 2 and 4 for bfloat16 / float16 keys only, the delta rule's
`apply_precision`) take one tf32 pass. Their error, ~2⁻¹¹ relative, is then under `o`'s own bfloat16 rounding (2⁻⁹), so
`o` errs as the float32 recurrence rounded to bfloat16 does, which is what docs/design.md §4 asks (`python -m
linattn.bench verify`'s `no-ht` cases: `o` at 1.0 – 1.2× the naive recurrence's error); at 64K the state pass runs
2.2× as fast, stages 2 and 4 about 1.5× (`python -m linattn.bench stages`, against three passes). A float32 final
state (or a float16 / float32 `o`, rounded to 11 or 24 bits) keeps three passes.

The backward likewise, when every token input (`q, k, v, w`) and `o`'s gradient `dO` are bfloat16 and no final
state's gradient comes in (as in training): all its products take one tf32 pass (B0 – B3). Every gradient then
comes from `dO` alone, which carries bfloat16's rounding (2⁻⁹): the tokens' gradients are rounded to bfloat16,
and those of `β`, `g` and the initial state, though float32, inherit `dO`'s error (the naive recurrence's own is
~2e-3 there, `verify`'s bfloat16 cases), so a ~2⁻¹¹ error per product stays under docs/design.md §4's bound. A float32
final state's gradient is exact in float32, and the gradients it reaches (at T = 1 nearly all of `dβ`) err at
float32's level in the naive recurrence: with it the backward keeps three passes, as it does for a float32 or
float16 token (VLA's float32 `k̂`, `α̂` among them), and below `ONE_PASS_TOKENS` tokens. There the products cost
little, and the bound, a ratio of two norms, is a coin toss for a gradient of a few entries: one pass's error and
`dO`'s rounding are independent and of the same order, so either can come out twice the other (`dβ` at T = 1,
two heads, `verify.check` in the interpreter with Hopper's tf32 and bfloat16 rounding emulated by
`tests/ops/triton/hopper_arithmetic.py`: 0.3× to 5× naive's error over six seeds; from T = 63 on, 1.1× to 1.4×).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

ONE_PASS_TOKENS = 1000  # the backward's products take one tf32 pass from this many tokens on (module docstring)


def raw_precision(*dtypes: torch.dtype) -> str:
    """`input_precision` of the products of raw inputs of these dtypes: one tf32 pass when it is exact (no operand
    is float32; a float32 key beside bfloat16 queries, as VLA's `α̂` is, needs three)."""
    return "tf32x3" if torch.float32 in dtypes else "tf32"


def raw_operands(device: torch.device, *dtypes: torch.dtype) -> str:
    """How the kernels multiply two raw inputs of these dtypes (`raw_dot`'s `RAW`): `"native"` when they share one
    16-bit dtype, the tiles as loaded on the bfloat16 / float16 tensor cores (their products are exact there as in one
    tf32 pass on float32 copies, in half the MMA steps), else `raw_precision`'s `input_precision` on float32 copies.
    Bfloat16 on the CPU keeps float32 copies: Triton's interpreter multiplies bfloat16 tiles wrongly (3.9: a 16 × 16
    product of unit-scale entries off by 2.5e10; float16 is exact)."""
    native = len(set(dtypes)) == 1 and dtypes[0] in (torch.bfloat16, torch.float16)
    if not native or (dtypes[0] == torch.bfloat16 and device.type != "cuda"):
        return raw_precision(*dtypes)
    return "native"


@triton.jit
def raw_dot(a, b, RAW: tl.constexpr):
    """`a @ b` of two raw inputs' tiles as loaded, float32 out, `RAW` from `raw_operands`."""
    if RAW == "native":
        return tl.dot(a, b)
    else:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision=RAW)


def fast_precision(device: torch.device, *dtypes: torch.dtype) -> str | None:
    """The products of the `precision="fast"` level for token inputs of these dtypes: `"bf16"` (bfloat16 tensor-core
    operands) when all are bfloat16, else None (the exact level's choices hold). float32 inputs would leave float32's
    error for tf32's 2⁻¹¹, far outside 3× the naive recurrence's; a float16 state, sums of `k vᵀ` over a whole
    sequence without the erase term, would overflow at 65,504. On the CPU it is `"bf16-emulated"`: the interpreter
    multiplies bfloat16 tiles wrongly (`raw_operands`), so the operands are rounded to bfloat16 and multiplied exactly
    in float32, which is what the tensor cores compute."""
    if any(dtype != torch.bfloat16 for dtype in dtypes):
        return None
    return "bf16" if device.type == "cuda" else "bf16-emulated"


def fast_backward(tokens: tuple[torch.Tensor, ...]) -> str | None:
    """`fast_precision` for a backward of these token inputs and `o`'s gradient (`[B, T, H, ·]`), from
    `ONE_PASS_TOKENS` tokens (`B·T`) on, as the exact level's one-pass backward: on a shorter call the rule's ratio of
    two norms of a few entries is noise (at T = 65, K = 128, the H200's `dg` came to 2.95× the naive recurrence's
    error, bound 3×: `python -m linattn.bench verify --quick --precision fast`); None below."""
    B, T = tokens[0].shape[:2]
    if B * T < ONE_PASS_TOKENS:
        return None
    return fast_precision(tokens[0].device, *(x.dtype for x in tokens))


@triton.jit
def mma(a, b, PRECISION: tl.constexpr):
    """`a @ b` with float32 accumulation, operands as `PRECISION` says: `"tf32x3"`, `"tf32"`, `"ieee"` (float32
    copies, Triton's `input_precision`), or the fast level's `"bf16"` (rounded to bfloat16, tensor-core products) and
    `"bf16-emulated"` (rounded to bfloat16, multiplied in float32: the interpreter's stand-in)."""
    if PRECISION == "bf16":
        return tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    elif PRECISION == "bf16-emulated":
        return tl.dot(a.to(tl.bfloat16).to(tl.float32), b.to(tl.bfloat16).to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision=PRECISION)


def state_precision(out_dtype: torch.dtype, output_final_state: bool) -> str:
    """`input_precision` of the forward state pass's products (stage 3) for the outputs asked of the forward."""
    return "tf32" if out_dtype == torch.bfloat16 and not output_final_state else "tf32x3"


def grad_precision(tokens: tuple[torch.Tensor, ...], final_state_grad: bool) -> str:
    """`input_precision` of the backward's products that involve an intermediate, from the token inputs and `o`'s
    gradient (`[B, T, H, ·]`), and whether the final state has a gradient: one tf32 pass when all are bfloat16,
    there are at least `ONE_PASS_TOKENS` tokens (`B·T`) and no final state's gradient."""
    B, T = tokens[0].shape[:2]
    bf16 = all(x.dtype == torch.bfloat16 for x in tokens)
    return "tf32" if bf16 and B * T >= ONE_PASS_TOKENS and not final_state_grad else "tf32x3"
