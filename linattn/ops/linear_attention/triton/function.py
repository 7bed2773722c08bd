"""GLA with a per-channel decay on the Triton kernels, as an autograd function.

Forward: `G` (`cumsum.py`), the scores `A` (`scores.py`), the chunk-start states (`state.py`), the output
(`output.py`). Backward: the states again, their gradients walked in reverse (`state.py`), `dV` (`output.py`), `dq`,
`dk` and `dG` (`grads.py`), then `dg` from `dG` and the states (`cumsum.py`).
Saved for the backward beside the inputs: `G` (`K` floats a token and head) and `A` (64).

Every product takes three tf32 passes (float32's accuracy), or one where the engine's rule allows it
(`utils/precision.py`): in the forward when a bfloat16 `o` is its only output, in the backward when the
tokens and `dO` are bfloat16 and no final state's gradient comes in (training). With Hopper's arithmetic emulated
(`tests/ops/triton/hopper_arithmetic.py`, `verify`'s bfloat16 GLA case without states, T = 1000, K = 128) one pass
takes `o` to 1.11× the naive recurrence's error and `dg` to 1.10× (three: 1.00×); with a final state asked, one pass
in the forward errs 3.6e-4 on the state against naive's 1.1e-7, so it keeps three. On the GPU every case of
`python -m linattn.bench verify --ops gla` passes with the rule, and one pass saves about a fifth of a training
call's forward + backward at 64K (`python -m linattn.bench ops --only GLA`, against three passes everywhere).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from linattn.ops.linear_attention.triton.cumsum import gla_cumsum, gla_decay_grad
from linattn.ops.linear_attention.triton.grads import gla_qk_grads
from linattn.ops.linear_attention.triton.output import gla_output
from linattn.ops.linear_attention.triton.scores import gla_scores
from linattn.ops.linear_attention.triton.state import gla_state
from linattn.ops.utils.inputs import INPUT_DTYPES
from linattn.ops.utils.layout import chunk_layout
from linattn.ops.utils.precision import grad_precision, state_precision


@dataclass(frozen=True)
class Options:
    """The non-tensor arguments of one call (and `cu_seqlens`, which gets no gradient)."""

    scale: float
    output_final_state: bool
    cu_seqlens: torch.Tensor | None  # integer [N + 1], or None


class GLATriton(torch.autograd.Function):
    """`(q, k, v, g, initial_state, options) -> (o, final_state)`; `initial_state` may be None, and `final_state`
    is None unless `options.output_final_state`."""

    @staticmethod
    def forward(ctx, q, k, v, g, initial_state, options: Options):
        B, T = q.shape[:2]
        layout = chunk_layout(B, T, options.cu_seqlens, q.device)
        precision = state_precision(v.dtype, options.output_final_state)
        G = gla_cumsum(g, layout)
        A = gla_scores(q, k, G, layout, precision)
        h, ht = gla_state(k, v, G, initial_state, options.output_final_state, layout, precision)
        o = gla_output(q, v, G, A, h, options.scale, layout, precision, v.dtype)
        ctx.save_for_backward(q, k, v, G, A, initial_state, ht)
        ctx.layout, ctx.scale, ctx.g_dtype = layout, options.scale, g.dtype
        ctx.set_materialize_grads(False)
        return o, ht

    @staticmethod
    def backward(ctx, do, dht):
        q, k, v, G, A, initial_state, ht = ctx.saved_tensors
        layout, scale = ctx.layout, ctx.scale
        do = torch.zeros_like(v) if do is None else do.contiguous()
        dht = None if dht is None else dht.contiguous()
        precision = grad_precision((q, k, v, do), final_state_grad=dht is not None)
        h, _ = gla_state(k, v, G, initial_state, False, layout, precision)
        dh, dh0 = gla_state(q, do, G, dht, initial_state is not None, layout, precision, reverse=True, scale=scale)
        dv = gla_output(k, do, G, A, dh, scale, layout, precision, v.dtype, backward=True)
        dq, dk, dG = gla_qk_grads(q, k, v, G, h, dh, do, scale, layout, precision)
        dg = gla_decay_grad(dG, h, dh, None if dht is None else ht, layout, ctx.g_dtype)
        return dq, dk, dv, dg, None if dh0 is None else dh0.to(initial_state.dtype), None


def gla_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    output_final_state: bool,
    cu_seqlens: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`S_t = diag(exp(g_t)) S_{t-1} + k_t v_tᵀ`, `o_t = scale · S_tᵀ q_t` with `g: [B, T, H, K]` on validated
    inputs: `(o, final_state)`, `o` in v's dtype, `final_state` float32 (None unless requested); differentiable in
    `q, k, v, g, initial_state`. `q, k, v` float32, bfloat16 or float16 (float64: TypeError)."""
    if q.dtype not in INPUT_DTYPES:
        raise TypeError(
            f"gated_linear_attention(backend='triton'): q, k, v must be float32, bfloat16 or float16, got {q.dtype} "
            "(the kernels compute in float32; use backend='chunk' or 'naive' for float64)"
        )
    q, k, v, g, initial_state = (None if x is None else x.contiguous() for x in (q, k, v, g, initial_state))
    options = Options(scale=scale, output_final_state=output_final_state, cu_seqlens=cu_seqlens)
    return GLATriton.apply(q, k, v, g, initial_state, options)
