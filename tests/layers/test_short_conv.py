"""`ShortConv` on a packed row (`cu_seqlens`): one convolution equals each sequence alone, with its own cached
inputs, in value, new states and every gradient (float64)."""

from __future__ import annotations

import pytest
import torch

from linattn.layers.short_conv import ShortConv
from tests.ops.cases import rel_err


@pytest.mark.parametrize("kernel_size", [1, 2, 4])
@pytest.mark.parametrize("with_state", [False, True])
def test_packed_row_equals_each_sequence_alone(kernel_size, with_state):
    torch.manual_seed(0)
    D, lengths = 5, [6, 1, 9, 2]
    conv = ShortConv(D, kernel_size, bias=True).double()
    x = torch.randn(1, sum(lengths), D, dtype=torch.float64, requires_grad=True)
    state = torch.randn(len(lengths), D, kernel_size - 1, dtype=torch.float64) if with_state else None
    if state is not None:
        state.requires_grad_(True)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    y, new = conv(x, state, cu)
    outs, states = [], []
    for i in range(len(lengths)):
        y_i, s_i = conv._one(x[:, cu[i] : cu[i + 1]], None if state is None else state[i : i + 1])
        outs.append(y_i)
        states.append(s_i)
    want_y, want_new = torch.cat(outs, dim=1), torch.cat(states)
    assert rel_err(y, want_y) <= 1e-12 and rel_err(new, want_new) <= 1e-12
    leaves = [x, conv.conv.weight, conv.conv.bias] + ([state] if state is not None else [])
    dy, dnew = torch.randn_like(y), torch.randn_like(new)
    got = torch.autograd.grad((y * dy).sum() + (new * dnew).sum(), leaves)
    want = torch.autograd.grad((want_y * dy).sum() + (want_new * dnew).sum(), leaves)
    for g, w in zip(got, want):
        assert rel_err(g, w) <= 1e-12


def test_packed_input_must_be_one_row():
    with pytest.raises(ValueError, match=r"^x: expected one packed row \[1, T, D\] with cu_seqlens, got \[2, 4, 3\]"):
        ShortConv(3)(torch.randn(2, 4, 3), None, torch.tensor([0, 4]))
