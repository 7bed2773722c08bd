"""VLA's gate on the GPU: the chunked kernel (`gate.py`; its group inverses `cholesky.py`, its groups' penalties
`group_penalties.py`, its backward's `penalty_grads.py`) and the decode step (`fused_recurrent.py`)."""

from linattn.ops.vla.triton.fused_recurrent import fused_recurrent_vla_gate
from linattn.ops.vla.triton.gate import triton_vla_gate

__all__ = ["fused_recurrent_vla_gate", "triton_vla_gate"]
