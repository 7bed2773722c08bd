"""The chunked Triton delta rule as an autograd function: `delta_rule_fwd` forward, `delta_rule_bwd` backward.

`delta_rule(..., backend="triton")` calls `delta_rule_triton`, and `linear_attention` / `gated_linear_attention`
with a scalar decay call `linear_attention_triton` (`linear_attention/triton/scalar_decay.py`: the same kernels
without the erase term); both handle packed sequences (`cu_seqlens`) in one launch per stage rather than one call
per sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from linattn.ops.delta_rule.triton.backward import delta_rule_bwd
from linattn.ops.delta_rule.triton.forward import ForwardSaved, delta_rule_fwd
from linattn.ops.utils.inputs import check_input_dtype


@dataclass(frozen=True)
class Options:
    """The non-tensor arguments of one call (and `cu_seqlens`, which gets no gradient)."""

    scale: float
    output_final_state: bool
    cu_seqlens: torch.Tensor | None  # integer [N + 1], or None
    erase: bool = True  # False: S_t = exp(g_t) S_{t-1} + k_t v_tᵀ (linear attention; w and beta None)
    out_dtype: torch.dtype | None = None  # dtype of o, default v's
    kaczmarz_eps: float | None = None  # a number: KLA's step β = beta / (‖k‖² + ε) (beta is η)
    derived_keys: bool = False  # k, w: float32 keys derived from bfloat16 tokens (backward.delta_rule_bwd)
    fast: bool = False  # the precision="fast" level: 16-bit intermediates and tensor-core products
    derived_output: bool = False  # o in out_dtype only for the caller's division: forward precision as for v's dtype


class DeltaRuleTriton(torch.autograd.Function):
    """`(q, k, v, w, beta, g, initial_state, options) -> (o, final_state)`; `w, beta, g, initial_state` may be None,
    and `final_state` is None unless `options.output_final_state`."""

    @staticmethod
    def forward(ctx, q, k, v, w, beta, g, initial_state, options: Options):
        o, final_state, saved = delta_rule_fwd(
            q, k, v, w, beta, g, options.scale, initial_state, options.output_final_state, options.cu_seqlens,
            erase=options.erase, out_dtype=options.out_dtype, kaczmarz_eps=options.kaczmarz_eps, fast=options.fast,
            derived_output=options.derived_output,
        )  # fmt: skip
        ctx.save_for_backward(q, k, v, w, beta, g, initial_state, saved.G, saved.T_inv, saved.inv_sq_norm)
        ctx.layout, ctx.scale, ctx.options = saved.layout, options.scale, options
        # an unused output's gradient arrives as None instead of a tensor of zeros
        ctx.set_materialize_grads(False)
        return o, final_state

    @staticmethod
    def backward(ctx, do, dht):
        q, k, v, w, beta, g, initial_state, G, T_inv, inv_sq_norm = ctx.saved_tensors
        do = torch.zeros_like(v) if do is None else do.contiguous()
        dht = None if dht is None else dht.contiguous()
        saved = ForwardSaved(G=G, T_inv=T_inv, layout=ctx.layout, inv_sq_norm=inv_sq_norm)
        grads = delta_rule_bwd(
            q, k, v, w, beta, g, ctx.scale, initial_state, saved, do, dht, ctx.options.derived_keys, ctx.options.fast
        )
        return (*grads, None)


def delta_rule_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor | None,
    beta: torch.Tensor | None,
    g: torch.Tensor | None,
    scale: float,
    initial_state: torch.Tensor | None,
    output_final_state: bool,
    cu_seqlens: torch.Tensor | None,
    kaczmarz_eps: float | None = None,
    derived_keys: bool = False,
    fast: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`delta_rule`'s triton backend on validated inputs (shapes as `delta_rule` documents): `(o, final_state)`,
    `o` in v's dtype, `final_state` float32 (None unless requested); differentiable in every tensor input.
    `kaczmarz_eps` a number: KLA's step `β = beta / (‖k‖² + kaczmarz_eps)`, formed inside the kernels.
    `derived_keys`: `k`, `w` are float32 keys derived from bfloat16 tokens whose gradients the caller rounds to
    bfloat16 (VLA), so the backward's precision follows `q`, `v` and `dO` (`precision.backward_precision`).
    `fast`: the `precision="fast"` level (`delta_rule`'s `precision`).

    The kernels compute in float32 and take float32, bfloat16 or float16 `q, k, v, w`, each its own (the public
    `delta_rule` asks one dtype; VLA's backend passes float32 `k̂`, `α̂` beside bfloat16 `q`, `v`); float64 is
    refused with a TypeError rather than silently computed in float32 (the `chunk` and `naive` backends keep
    float64).
    """
    for x in (q, k, v, w):
        if x is not None:
            check_input_dtype("delta_rule", "q, k, v, w", x.dtype)
    q, k, v, w, beta, g, initial_state = (
        None if x is None else x.contiguous() for x in (q, k, v, w, beta, g, initial_state)
    )
    options = Options(
        scale=scale,
        output_final_state=output_final_state,
        cu_seqlens=cu_seqlens,
        kaczmarz_eps=kaczmarz_eps,
        derived_keys=derived_keys,
        fast=fast,
    )
    return DeltaRuleTriton.apply(q, k, v, w, beta, g, initial_state, options)
