"""Sequence-mixer layers: `forward(x, state, cu_seqlens) -> (y, state)`, `step`, `init_state`, `state_size`; and the
same mixers as flash-linear-attention users build them (`fla_style`: `GatedDeltaNet(hidden_size=…, num_heads=…)`)."""

from linattn.layers.base import Mixer
from linattn.layers.fla_style import GLA, KLA, VLA, DeltaNet, GatedDeltaNet, LinearAttention, Mamba2
from linattn.layers.registry import CCQ_LAYERS, LAYERS, build_layer

__all__ = [
    "CCQ_LAYERS",
    "GLA",
    "KLA",
    "LAYERS",
    "VLA",
    "DeltaNet",
    "GatedDeltaNet",
    "LinearAttention",
    "Mamba2",
    "Mixer",
    "build_layer",
]
