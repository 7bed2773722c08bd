"""`build_layer(name, d_model, n_heads, **options)`: every mixer by name."""

from __future__ import annotations

import inspect

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
    check_options(name, options)
    cls, fixed = LAYERS[name]
    return cls(d_model, n_heads, **fixed, **options)


def check_options(name: str, options: dict) -> None:
    """`ValueError` unless every key of `options` is a keyword option of mixer `name` and every on / off option is a
    bool (a `"false"` read from a config file would otherwise switch it on)."""
    cls, fixed = LAYERS[name]
    params = {
        p.name: p.default
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in fixed
    }
    if options.get("ccq") and name not in CCQ_LAYERS:
        raise ValueError(f"ccq: not available for {name!r}; available for {list(CCQ_LAYERS)}")
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise ValueError(f"mixer_options: {unknown} not options of {name!r}; expected some of {sorted(params)}")
    for key, value in options.items():
        if isinstance(params[key], bool) and not isinstance(value, bool):
            raise ValueError(
                f"mixer_options: {key!r} of {name!r} expected a bool, got {type(value).__name__} {value!r}"
            )
