"""Public `unit_rows`: the Triton kernels (`triton.py`) on CUDA, the PyTorch function (`pytorch.py`) otherwise."""

from __future__ import annotations

import torch

from linattn.ops.unit_rows.pytorch import _UnitRows


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    """`x / max(‖x‖₂, 1e-12)` over the last dim, `F.normalize`'s value and gradient, in float32 (float64 for float64
    inputs), keeping only `x` for the backward. Triton kernels on CUDA, PyTorch otherwise."""
    if x.is_cuda and x.dtype != torch.float64:
        # imported here: triton is an optional dependency, and `triton.jit` reads TRITON_INTERPRET at import
        from linattn.ops.unit_rows.triton import UnitRowsTriton

        return UnitRowsTriton.apply(x)
    return _UnitRows.apply(x)
