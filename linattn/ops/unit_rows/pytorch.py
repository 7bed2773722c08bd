"""Rows scaled to unit length along the last dim, computed in float32 (float64 for float64 inputs), keeping only
the input for the backward.

    y = x / max(‖x‖, ε)
    ∂L/∂x = (g − y (yᵀg)) / ‖x‖         where ‖x‖ ≥ ε
    ∂L/∂x = g / ε                        where ‖x‖ < ε (the clamp's branch, as `F.normalize`)

The norm is taken of the row divided by its largest entry, then scaled back: `‖x‖²` overflows float32 from
`‖x‖ ≈ 1.8e19` (`F.normalize` then returns zeros), while a scaled norm is finite for every finite row.

`F.normalize(x.float())` keeps the float32 copy of `x` and the norms for its backward: for a bfloat16 `[B, T, H, d]`
input, twice the input's own bytes, alive until the backward. Here only `x` is kept, which the caller holds anyway,
and the norms are recomputed in the backward: one extra pass over `x`. On CUDA (float32, bfloat16, float16) the
forward and the backward are one Triton kernel each (`triton.py`).
"""

from __future__ import annotations

import torch

from linattn.ops.checks import compute_dtype

EPS = 1e-12  # F.normalize's default


class _UnitRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        xf = x.to(compute_dtype(x))
        return xf / row_norms(xf).clamp_min(EPS)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        xf = x.to(g.dtype)
        n = row_norms(xf)
        return unit_rows_grad(xf / n.clamp_min(EPS), n, g).to(x.dtype)


def row_norms(x: torch.Tensor) -> torch.Tensor:
    """`‖x‖₂` over the last dim, `[..., 1]`, as `m ‖x / m‖` with `m = max |x|` (1 for a zero row): finite for every
    finite row, where the plain sum of squares overflows float32 from `‖x‖ ≈ 1.8e19`."""
    m = x.abs().amax(-1, keepdim=True)
    m = torch.where(m > 0, m, torch.ones_like(m))
    return torch.linalg.vector_norm(x / m, dim=-1, keepdim=True).mul_(m)


def unit_rows_grad(y: torch.Tensor, n: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """`∂L/∂x` of `y = x / max(‖x‖, EPS)` from `y`, the norms `n = ‖x‖` (`[..., 1]`) and `g = ∂L/∂y`, as the module
    docstring writes it: `(g − y (yᵀg)) / ‖x‖`, or `g / EPS` where the clamp held. One new tensor."""
    dot = torch.linalg.vecdot(y, g)[..., None] * (n >= EPS)
    return torch.addcmul(g, y, dot, value=-1).div_(n.clamp_min(EPS))
