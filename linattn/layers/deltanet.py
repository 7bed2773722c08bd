"""DeltaNet layer (Schlag et al.; Yang et al. 2024): the delta rule with unit keys and a learned step."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from linattn.layers.base import Mixer, RMSNorm, State, merge_heads, promote, split_heads
from linattn.layers.short_conv import ConvProjections
from linattn.ops import delta_rule


class DeltaNet(Mixer):
    """`S_t = (I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ`, `o_t = S_tᵀ q_t / √d`, with
    `q, k = L2norm(SiLU(conv(W x)))`, `v = SiLU(conv(W_v x))`, `β = σ(W_β x)`; per-head RMSNorm, then `W_o`.

    Options: `short_conv` (default True), `conv_size` (4).
    State: `{"S": [B, H, d, d], "conv_q", "conv_k", "conv_v"}`.
    """

    def __init__(
        self, d_model: int, n_heads: int, *, short_conv: bool = True, conv_size: int = 4, backend: str = "auto"
    ):
        super().__init__(d_model, n_heads, backend=backend)
        self.qkv = ConvProjections(d_model, dict.fromkeys("qkv", d_model), short_conv=short_conv, conv_size=conv_size)
        self.b_proj = nn.Linear(d_model, n_heads, bias=True)
        self.o_norm = RMSNorm(self.head_dim)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def init_state(self, batch_size: int) -> State:
        d = self.head_dim
        return {
            "S": self.zeros(batch_size, self.n_heads, d, d),
            **self.qkv.init_state(batch_size, device=self.out.weight.device),
        }

    def mix(self, x, state, cu_seqlens, backend):
        state = state or {}
        h, new = self.qkv(x, state, cu_seqlens)
        q, k, v = (split_heads(h[n], self.n_heads) for n in "qkv")  # [B, T, H, d]
        q, k, v = promote(F.normalize(q, dim=-1), F.normalize(k, dim=-1), v)
        beta = torch.sigmoid(self.b_proj(x))  # [B, T, H]
        o, new["S"] = delta_rule(
            q,
            k,
            v,
            beta=beta,
            initial_state=state.get("S"),
            output_final_state=True,
            cu_seqlens=cu_seqlens,
            backend=self.op_backend(backend, x, fused=True),
        )
        return self.out(merge_heads(self.o_norm(o))), new
