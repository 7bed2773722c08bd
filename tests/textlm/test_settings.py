"""`--set key=value`: typed values for every field kind, prefixed keys, and errors that name the setting."""

from __future__ import annotations

import pytest

from linattn.data.config import DataConfig
from linattn.models import ModelConfig
from linattn.textlm.presets import PRESETS, text_preset
from linattn.textlm.settings import apply_settings
from linattn.train import TrainConfig

CONFIGS = (ModelConfig(), TrainConfig(), DataConfig())


def test_values_are_parsed_by_the_fields_type():
    model, train, data = apply_settings(
        CONFIGS,
        [
            "lr=1e-3", "steps=7", "warmup_steps=0", "betas=0.9, 0.95", "early_stop_metric=none", "amp=off",
            "tie_embeddings=false", 'mixer_options={"ccq": true}', "model.d_model=64", "data.extensions=.md,.txt",
            "dropout=0.1", "seq_len=32",
        ],
    )  # fmt: skip
    assert (train.lr, train.steps, train.betas, train.early_stop_metric) == (1e-3, 7, (0.9, 0.95), None)
    assert train.amp == "off"
    assert (model.tie_embeddings, model.mixer_options, model.d_model, model.dropout) == (False, {"ccq": True}, 64, 0.1)
    assert (data.extensions, data.seq_len) == ((".md", ".txt"), 32)
    assert apply_settings(CONFIGS, []) == CONFIGS


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("lrr=1", r"^--set lrr=1: unknown key 'lrr'; did you mean lr\? \(the fields of ModelConfig \(block, "),
        ("train.d_model=3", r"^--set train.d_model=3: unknown key 'train.d_model'"),
        ("lr", r"^--set lr: expected key=value"),
        ("lr=fast", r"^--set lr=fast: expected a number, got 'fast'"),
        ("steps=1.5", r"^--set steps=1.5: expected an int, got '1.5'"),
        ("tie_embeddings=maybe", r"^--set tie_embeddings=maybe: expected true or false"),
        ("betas=0.9", r"^--set betas=0.9: expected 2 comma-separated values"),
        ("mixer_options=[1]", r"^--set mixer_options=\[1\]: expected a JSON object"),
        ("d_model=-4", r"^--set d_model=-4: d_model: expected a positive int, got -4"),
        ("mixer=lstm", r"^--set mixer=lstm: mixer: unknown mixer 'lstm'"),
        ("val_fraction=2", r"^--set val_fraction=2: DataConfig.val_fraction must be a fraction"),
    ],
)
def test_bad_settings_are_named(setting, message):
    with pytest.raises(ValueError, match=message):
        apply_settings(CONFIGS, [setting])


def test_presets_are_valid_and_named():
    assert list(PRESETS) == ["tiny", "small", "medium", "large"]
    for recipe in PRESETS.values():
        assert recipe.model.positions == "none" and recipe.train.warmup_steps <= recipe.train.steps
    with pytest.raises(ValueError, match=r"^preset: unknown preset 'huge'; expected one of \['tiny'"):
        text_preset("huge")
