"""Variational linear attention: the Sherman–Morrison write gate and the full op."""

from linattn.ops.vla.api import vla, vla_gate

__all__ = ["vla", "vla_gate"]
