"""Model configuration as code: a typed dataclass and a table of named presets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from linattn.layers import LAYERS
from linattn.layers.registry import check_options


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 128
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    mixer: str = "vla"  # a name of `linattn.layers.LAYERS`
    mixer_options: dict = field(default_factory=dict)  # keyword arguments of the mixer (e.g. {"ccq": True})
    block: str = "transformer"  # "transformer": pre-norm mixer + MLP; "zoology": gated short conv, then mixer
    mlp_hidden: int = 256  # hidden width of the GELU MLP (transformer blocks); 0 = no MLP
    positions: str = "learned"  # "learned" absolute position embeddings, or "none"
    max_seq_len: int = 1024  # positions available with "learned"
    tie_embeddings: bool = True  # output head shares the input embedding
    dropout: float = 0.0

    def __post_init__(self):
        if self.mixer not in LAYERS:
            raise ValueError(f"mixer: unknown mixer {self.mixer!r}; expected one of {sorted(LAYERS)}")
        if self.block not in ("transformer", "zoology"):
            raise ValueError(f"block: expected 'transformer' or 'zoology', got {self.block!r}")
        if self.positions not in ("learned", "none"):
            rope = " (RoPE is softmax's mixer option: mixer_options={'rope': True})" if self.positions == "rope" else ""
            raise ValueError(f"positions: expected 'learned' or 'none', got {self.positions!r}{rope}")
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "max_seq_len", "mlp_hidden"):
            value, least = getattr(self, name), 0 if name == "mlp_hidden" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                expected = "an int >= 0 (0: no MLP)" if least == 0 else "a positive int"
                raise ValueError(f"{name}: expected {expected}, got {value!r}")
        if not isinstance(self.mixer_options, dict):
            raise ValueError(f"mixer_options: expected a dict of the mixer's options, got {self.mixer_options!r}")
        check_options(self.mixer, self.mixer_options)  # here, not at the model's build: before a run's data is read
        if not isinstance(self.tie_embeddings, bool):
            raise ValueError(f"tie_embeddings: expected a bool, got {self.tie_embeddings!r}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise ValueError(f"dropout: expected a probability in [0, 1), got {self.dropout!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads: expected a divisor of d_model = {self.d_model}, got {self.n_heads}")

    def replace(self, **changes) -> ModelConfig:
        return dataclasses.replace(self, **changes)


PRESETS: dict[str, ModelConfig] = {
    # the VLA paper's TinyLM: 2 layers, d 128, 4 heads (d_h 32), GELU MLP 256, pre-LayerNorm, learned positions,
    # tied embeddings, vocab 128, no dropout
    "vla-tinylm": ModelConfig(
        vocab_size=128, d_model=128, n_layers=2, n_heads=4, mlp_hidden=256, positions="learned", max_seq_len=1024
    ),
    # Zoology's MQAR model: a gated short conv, then the mixer, in each of 2 layers; no MLP, no positions
    "zoology": ModelConfig(
        vocab_size=8192,
        d_model=128,
        n_layers=2,
        n_heads=2,
        block="zoology",
        mlp_hidden=0,
        positions="none",
        max_seq_len=2048,
    ),
    # the KLA paper's MQAR model: 2 layers, 4 heads, d 256, MLP 1024 (no positions: the mixers' short convs
    # carry order, and evaluation runs up to 8x the training length)
    "kla-mqar": ModelConfig(
        vocab_size=8192, d_model=256, n_layers=2, n_heads=4, mlp_hidden=1024, positions="none", max_seq_len=8192
    ),
    # tiny, for CPU tests
    "debug": ModelConfig(vocab_size=32, d_model=32, n_layers=2, n_heads=2, mlp_hidden=64, max_seq_len=256),
}


def preset(name: str, **changes) -> ModelConfig:
    """A named preset, optionally with fields changed: `preset("vla-tinylm", mixer="deltanet")`."""
    if name not in PRESETS:
        raise ValueError(f"preset: unknown preset {name!r}; expected one of {sorted(PRESETS)}")
    return PRESETS[name].replace(**changes)
