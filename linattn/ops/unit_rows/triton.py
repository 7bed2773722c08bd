"""`unit_rows` on the GPU: the forward and the backward each one pass over the rows (PyTorch takes about four and
eight elementwise or reduction kernels). `pytorch.py` holds the math.

Rows `[R, D]` (every leading dim flattened), `BR` rows a program, each row whole in one `[BR, BD]` tile
(`BD = next_pow2(D)`); norms and products in float32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.unit_rows.pytorch import EPS
from linattn.ops.utils.grid import cdiv, next_power_of_2


@triton.jit
def _tile(R, D: tl.constexpr, BD: tl.constexpr, BR: tl.constexpr):
    """Offsets and mask of this program's `[BR, BD]` tile of a row-major `[R, D]` tensor."""
    o_r = tl.program_id(0) * BR + tl.arange(0, BR)
    o_d = tl.arange(0, BD)
    return o_r.to(tl.int64)[:, None] * D + o_d[None, :], (o_r < R)[:, None] & (o_d < D)[None, :]


@triton.jit
def _row_norms(b_x):
    """`[BR, BD] -> [BR]` norms as `m ‖x / m‖`, `m = max |x|` (1 for a zero row): `Σ x²` overflows float32 from
    `‖x‖ ≈ 1.8e19`, the scaled sum never does for a finite row."""
    b_m = tl.max(tl.abs(b_x), 1)
    b_m = tl.where(b_m > 0, b_m, 1.0)
    b_xs = b_x / b_m[:, None]
    return b_m * tl.sqrt(tl.sum(b_xs * b_xs, 1))


@triton.jit
def unit_rows_fwd_kernel(x, y, n, R, D: tl.constexpr, BD: tl.constexpr, BR: tl.constexpr, EPS_: tl.constexpr):
    """`y = x / max(‖x‖, ε)`, `x: [R, D]` any float dtype, `y: [R, D]` float32 (may be `x`); the norms `‖x‖` into
    `n: [R]` float32 unless it is None."""
    o, m = _tile(R, D, BD, BR)
    # [BR, BD]
    b_x = tl.load(x + o, mask=m, other=0).to(tl.float32)
    # [BR]
    b_n = _row_norms(b_x)
    tl.store(y + o, b_x / tl.maximum(b_n, EPS_)[:, None], mask=m)
    if n is not None:
        o_r = tl.program_id(0) * BR + tl.arange(0, BR)
        tl.store(n + o_r, b_n, mask=o_r < R)


@triton.jit
def unit_rows_bwd_kernel(x, g, dx, R, D: tl.constexpr, BD: tl.constexpr, BR: tl.constexpr, EPS_: tl.constexpr):
    """`dx = (g − y (yᵀg)) / ‖x‖`, or `g / ε` where `‖x‖ < ε`; `x, dx: [R, D]` in x's dtype, `g: [R, D]` float32."""
    o, m = _tile(R, D, BD, BR)
    # [BR, BD]
    b_x = tl.load(x + o, mask=m, other=0).to(tl.float32)
    b_g = tl.load(g + o, mask=m, other=0).to(tl.float32)
    # [BR]
    b_n = _row_norms(b_x)
    b_nc = tl.maximum(b_n, EPS_)
    b_y = b_x / b_nc[:, None]
    b_yg = tl.sum(b_y * b_g, 1)
    b_dx = tl.where((b_n >= EPS_)[:, None], b_g - b_y * b_yg[:, None], b_g) / b_nc[:, None]
    tl.store(dx + o, b_dx.to(dx.dtype.element_ty), mask=m)


def _launch(kernel, *tensors: torch.Tensor) -> None:
    x = tensors[0]
    D = x.shape[-1]
    R = x.numel() // D
    BD = next_power_of_2(D)
    BR = max(1, 1024 // BD)  # 1024 floats a tile: 8 a thread, few registers, many programs in flight
    kernel[(cdiv(R, BR),)](*tensors, R, D=D, BD=BD, BR=BR, EPS_=EPS, num_warps=4)


def unit_rows_in_place(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`chunk.unit_rows_`'s contract in one launch: `y`'s rows (contiguous float32) normalised in place, and their
    norms before the clamp (`y.shape[:-1]`). Not differentiable."""
    n = torch.empty(y.shape[:-1], dtype=torch.float32, device=y.device)
    _launch(unit_rows_fwd_kernel, y, y, n)
    return y, n


class UnitRowsTriton(torch.autograd.Function):
    """`unit_rows` for float32, bfloat16 or float16 inputs; keeps only `x` for the backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty(x.shape, dtype=torch.float32, device=x.device)
        _launch(unit_rows_fwd_kernel, x, y, None)
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        dx = torch.empty_like(x)
        _launch(unit_rows_bwd_kernel, x, g.contiguous(), dx)
        return dx
