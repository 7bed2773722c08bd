"""Triton kernels of the two-key gated delta rule: the chunked forward and backward (stage files, see README.md),
their autograd function (`delta_rule(..., backend="triton")`; without the erase term, `linear_attention` and
scalar-decay `gated_linear_attention` with `backend="triton"`), and the fused recurrent decode step."""

from linattn.ops.delta_rule.triton.backward import delta_rule_bwd
from linattn.ops.delta_rule.triton.forward import ForwardSaved, delta_rule_fwd
from linattn.ops.delta_rule.triton.function import DeltaRuleTriton, Options, delta_rule_triton

__all__ = [
    "DeltaRuleTriton",
    "ForwardSaved",
    "Options",
    "delta_rule_bwd",
    "delta_rule_fwd",
    "delta_rule_triton",
]
