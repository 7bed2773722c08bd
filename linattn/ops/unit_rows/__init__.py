"""Rows scaled to unit length (`unit_rows`): PyTorch everywhere, one Triton kernel a pass on CUDA."""

from linattn.ops.unit_rows.api import unit_rows

__all__ = ["unit_rows"]
