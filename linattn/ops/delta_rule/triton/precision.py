"""The delta rule's own precision choices, on the rules its kernels share with the other ops' (`utils/precision.py`).

`narrow_launch`: the parallel kernels' warps; `apply_precision`: the forward's stages 2 and 4; `forward_precision`
and `backward_precision`: each stage's, at either level (`precision="exact"` or `"fast"`).
`linattn/ops/utils/precision.py`'s docstring gives the reasons.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from linattn.ops.utils.precision import fast_backward, fast_precision, grad_precision, raw_precision, state_precision


def narrow_launch(*key_dtypes: torch.dtype) -> bool:
    """Whether the parallel kernels (`wy_fwd`, `wy_apply`, `output_fwd`, the state backward's pre-pass) launch two
    warps on narrower blocks: for 16-bit keys, whose raw products take one tf32 pass. Two warps save about 6% of
    GDN's forward + backward at K = V = 128, 64K tokens (`python -m linattn.bench ops --only "ours triton GDN"`);
    float32 keys (three passes) keep four: with two, VLA's (K = 128, float32 `k̂`, `α̂`) is 7% slower
    (`python -m linattn.bench profile --contenders "VLA triton"`)."""
    return raw_precision(*key_dtypes) == "tf32"


def apply_precision(state: str, *key_dtypes: torch.dtype) -> str:
    """`input_precision` of stage 2's `T`-applications (`Ũ`, `K̃`) and of stage 4's products with `h` and `U` in the
    forward: the state pass's (`state`) for bfloat16 / float16 keys; three passes for float32 ones (VLA's `k̂`, `α̂`:
    with one in stage 2, its bfloat16 `o` errs 4.1 – 4.4× the naive recurrence's, with one in stage 4 1.7× against
    1.2×: `python -m linattn.bench verify --ops vla`, its `no-ht` cases)."""
    return state if raw_precision(*key_dtypes) == "tf32" else "tf32x3"


@dataclass(frozen=True)
class ForwardPrecision:
    """`input_precision` of the forward's stage 2 (`rows`: `Ũ`, `K̃`), stage 3 (`state`) and stage 4 (`output`), and
    the dtype stages 2 and 3 store `T`, `Ũ`, `K̃`, `h`, `U` in."""

    rows: str
    state: str
    output: str
    store: torch.dtype = torch.float32


def forward_precision(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, w: torch.Tensor, out_dtype: torch.dtype, final_state: bool,
    fast: bool = False,
) -> ForwardPrecision:  # fmt: skip
    """The exact level: one tf32 pass in the state pass when a bfloat16 `o` is the only output (`state_precision`),
    and in stages 2 and 4 beside it for 16-bit keys (`apply_precision`). The fast level with bfloat16 tokens:
    bfloat16 intermediates, stage 4's products on bfloat16 operands, one tf32 pass in stages 2 and 3, whose products
    the final state is summed from (in bfloat16 they put DeltaNet's past the level's bound of 2⁻⁸ with Hopper's
    arithmetic emulated; `triton/README.md`)."""
    sixteen = fast_precision(q.device, q.dtype, k.dtype, v.dtype, w.dtype) if fast else None
    if sixteen is not None:
        return ForwardPrecision("tf32", "tf32", sixteen, torch.bfloat16)
    state = state_precision(out_dtype, final_state)
    return ForwardPrecision(apply_precision(state, k.dtype, w.dtype), state, apply_precision(state, q.dtype, w.dtype))


@dataclass(frozen=True)
class BackwardPrecision:
    """`input_precision` of each backward stage's products that involve an intermediate: B0 (`wy_apply`), B1 (the
    recomputed state pass), B2 (the state backward), B3 (the local backward)."""

    wy: str
    state: str
    walk: str
    local: str
    store: torch.dtype = torch.float32  # what B0 – B2 store `Ũ`, `K̃`, `K̃ᵀ`, `h`, `U`, `dh` in (fast: bfloat16)


def backward_precision(
    tokens: tuple[torch.Tensor, ...],
    final_state_grad: bool,
    derived_keys: bool = False,
    initial_state: bool = False,
    fast: bool = False,
) -> BackwardPrecision:
    """`grad_precision` for every stage; or, for keys the caller derived in float32 from bfloat16 tokens
    (`derived_keys`: VLA's `k̂`, `α̂`, whose gradients reach bfloat16 leaves) with `tokens` those bfloat16 tokens
    and no initial state, one tf32 pass in B1 and B3 only. B0 and B2 keep three: their one-pass products on the
    intermediates of correlated float32 keys err 6.6 – 7.0e-3 against the naive recurrence's 2.3 – 2.9e-3
    (Hopper's arithmetic emulated, `tests/ops/triton/hopper_arithmetic.py`, on `verify`'s VLA inputs, T = 1000,
    K = 32), the other two stages 1.4 – 1.8e-3.

    `fast` (the `precision="fast"` level) with bfloat16 tokens, from `ONE_PASS_TOKENS` tokens on (`fast_backward`),
    whatever the final state: B0 and B1 recompute what the forward's stages 2 and 3 computed, as they did (one tf32
    pass, bfloat16 storage), the walk (B2) takes one tf32 pass on float32 gradients (with bfloat16 ones `dβ` left
    the level's 3× with Hopper's arithmetic emulated) and stores the chunks' `dh` and the local terms `E_c` it adds in
    bfloat16 (B3 multiplied `dh` rounded to bfloat16 already; `E_c`'s rounding reaches `dṼ`, `dh_0` and, through the
    walk's `dh`, the rest: `dh_0` at 1.5× the naive recurrence's error, emulated), and B3 multiplies on bfloat16
    operands."""
    sixteen = fast_backward(tokens) if fast else None
    if sixteen is not None:
        return BackwardPrecision("tf32", "tf32", "tf32", sixteen, store=torch.bfloat16)
    one = grad_precision(tokens, final_state_grad)
    if not derived_keys:
        return BackwardPrecision(one, one, one, one)
    split = one if not initial_state else "tf32x3"
    return BackwardPrecision("tf32x3", split, "tf32x3", split)
