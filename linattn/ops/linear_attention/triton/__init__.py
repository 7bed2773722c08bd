"""Triton backends of `linear_attention` and `gated_linear_attention`: GLA with a per-channel decay on its own kernels
(`g: [B, T, H, K]`, `function.py`: forward and backward in chunks of 64 tokens, scores within a chunk in sub-chunks
of 16, see `../README.md`); linear attention and scalar-decay GLA on the delta rule's kernels without the erase term
(`scalar_decay.py`); and the decode step (`fused_recurrent.py`)."""

from linattn.ops.linear_attention.triton.function import gla_triton
from linattn.ops.linear_attention.triton.fused_recurrent import fused_recurrent_linear_attention
from linattn.ops.linear_attention.triton.scalar_decay import linear_attention_triton

__all__ = ["fused_recurrent_linear_attention", "gla_triton", "linear_attention_triton"]
