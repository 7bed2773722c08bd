"""`unit_rows` is `F.normalize` in value and gradient, computed in float32, keeping only its input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from linattn.ops.unit_rows import unit_rows


def test_value_and_gradient_equal_f_normalize_in_float64_with_a_zero_row():
    x = torch.randn(2, 5, 3, 7, dtype=torch.float64)
    x[0, 1, 2] = 0
    x.requires_grad_()
    g = torch.randn_like(x)
    y = unit_rows(x)
    (dx,) = torch.autograd.grad(y, x, g)
    ref = F.normalize(x, dim=-1)
    (dref,) = torch.autograd.grad(ref, x, g)
    torch.testing.assert_close(y, ref, rtol=0, atol=1e-15)
    torch.testing.assert_close(dx, dref, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(unit_rows, (x.detach()[1:].clone().requires_grad_(),))


def test_low_precision_input_gives_float32_rows_and_a_gradient_in_its_dtype():
    torch.manual_seed(0)
    x = torch.randn(3, 8, dtype=torch.bfloat16, requires_grad=True)
    y = unit_rows(x)
    assert y.dtype == torch.float32
    # float32 rows as F.normalize gives them, to float32's rounding (the two sum the squares in different orders)
    torch.testing.assert_close(y, F.normalize(x.detach().float(), dim=-1), rtol=0, atol=2.4e-7)
    g = torch.randn(3, 8)
    (dx,) = torch.autograd.grad(y, x, g)
    xf = x.detach().float().requires_grad_()
    (dref,) = torch.autograd.grad(F.normalize(xf, dim=-1), xf, g)
    assert dx.dtype == torch.bfloat16
    torch.testing.assert_close(dx, dref.bfloat16())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_triton_kernels_equal_the_pytorch_path(dtype):
    """The kernels (here in Triton's interpreter) on rows of an awkward width, more rows than a program's tile, and
    a zero row: the same rows and gradient as the PyTorch path, in the input's dtype."""
    from linattn.ops.unit_rows.pytorch import _UnitRows
    from linattn.ops.unit_rows.triton import UnitRowsTriton

    x = torch.randn(3, 70, 24).to(dtype)
    x[1, 5] = 0
    g = torch.randn(3, 70, 24)
    outs = []
    for fn in (UnitRowsTriton.apply, _UnitRows.apply):
        leaf = x.clone().requires_grad_()
        y = fn(leaf)
        y.backward(g)
        outs.append((y, leaf.grad))
    (y, dx), (y_ref, dx_ref) = outs
    assert y.dtype == torch.float32 and dx.dtype == dtype
    torch.testing.assert_close(y, y_ref, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(dx, dx_ref, rtol=1e-5 if dtype == torch.float32 else 1e-2, atol=1e-5)


def test_in_place_kernel_gives_the_rows_and_their_norms():
    """`unit_rows_in_place` (the gate's normalisation of `α` above d = 64, here in Triton's interpreter): the rows
    of `chunk.unit_rows_` in the same tensor and the norms before the clamp, a zero row included."""
    from linattn.ops.unit_rows.triton import unit_rows_in_place
    from linattn.ops.vla.chunk import unit_rows_

    x = torch.randn(2, 70, 3, 96)
    x[1, 5, 2] = 0
    y_ref, n_ref = unit_rows_(x.clone())
    y, n = unit_rows_in_place(x)
    assert y.data_ptr() == x.data_ptr() and n.shape == x.shape[:-1]
    torch.testing.assert_close(y, y_ref, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(n, n_ref, rtol=1e-6, atol=0)
