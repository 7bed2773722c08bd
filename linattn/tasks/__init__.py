"""Synthetic tasks: typed configs and pure generators (a local `torch.Generator`, never global RNG)."""

from linattn.tasks.batch import IGNORE, Batch

__all__ = ["IGNORE", "Batch"]
