"""Gated linear attention (Yang et al. 2024): per-key-channel, data-dependent decay."""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from linattn.layers.base import Mixer, RMSNorm, State, gate_output, merge_heads, promote, split_heads
from linattn.layers.ccq import CurvatureQuery
from linattn.layers.short_conv import ConvProjections
from linattn.ops import gated_linear_attention


class GatedLinearAttention(Mixer):
    """`S_t = diag(exp(g_t)) S_{t-1} + k_t v_tᵀ`, `o_t = S_tᵀ q_t / √d`, with the low-rank gate
    `g = logsigmoid(W_2 W_1 x + b) / 16` (rank 16, as in GLA); output `RMSNorm(o) ⊙ SiLU(W_g x)` → `W_o`.

    Options: `gate_rank` (16), `gate_normalizer` (16), `short_conv` (False, as fla's GLA by default: with it
    `q, k, v = SiLU(conv(W x))`, a causal depthwise convolution of `conv_size` (4) taps, as in DeltaNet; without, plain
    projections), `ccq` (+ `ccq_options`; the covariance is not decayed, since GLA's decay differs per channel),
    `output_gate=False` (output `RMSNorm(o)` alone, fla's `use_output_gate=False`).
    State: `{"S": [B, H, d, d][, "conv_q", "conv_k", "conv_v"][, "ccq"]}`.
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
        ccq: bool = False,
        ccq_options: dict | None = None,
        output_gate: bool = True,
        backend: str = "auto",
    ):
        super().__init__(d_model, n_heads, backend=backend)
        if short_conv:
            self.conv_qkv = ConvProjections(d_model, dict.fromkeys("qkv", d_model), conv_size=conv_size)
        else:
            self.conv_qkv = None
            self.q_proj = nn.Linear(d_model, d_model, bias=False)
            self.k_proj = nn.Linear(d_model, d_model, bias=False)
            self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.gk = nn.Sequential(nn.Linear(d_model, gate_rank, bias=False), nn.Linear(gate_rank, d_model, bias=True))
        self.gate_normalizer = gate_normalizer
        self.g_proj = nn.Linear(d_model, d_model, bias=False) if output_gate else None
        self.o_norm = RMSNorm(self.head_dim)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.ccq = CurvatureQuery(n_heads, self.head_dim, **(ccq_options or {})) if ccq else None

    def init_state(self, batch_size: int) -> State:
        state = {"S": self.zeros(batch_size, self.n_heads, self.head_dim, self.head_dim)}
        if self.conv_qkv is not None:
            state.update(self.conv_qkv.init_state(batch_size, device=self.out.weight.device))
        if self.ccq is not None:
            state["ccq"] = self.ccq.init_state(batch_size, device=self.out.weight.device)
        return state

    def mix(self, x, state, cu_seqlens, backend):
        state = state or {}
        new: State = {}
        if self.conv_qkv is None:
            h = {"q": self.q_proj(x), "k": self.k_proj(x), "v": self.v_proj(x)}
        else:
            h, convs = self.conv_qkv(x, state, cu_seqlens)
            new.update(convs)
        q, k, v = (split_heads(h[n], self.n_heads) for n in "qkv")
        q, k, v = promote(q, k, v)
        g = split_heads(F.logsigmoid(self.gk(x).float()) / self.gate_normalizer, self.n_heads)  # [B, T, H, d]
        if self.ccq is not None:
            q, new["ccq"] = self.ccq(q, k, None, state.get("ccq"), cu_seqlens, self.op_backend(backend, x, fused=False))
        o, new["S"] = gated_linear_attention(
            q,
            k,
            v,
            g,
            initial_state=state.get("S"),
            output_final_state=True,
            cu_seqlens=cu_seqlens,
            backend=self.op_backend(backend, x, fused=True),
        )
        return self.out(merge_heads(gate_output(self.o_norm(o), self.g_proj, x, self.n_heads))), new
