"""Scalar-decay linear attention in Mamba-2's form (SSD with one state group)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from linattn.layers.base import Mixer, RMSNorm, State, merge_heads, promote, split_heads
from linattn.layers.gated_deltanet import MambaDecay
from linattn.layers.short_conv import ConvProjections
from linattn.ops import gated_linear_attention


class Mamba2(Mixer):
    """`h_t = exp(Δ_t A) h_{t-1} + (Δ_t B_t) x_tᵀ`, `y_t = h_tᵀ C_t + D ⊙ x_t` per head, then
    `RMSNorm(y ⊙ SiLU(z))` → `W_o` (Mamba-2 / SSD; `A < 0` per head, `B, C` shared by all heads).

    It is `gated_linear_attention` with `q = C`, `k = Δ B`, `v = x` and the scalar log-decay `g = Δ A`.
    `x, B, C` go through a causal short conv + SiLU. Options: `d_state` (default: the head dim), `conv_size`.
    State: `{"S": [B, H, d_state, d], "conv_x", "conv_B", "conv_C"}`.
    """

    def __init__(
        self, d_model: int, n_heads: int, *, d_state: int | None = None, conv_size: int = 4, backend: str = "auto"
    ):
        super().__init__(d_model, n_heads, backend=backend)
        self.d_state = d_state or self.head_dim
        self.xbc = ConvProjections(d_model, {"x": d_model, "B": self.d_state, "C": self.d_state}, conv_size=conv_size)
        self.z_proj = nn.Linear(d_model, d_model, bias=False)
        self.decay = MambaDecay(d_model, n_heads)
        self.D = nn.Parameter(torch.ones(n_heads))
        self.norm = RMSNorm(d_model)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def init_state(self, batch_size: int) -> State:
        return {
            "S": self.zeros(batch_size, self.n_heads, self.d_state, self.head_dim),
            **self.xbc.init_state(batch_size, device=self.out.weight.device),
        }

    def mix(self, x, state, cu_seqlens, backend):
        state = state or {}
        h, new = self.xbc(x, state, cu_seqlens)
        B_, T, H = x.shape[0], x.shape[1], self.n_heads
        xs = split_heads(h["x"], H)  # [B, T, H, d]
        delta = self.decay.delta(x)  # [B, T, H]
        g = -self.decay.A_log.exp() * delta
        q = h["C"][:, :, None].expand(B_, T, H, self.d_state)  # [B, T, H, N]
        k = (h["B"][:, :, None] * delta[..., None]).to(h["B"].dtype)  # Δ B in float32, then B's dtype: [B, T, H, N]
        q, k, xs = promote(q, k, xs)
        y, new["S"] = gated_linear_attention(
            q,
            k,
            xs,
            g,
            scale=1.0,
            initial_state=state.get("S"),
            output_final_state=True,
            cu_seqlens=cu_seqlens,
            backend=self.op_backend(backend, x, fused=True),
        )
        y = y + self.D.to(y.dtype)[:, None] * xs
        return self.out(self.norm(merge_heads(y) * F.silu(self.z_proj(x)))), new
