"""Triton kernels of the two-key gated delta rule: the chunked forward (stage files, see README.md) and the
fused recurrent decode step."""

from linattn.ops.delta_rule.triton.forward import ForwardSaved, delta_rule_fwd

__all__ = ["ForwardSaved", "delta_rule_fwd"]
