"""`build_layer(name, d_model, n_heads, **options)`: every mixer by name."""

from __future__ import annotations

from linattn.layers.base import Mixer
from linattn.layers.deltanet import DeltaNet
from linattn.layers.gated_deltanet import GatedDeltaNet
from linattn.layers.gla import GatedLinearAttention
from linattn.layers.linear import LinearAttention
from linattn.layers.mamba2 import Mamba2
from linattn.layers.softmax import SoftmaxAttention
from linattn.layers.vla import VariationalLinearAttention

LAYERS: dict[str, tuple[type[Mixer], dict]] = {
    "softmax": (SoftmaxAttention, {}),
    "linear": (LinearAttention, {}),
    "deltanet": (DeltaNet, {}),
    "gated_deltanet": (GatedDeltaNet, {}),
    "kla": (GatedDeltaNet, {"kaczmarz": True}),
    "gla": (GatedLinearAttention, {}),
    "mamba2": (Mamba2, {}),
    "vla": (VariationalLinearAttention, {}),
}

# mixers that take `ccq=True`
CCQ_LAYERS = ("linear", "gla", "gated_deltanet", "kla", "vla")


def build_layer(name: str, d_model: int, n_heads: int, **options) -> Mixer:
    """A sequence mixer by name (`LAYERS`); `options` are its keyword arguments (unknown ones are an error).

    Example:
        >>> import torch
        >>> layer = build_layer("gated_deltanet", 128, 4, ccq=True)
        >>> y, state = layer(torch.randn(2, 10, 128))
    """
    if name not in LAYERS:
        raise ValueError(f"name: unknown mixer {name!r}; expected one of {sorted(LAYERS)}")
    if options.get("ccq") and name not in CCQ_LAYERS:
        raise ValueError(f"ccq: not available for {name!r}; available for {list(CCQ_LAYERS)}")
    cls, fixed = LAYERS[name]
    return cls(d_model, n_heads, **fixed, **options)
