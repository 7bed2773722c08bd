"""Gated short convolution (Zoology's BaseConv-style block placed before each mixer)."""

from __future__ import annotations

from torch import nn

from linattn.layers.base import Mixer, State
from linattn.layers.short_conv import ShortConv


class GatedConv(Mixer):
    """`y = W_o (ShortConv(W_a x) ⊙ W_b x)`: local token mixing with a multiplicative gate.

    It gives every position a view of the few tokens before it (e.g. a value sees its key), which is what
    lets Zoology's two-layer MQAR models bind keys to values. State: `{"conv": [B, d_model, W − 1]}`.
    """

    def __init__(self, d_model: int, n_heads: int = 1, *, conv_size: int = 4, backend: str = "auto"):
        super().__init__(d_model, n_heads, backend=backend)
        self.in_proj = nn.Linear(d_model, 2 * d_model, bias=True)
        self.conv = ShortConv(d_model, conv_size, activation=None, bias=True)
        self.out = nn.Linear(d_model, d_model, bias=True)

    def init_state(self, batch_size: int) -> State:
        return {"conv": self.conv.init_state(batch_size, device=self.out.weight.device)}

    def mix(self, x, state, cu_seqlens, backend, output_state):
        a, b = self.in_proj(x).chunk(2, dim=-1)
        a, conv = self.conv(a, None if state is None else state["conv"], cu_seqlens)
        return self.out(a * b), {"conv": conv}
