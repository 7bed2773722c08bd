"""Linear attention and GLA for decoding (`backend="fused_recurrent"`): the delta rule's decode kernel without the
erase term (`delta_rule/triton/fused_recurrent.py`), one launch for a few tokens on a carried state."""

from __future__ import annotations

import torch

from linattn.ops.delta_rule.triton.fused_recurrent import fused_recurrent


def fused_recurrent_linear_attention(q, k, v, g, scale, initial_state, cu_seqlens) -> tuple[torch.Tensor, torch.Tensor]:
    """`S_t = γ_t S_{t-1} + k_t v_tᵀ`, `o_t = scale · S_tᵀ q_t` on validated inputs, forward only: `g` None, a
    scalar decay `[B, T, H]` or one per key channel `[B, T, H, K]` (`γ_t = exp(g_t)`). Returns `o` in v's dtype and
    the float32 final state `[N, H, K, V]`."""
    return fused_recurrent(q, k, v, g=g, erase=False, scale=scale, initial_state=initial_state,
                           output_final_state=True, cu_seqlens=cu_seqlens)  # fmt: skip
