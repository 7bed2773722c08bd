"""Hopper's arithmetic inside Triton's interpreter, for tests of the kernels' precision choices on CPU.

The interpreter multiplies `tl.dot` operands exactly in float32 whatever `input_precision` asks, and casts float32
to bfloat16 by dropping the low bits. The GPU does neither, so under the plain interpreter a one-tf32-pass product
is as exact as a three-pass one and every bfloat16 output errs twice as much as on the GPU. `hopper_arithmetic()`
patches both while it is active:
- `"tf32"`: each float32 operand enters the tensor core with its low 13 mantissa bits dropped (10 are kept);
- `"tf32x3"`: Triton's split, `big = cvt.rna.tf32(x)` (rounded to nearest), `small = x − big` (entering truncated),
  and `big·big + big·small + small·big`, each product accumulated in float32;
- float32 → bfloat16 casts round to nearest even, as `cvt.rn.bf16.f32` does.
`ieee` products and every other cast are left as the interpreter has them; the tensor cores' accumulation order
is not modelled. Checked against a Hopper GPU on `verify`'s VLA cases without a final state (a one-pass state stage,
T = 1000, K = 32 and 128; the GPU draws other random inputs): `o` at 1.23× and 1.20× the naive recurrence's error
under this model, 1.20× and 1.19× on the GPU (`python -m linattn.bench verify --ops vla`).
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
import triton.language as tl
from triton.runtime import interpreter

_LOW_13 = np.uint32(0xFFFFE000)


def _tf32(x: np.ndarray, *, nearest: bool) -> np.ndarray:
    """float32 -> tf32 values (in float32): rounded to nearest (ties away, as `cvt.rna`), or truncated."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    if nearest:
        bits = bits + np.uint32(0x1000)
    return (bits & _LOW_13).view(np.float32)


def _product(a: np.ndarray, b: np.ndarray, precision: str) -> np.ndarray:
    if precision == "TF32":
        return np.matmul(_tf32(a, nearest=False), _tf32(b, nearest=False), dtype=np.float32)
    big_a, big_b = _tf32(a, nearest=True), _tf32(b, nearest=True)
    small_a, small_b = _tf32(a - big_a, nearest=False), _tf32(b - big_b, nearest=False)
    out = np.matmul(small_a, big_b, dtype=np.float32) + np.matmul(big_a, small_b, dtype=np.float32)
    return out + np.matmul(big_a, big_b, dtype=np.float32)


@contextlib.contextmanager
def hopper_arithmetic():
    """Within the block, the interpreter's tensor-core products and bfloat16 casts behave as Hopper's."""
    builder = interpreter.InterpreterBuilder
    create_dot, cast_impl = builder.create_dot, builder.cast_impl

    def dot(self, a, b, acc, input_precision, *rest):
        precision = str(input_precision).rsplit(".", 1)[-1].upper()
        if precision in ("TF32", "TF32X3") and a.data.dtype == np.float32 and b.data.dtype == np.float32:
            return interpreter.TensorHandle(_product(a.data, b.data, precision) + acc.data, acc.dtype.scalar)
        return create_dot(self, a, b, acc, input_precision, *rest)

    def cast(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            rounded = torch.from_numpy(np.ascontiguousarray(src.data, dtype=np.float32)).to(torch.bfloat16)
            return interpreter.TensorHandle(rounded.view(torch.int16).numpy().view(np.uint16), dst_type.scalar)
        return cast_impl(self, src, dst_type)

    builder.create_dot, builder.cast_impl = dot, cast
    try:
        yield
    finally:
        builder.create_dot, builder.cast_impl = create_dot, cast_impl
