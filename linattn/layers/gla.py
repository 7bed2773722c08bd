"""Gated linear attention (Yang et al. 2024): per-key-channel, data-dependent decay."""

from __future__ import annotations

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
from linattn.layers.ccq import CurvatureQuery
from linattn.layers.short_conv import ConvProjections
from linattn.ops import gated_linear_attention


class GatedLinearAttention(Mixer):
    """`S_t = diag(exp(g_t)) S_{t-1} + k_t v_tᵀ`, `o_t = S_tᵀ q_t / √d`, with the low-rank gate
    `g = logsigmoid(W_2 W_1 x + b) / 16` (rank 16, as in GLA); output `RMSNorm(o) ⊙ SiLU(W_g x)` → `W_o`.

    Options: `gate_rank` (16), `gate_normalizer` (16), `short_conv` (False, as fla's GLA by default: with it
    `q, k, v = SiLU(conv(W x))`, a causal depthwise convolution of `conv_size` (4) taps, as in DeltaNet; without, plain
    projections), `ccq` (+ `ccq_options`; the covariance is not decayed, since GLA's decay differs per channel),
    `output_gate=False` (output `RMSNorm(o)` alone, fla's `use_output_gate=False`), `conv_bias` (False), `norm_eps`
    (the RMSNorm's, None: the dtype's machine epsilon); head sizes `head_dim`, `expand_v`, `num_v_heads` as in
    `GatedDeltaNet` (GVA: the decay `g` is per value head, `[B, T, HV, K]`).
    State: `{"S": [B, HV, K, V][, "conv_q", "conv_k", "conv_v"][, "ccq"]}`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        gate_rank: int = 16,
        gate_normalizer: float = 16.0,
        short_conv: bool = False,
        conv_size: int = 4,
        conv_bias: bool = False,
        ccq: bool = False,
        ccq_options: dict | None = None,
        output_gate: bool = True,
        norm_eps: float | None = None,
        head_dim: int | None = None,
        expand_v: float = 1.0,
        num_v_heads: int | None = None,
        backend: str = "auto",
    ):
        super().__init__(d_model, n_heads, head_dim=head_dim, backend=backend)
        H, K, HV, V = self.head_sizes(num_v_heads, expand_v)
        if short_conv:
            dims = {"q": H * K, "k": H * K, "v": HV * V}
            self.conv_qkv = ConvProjections(d_model, dims, conv_size=conv_size, conv_bias=conv_bias)
        else:
            self.conv_qkv = None
            self.q_proj = nn.Linear(d_model, H * K, bias=False)
            self.k_proj = nn.Linear(d_model, H * K, bias=False)
            self.v_proj = nn.Linear(d_model, HV * V, bias=False)
        self.gk = nn.Sequential(nn.Linear(d_model, gate_rank, bias=False), nn.Linear(gate_rank, HV * K, bias=True))
        self.gate_normalizer = gate_normalizer
        self.g_proj = nn.Linear(d_model, HV * V, bias=False) if output_gate else None
        self.o_norm = RMSNorm(V, eps=norm_eps)
        self.out = nn.Linear(HV * V, d_model, bias=False)
        self.ccq = CurvatureQuery(HV, K, **(ccq_options or {})) if ccq else None

    def init_state(self, batch_size: int) -> State:
        state = {"S": self.zeros(batch_size, self.num_v_heads, self.head_dim, self.head_v_dim)}
        if self.conv_qkv is not None:
            state.update(self.conv_qkv.init_state(batch_size, device=self.out.weight.device))
        if self.ccq is not None:
            state["ccq"] = self.ccq.init_state(batch_size, device=self.out.weight.device)
        return state

    def mix(self, x, state, cu_seqlens, backend, output_state):
        state = state or {}
        new: State = {}
        if self.conv_qkv is None:
            h = {"q": self.q_proj(x), "k": self.k_proj(x), "v": self.v_proj(x)}
        else:
            h, convs = self.conv_qkv(x, state, cu_seqlens)
            new.update(convs)
        HV, groups = self.num_v_heads, self.num_v_heads // self.n_heads
        q, k = (repeat_heads(split_heads(h[n], self.n_heads), groups) for n in "qk")  # [B, T, HV, K]
        q, k, v = promote(q, k, split_heads(h["v"], HV))
        g = split_heads(F.logsigmoid(self.gk(x).float()) / self.gate_normalizer, HV)  # [B, T, HV, K]
        if self.ccq is not None:
            ccq_backend = self.op_backend(backend, x, fused=False)
            q, new["ccq"] = self.ccq(
                q, k, None, state.get("ccq"), cu_seqlens, ccq_backend, self.precision, output_state
            )
        o, new["S"] = gated_linear_attention(
            q,
            k,
            v,
            g,
            initial_state=state.get("S"),
            output_final_state=output_state,
            cu_seqlens=cu_seqlens,
            backend=self.op_backend(backend, x, fused=True),
        )
        return self.out(merge_heads(gate_output(self.o_norm(o), self.g_proj, x, HV))), new
