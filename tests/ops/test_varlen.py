"""`per_length` against `per_sequence`: sequences batched by length, right-padded with zeros, give each sequence's
own outputs, final states and gradients, for a function that zeros at the end leave unchanged."""

from __future__ import annotations

import torch

from linattn.ops.varlen import per_length, per_sequence
from tests.ops.cases import rel_err


def running_sums(x, y, state):
    """A causal map with a pair state that a zero token leaves as it is: `h_t = h_{t-1} + x_t y_t`, `o_t = h_t`, and
    the running sum of `x²`; `x, y: [B, T, C]`, states `[B, C]`."""
    h0, s0 = (torch.zeros_like(x[:, 0]), torch.zeros_like(x[:, 0])) if state is None else state
    h = h0[:, None] + torch.cumsum(x * y, dim=1)
    s = s0 + (x * x).sum(dim=1)
    return h, (h[:, -1] if x.shape[1] else h0, s)


def test_per_length_equals_per_sequence():
    lengths = [3, 17, 4, 1, 0, 16, 2, 9]  # groups of 1, 2, 4, 16 and 32 places, several sequences in most
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, sum(lengths), 5, dtype=torch.float64, generator=gen, requires_grad=True)
    y = torch.randn(1, sum(lengths), 5, dtype=torch.float64, generator=gen, requires_grad=True)
    h0 = torch.randn(len(lengths), 5, dtype=torch.float64, generator=gen, requires_grad=True)
    s0 = torch.randn(len(lengths), 5, dtype=torch.float64, generator=gen, requires_grad=True)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    got = per_length(running_sums, cu, (x, y), (h0, s0))
    want = per_sequence(running_sums, cu, (x, y), (h0, s0))
    flat = lambda r: [r[0], *r[1]]
    for a, b in zip(flat(got), flat(want)):
        assert a.shape == b.shape and rel_err(a, b) <= 1e-14
    leaves = [x, y, h0, s0]
    weights = [torch.randn_like(t) for t in flat(want)]
    d_got = torch.autograd.grad(sum((w * t).sum() for w, t in zip(weights, flat(got))), leaves)
    d_want = torch.autograd.grad(sum((w * t).sum() for w, t in zip(weights, flat(want))), leaves)
    for a, b in zip(d_got, d_want):
        assert rel_err(a, b) <= 1e-14


def test_per_length_without_cu_seqlens_is_a_plain_call():
    x = torch.randn(2, 6, 3)
    o, (h, s) = per_length(running_sums, None, (x, x), None)
    assert torch.equal(o, running_sums(x, x, None)[0]) and h.shape == s.shape == (2, 3)
