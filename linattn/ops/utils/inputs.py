"""The inputs the Triton kernels take: `q, k, v`-like tensors in float32, bfloat16 or float16 (the kernels compute in
float32; float64 stays with the PyTorch backends), and for the decode kernels no gradient asked.
"""

from __future__ import annotations

import torch

INPUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def check_input_dtype(op: str, names: str, dtype: torch.dtype) -> None:
    """`op(backend='triton')`'s inputs `names`, of dtype `dtype`: a TypeError unless the kernels take it."""
    if dtype not in INPUT_DTYPES:
        raise TypeError(
            f"{op}(backend='triton'): {names} must be float32, bfloat16 or float16, got {dtype} "
            "(the kernels compute in float32; use backend='chunk' or 'naive' for float64)"
        )


def check_decode_inputs(names: str, x: torch.Tensor, tensors: tuple[torch.Tensor | None, ...]) -> None:
    """A decode kernel's inputs: `x` (the first of `names`) in a float dtype the kernels take, and no gradient asked
    of any of `tensors` (the kernels have no backward)."""
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"backend 'fused_recurrent': {names} must be float32, bfloat16 or float16, got {x.dtype}")
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise ValueError(
            "backend: 'fused_recurrent' is forward-only (for decoding); use 'triton' or 'chunk' to train, "
            "or run it under torch.no_grad()"
        )
