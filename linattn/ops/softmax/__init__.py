"""Softmax attention (the baseline), via SDPA."""

from linattn.ops.softmax.api import softmax_attention

__all__ = ["softmax_attention"]
