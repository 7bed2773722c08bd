"""DeltaNet layer (Schlag et al.; Yang et al. 2024): the delta rule with unit keys and a learned step."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from linattn.layers.base import (
    Mixer,
    RMSNorm,
    State,
    gate_output,
    merge_heads,
    promote,
    repeat_heads,
    split_heads,
)
from linattn.layers.short_conv import ConvProjections
from linattn.ops import delta_rule


class DeltaNet(Mixer):
    """`S_t = (I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ`, `o_t = S_tᵀ q_t / √d`, with
    `q, k = L2norm(SiLU(conv(W x)))`, `v = SiLU(conv(W_v x))`, `β = σ(W_β x)`; per-head RMSNorm, then `W_o`.

    Options: `short_conv` (default True), `conv_size` (4), `conv_bias` (False), `output_gate` (False: with it the
    output is `RMSNorm(o) ⊙ SiLU(W_g x)`, fla's `use_gate=True`), `norm_eps` (the RMSNorm's, None: the dtype's
    machine epsilon); head sizes `head_dim`, `expand_v`, `num_v_heads` as in `GatedDeltaNet` (GVA: `β` per value head).
    State: `{"S": [B, HV, K, V], "conv_q", "conv_k", "conv_v"}`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        short_conv: bool = True,
        conv_size: int = 4,
        conv_bias: bool = False,
        output_gate: bool = False,
        norm_eps: float | None = None,
        head_dim: int | None = None,
        expand_v: float = 1.0,
        num_v_heads: int | None = None,
        backend: str = "auto",
        precision: str = "exact",
    ):
        super().__init__(d_model, n_heads, head_dim=head_dim, backend=backend, precision=precision)
        H, K, HV, V = self.head_sizes(num_v_heads, expand_v)
        dims = {"q": H * K, "k": H * K, "v": HV * V}
        self.qkv = ConvProjections(d_model, dims, short_conv=short_conv, conv_size=conv_size, conv_bias=conv_bias)
        self.b_proj = nn.Linear(d_model, HV, bias=True)
        self.g_proj = nn.Linear(d_model, HV * V, bias=False) if output_gate else None
        self.o_norm = RMSNorm(V, eps=norm_eps)
        self.out = nn.Linear(HV * V, d_model, bias=False)

    def init_state(self, batch_size: int) -> State:
        return {
            "S": self.zeros(batch_size, self.num_v_heads, self.head_dim, self.head_v_dim),
            **self.qkv.init_state(batch_size, device=self.out.weight.device),
        }

    def mix(self, x, state, cu_seqlens, backend, output_state):
        state = state or {}
        h, new = self.qkv(x, state, cu_seqlens)
        q, k = (F.normalize(split_heads(h[n], self.n_heads), dim=-1) for n in "qk")  # [B, T, H, K]
        groups = self.num_v_heads // self.n_heads
        q, k, v = promote(repeat_heads(q, groups), repeat_heads(k, groups), split_heads(h["v"], self.num_v_heads))
        beta = torch.sigmoid(self.b_proj(x))  # [B, T, HV]
        o, new["S"] = delta_rule(
            q,
            k,
            v,
            beta=beta,
            initial_state=state.get("S"),
            output_final_state=output_state,
            cu_seqlens=cu_seqlens,
            backend=self.op_backend(backend, x, fused=True),
            precision=self.precision,
        )
        return self.out(merge_heads(gate_output(self.o_norm(o), self.g_proj, x, self.num_v_heads))), new
