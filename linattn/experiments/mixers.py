"""The mixers compared in the experiments: a display name -> the layer name and its options."""

from __future__ import annotations

from dataclasses import dataclass, field

from linattn.models import ModelConfig, preset


@dataclass(frozen=True)
class MixerSpec:
    name: str  # as shown in tables and accepted by `--mixers`
    layer: str  # a name of `linattn.layers.LAYERS`
    options: dict = field(default_factory=dict)


MIXERS: dict[str, MixerSpec] = {
    spec.name: spec
    for spec in (
        MixerSpec("softmax", "softmax"),
        MixerSpec("softmax-conv", "softmax", {"short_conv": True}),
        MixerSpec("softmax-rope", "softmax", {"rope": True}),
        MixerSpec("linear", "linear"),
        MixerSpec("deltanet", "deltanet"),
        MixerSpec("gated_deltanet", "gated_deltanet"),
        MixerSpec("gated_deltanet-raw_keys", "gated_deltanet", {"raw_keys": True}),
        MixerSpec("gated_deltanet-no_gate", "gated_deltanet", {"output_gate": False}),
        MixerSpec("kla", "kla"),
        MixerSpec("kla-no_gate", "kla", {"output_gate": False}),
        MixerSpec("vla", "vla"),
        MixerSpec("ccq-gated_deltanet", "gated_deltanet", {"ccq": True}),
        MixerSpec("ccq-kla", "kla", {"ccq": True}),
        MixerSpec("gla", "gla"),
        MixerSpec("gla-no_gate", "gla", {"output_gate": False}),
        MixerSpec("ccq-gla", "gla", {"ccq": True}),
        MixerSpec("gla-conv", "gla", {"short_conv": True}),
        MixerSpec("ccq-gla-conv", "gla", {"short_conv": True, "ccq": True}),
        MixerSpec("mamba2", "mamba2"),
    )
}

# the VLA paper's comparison, plus KLA, GDN and CCQ on GDN
VLA_COMPARISON = ("softmax", "linear", "deltanet", "gated_deltanet", "kla", "vla", "ccq-gated_deltanet")
# the KLA paper's synthetic tasks: KLA against GDN and Mamba-2
KLA_COMPARISON = ("kla", "gated_deltanet", "mamba2")
# the CCQ paper's bases (GLA, GDN; and KLA), each without and with the covariance read; GLA also with a short
# convolution before q, k, v (fla's GLA has none by default), without which it fails the recall tasks at our scale
CCQ_COMPARISON = (
    "gla", "ccq-gla", "gla-conv", "ccq-gla-conv", "gated_deltanet", "ccq-gated_deltanet", "kla", "ccq-kla"
)  # fmt: skip


def model_with(mixer: str, preset_name: str, min_seq_len: int = 0) -> ModelConfig:
    """The model preset `preset_name` with `mixer`'s layer and options, its position table at least `min_seq_len`
    rows long (the diagnostics run untrained models past the preset's length)."""
    base = preset(preset_name)
    spec = MIXERS[mixer]
    return base.replace(mixer=spec.layer, mixer_options=spec.options, max_seq_len=max(base.max_seq_len, min_seq_len))


def parse_mixers(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """`"vla,deltanet"` -> `("vla", "deltanet")`, checked against `MIXERS`; None (the option not given): `default`."""
    if text is None:
        return default
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ValueError(f"--mixers: expected comma-separated names from {sorted(MIXERS)}, got {text!r}")
    unknown = [n for n in names if n not in MIXERS]
    if unknown:
        raise ValueError(f"--mixers: unknown mixer(s) {unknown}; expected names from {sorted(MIXERS)}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"--mixers: expected each mixer once, got {repeated} more than once")
    return names
