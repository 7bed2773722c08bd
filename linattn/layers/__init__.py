"""Sequence-mixer layers: `forward(x, state, cu_seqlens) -> (y, state)`, `step`, `init_state`, `state_size`."""

from linattn.layers.base import Mixer
from linattn.layers.registry import CCQ_LAYERS, LAYERS, build_layer

__all__ = ["CCQ_LAYERS", "LAYERS", "Mixer", "build_layer"]
