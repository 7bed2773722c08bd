"""Functional ops, `[B, T, H, K]` layout, `(o, final_state)` returns, `backend="auto" | "naive" | "chunk"`
(and `"triton"` for `delta_rule`, `linear_attention`, `gated_linear_attention`, `ccq_query`, `vla` and `vla_gate`;
`"fused_recurrent"`, one launch for a few tokens on a carried state, for all of these but `ccq_query`).

See each op folder's README.md for its math.
"""

from linattn.ops.ccq import ccq_query
from linattn.ops.delta_rule import delta_rule, kaczmarz_beta
from linattn.ops.linear_attention import gated_linear_attention, linear_attention
from linattn.ops.softmax import softmax_attention
from linattn.ops.vla import vla, vla_gate

__all__ = [
    "ccq_query",
    "delta_rule",
    "gated_linear_attention",
    "kaczmarz_beta",
    "linear_attention",
    "softmax_attention",
    "vla",
    "vla_gate",
]
