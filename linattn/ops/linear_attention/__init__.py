"""Linear attention and gated linear attention (scalar or per-channel decay)."""

from linattn.ops.linear_attention.api import gated_linear_attention, linear_attention

__all__ = ["gated_linear_attention", "linear_attention"]
