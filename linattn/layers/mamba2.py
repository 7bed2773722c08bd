"""Scalar-decay linear attention in Mamba-2's form (SSD)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from linattn.layers.base import Mixer, RMSNorm, State, merge_heads, promote, repeat_heads, split_heads
from linattn.layers.gated_deltanet import MambaDecay
from linattn.layers.short_conv import ConvProjections
from linattn.ops import gated_linear_attention


class Mamba2(Mixer):
    """`h_t = exp(Δ_t A) h_{t-1} + (Δ_t B_t) x_tᵀ`, `y_t = h_tᵀ C_t + D ⊙ x_t` per head, then
    `RMSNorm(y ⊙ SiLU(z))` → `W_o` (Mamba-2 / SSD; `A < 0` per head, `B, C` shared by the heads of a group).

    It is `gated_linear_attention` with `q = C`, `k = Δ B`, `v = x` and the scalar log-decay `g = Δ A`.
    `x, B, C` go through a causal short conv + SiLU. Options: `d_state` (`N`, default: the head dim), `conv_size`,
    `conv_bias` (False), `norm_eps` (the RMSNorm's, None: the dtype's machine epsilon), `head_dim` (`P`, the dim of a
    head of `x`; default `d_model // n_heads`: the inner width `H · P` is then `d_model`), `n_groups` (`G`, default 1:
    one `B, C` for all heads; `G` groups of `H / G` heads each, as Mamba-2's `ngroups`).
    State: `{"S": [B, H, N, P], "conv_x", "conv_B", "conv_C"}`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        d_state: int | None = None,
        conv_size: int = 4,
        conv_bias: bool = False,
        norm_eps: float | None = None,
        head_dim: int | None = None,
        n_groups: int = 1,
        backend: str = "auto",
        precision: str = "exact",
    ):
        super().__init__(d_model, n_heads, head_dim=head_dim, backend=backend, precision=precision)
        if not isinstance(n_groups, int) or isinstance(n_groups, bool) or n_groups <= 0 or n_heads % n_groups:
            raise ValueError(f"n_groups: expected a positive divisor of the {n_heads} heads, got {n_groups!r}")
        self.d_state = d_state or self.head_dim
        self.n_groups = n_groups
        inner, GN = n_heads * self.head_dim, n_groups * self.d_state
        dims = {"x": inner, "B": GN, "C": GN}
        self.xbc = ConvProjections(d_model, dims, conv_size=conv_size, conv_bias=conv_bias)
        self.z_proj = nn.Linear(d_model, inner, bias=False)
        self.decay = MambaDecay(d_model, n_heads)
        self.D = nn.Parameter(torch.ones(n_heads))
        self.norm = RMSNorm(inner, eps=norm_eps)
        self.out = nn.Linear(inner, d_model, bias=False)

    def init_state(self, batch_size: int) -> State:
        return {
            "S": self.zeros(batch_size, self.n_heads, self.d_state, self.head_dim),
            **self.xbc.init_state(batch_size, device=self.out.weight.device),
        }

    def mix(self, x, state, cu_seqlens, backend, output_state):
        state = state or {}
        h, new = self.xbc(x, state, cu_seqlens)
        groups = self.n_heads // self.n_groups
        xs = split_heads(h["x"], self.n_heads)  # [B, T, H, P]
        delta = self.decay.delta(x)  # [B, T, H]
        g = -self.decay.A_log.exp() * delta
        q = repeat_heads(split_heads(h["C"], self.n_groups), groups)  # [B, T, H, N]
        B = repeat_heads(split_heads(h["B"], self.n_groups), groups)
        k = (B * delta[..., None]).to(B.dtype)  # Δ B in float32, then B's dtype: [B, T, H, N]
        q, k, xs = promote(q, k, xs)
        y, new["S"] = gated_linear_attention(
            q,
            k,
            xs,
            g,
            scale=1.0,
            initial_state=state.get("S"),
            output_final_state=output_state,
            cu_seqlens=cu_seqlens,
            backend=self.op_backend(backend, x, fused=True),
            precision=self.precision,
        )
        y = y + self.D.to(y.dtype)[:, None] * xs
        return self.out(self.norm(merge_heads(y) * F.silu(self.z_proj(x)))), new
