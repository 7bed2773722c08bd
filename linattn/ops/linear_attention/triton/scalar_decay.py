"""Linear attention and GLA with a scalar decay, `S_t = exp(g_t) S_{t-1} + k_t v_tᵀ`: the delta rule's chunked Triton
kernels (`delta_rule/triton/`) without their erase term."""

from __future__ import annotations

import torch

from linattn.ops.delta_rule.triton import DeltaRuleTriton, Options
from linattn.ops.utils.inputs import check_input_dtype


def linear_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor | None,
    scale: float,
    initial_state: torch.Tensor | None,
    output_final_state: bool,
    cu_seqlens: torch.Tensor | None,
    out_dtype: torch.dtype | None = None,
    fast: bool = False,
    derived_output: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`S_t = exp(g_t) S_{t-1} + k_t v_tᵀ`, `o_t = scale · S_tᵀ q_t` (linear attention with `g` None, scalar-decay
    GLA with `g: [B, T, H]`) on validated inputs: the delta-rule kernels without the erase term. Returns
    `(o, final_state)`, `o` in `out_dtype` (default v's), `final_state` float32 (None unless requested);
    differentiable in `q, k, v, g, initial_state`. Dtypes as `delta_rule_triton`; `fast`: the `precision="fast"`
    level (bfloat16 chunk states for bfloat16 inputs); `derived_output`: `o` is only an intermediate of an output the
    caller rounds to v's dtype, so the forward's products take the precision of v's dtype (`Options`).
    """
    check_input_dtype("linear_attention", "q, k, v", q.dtype)
    q, k, v, g, initial_state = (None if x is None else x.contiguous() for x in (q, k, v, g, initial_state))
    options = Options(
        scale=scale,
        output_final_state=output_final_state,
        cu_seqlens=cu_seqlens,
        erase=False,
        out_dtype=out_dtype,
        fast=fast,
        derived_output=derived_output,
    )
    return DeltaRuleTriton.apply(q, k, v, None, None, g, initial_state, options)
