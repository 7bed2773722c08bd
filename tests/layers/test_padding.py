"""Padding at the layer (`attention_mask`): every mixer gives each row's real tokens what they give alone, from the
row's own state; padded positions touch neither states nor outputs, wherever they are in the row."""

from __future__ import annotations

import pytest
import torch

from linattn.layers import build_layer
from linattn.layers.padding import check_mask, pad, select_rows, unpad, unpad_info
from tests.layers.test_layers import IDS, TOL, VARIANTS, _flat, make, x_of
from tests.ops.cases import rel_err

# left padding, right padding, holes, and a row of padding only
MASK = torch.tensor(
    [
        [0, 0, 0, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 0, 0],
        [1, 0, 1, 1, 0, 0, 1, 1, 1],
        [0, 0, 0, 0, 0, 0, 0, 0, 0],
    ],
    dtype=torch.bool,
)


@pytest.mark.parametrize(("name", "options"), VARIANTS, ids=IDS)
def test_a_padded_batch_equals_each_rows_real_tokens_alone(name, options, one_thread):
    layer = make(name, options)
    B, T = MASK.shape
    _, state = layer(x_of(B, 5, seed=3))  # a state to continue from
    x = x_of(B, T).requires_grad_(True)
    y, new = layer(x, state, attention_mask=MASK)
    x_next = x_of(B, 1, seed=4)
    y_next, _ = layer(x_next, new)
    for b in range(B):
        row = torch.tensor([b])
        real = MASK[b]
        if not real.any():  # nothing read: the state is the one it came with (softmax: plus masked positions)
            if name != "softmax":
                for a, want in zip(_flat(select_rows(new, row)), _flat(select_rows(state, row))):
                    assert torch.equal(a, want)
            want_next, _ = layer(x_next[b : b + 1], select_rows(state, row))
        else:
            y_alone, s_alone = layer(x[b : b + 1, real], select_rows(state, row))
            assert rel_err(y[b : b + 1, real], y_alone) <= TOL
            if name != "softmax":  # its KV cache keeps the padded positions, masked: compared through the next step
                for a, want in zip(_flat(select_rows(new, row)), _flat(s_alone)):
                    assert rel_err(a, want) <= TOL
            want_next, _ = layer(x_next[b : b + 1], s_alone)
        assert torch.equal(y[b, ~real], torch.zeros_like(y[b, ~real]))
        assert rel_err(y_next[b : b + 1], want_next) <= TOL
    (grad,) = torch.autograd.grad(y.sum() + y_next.sum(), x)
    assert torch.equal(grad[~MASK], torch.zeros_like(grad[~MASK]))  # padding reaches nothing


def test_a_mask_of_ones_is_no_mask_and_bad_masks_are_refused(one_thread):
    torch.manual_seed(0)
    layer = build_layer("kla", 32, 4)
    x = torch.randn(2, 5, 32)
    y, _ = layer(x)
    assert torch.equal(layer(x, attention_mask=torch.ones(2, 5, dtype=torch.long))[0], y)
    assert check_mask(torch.ones(2, 5, dtype=torch.bool), 2, 5) is None
    for mask, error, message in (
        (torch.ones(2, 4), ValueError, r"^attention_mask: expected shape \[B, T\] = \[2, 5\], got \[2, 4\]"),
        (torch.ones(2, 5), TypeError, "^attention_mask: expected a bool or integer tensor, got dtype torch.float32"),
        (torch.full((2, 5), 2), ValueError, r"^attention_mask: expected 1 \(a real token\) or 0"),
        ([[1] * 5] * 2, TypeError, r"^attention_mask: expected a torch.Tensor \[B, T\], got list"),
    ):
        with pytest.raises(error, match=message):
            layer(x, attention_mask=mask)
    with pytest.raises(ValueError, match="^attention_mask: not with cu_seqlens"):
        layer(x[:1], cu_seqlens=torch.tensor([0, 2, 5]), attention_mask=torch.tensor([[0, 1, 1, 1, 1]]))


def test_unpad_and_pad_are_inverse_on_the_real_tokens():
    mask = MASK[:3]
    info = unpad_info(mask)
    assert info.cu_seqlens.tolist() == [0, 6, 13, 19] and info.rows.tolist() == [0, 1, 2]
    x = torch.randn(*mask.shape, 3)
    packed = unpad(x, info)
    assert torch.equal(packed[0], x[mask])
    assert torch.equal(pad(packed, info), x * mask[..., None])
