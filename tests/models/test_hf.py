"""The HuggingFace integration: config round trip, save/load through the Auto classes, loss, generation."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from linattn.models import DecoderLM, preset
from linattn.models.hf import LinAttnConfig, LinAttnForCausalLM


def test_config_round_trip_and_validation():
    mc = preset("debug", mixer="kla", mixer_options={"ccq": True})
    config = LinAttnConfig.from_model_config(mc)
    assert config.to_model_config() == mc
    with pytest.raises(ValueError, match="^mixer"):
        LinAttnConfig(mixer="transformer")


def test_save_load_loss_and_generate(tmp_path):
    torch.manual_seed(0)
    model = LinAttnForCausalLM(LinAttnConfig.from_model_config(preset("debug", mixer="vla")))
    ids = torch.randint(0, 32, (2, 12))
    out = model(ids, labels=ids)
    out.loss.backward()
    assert out.logits.shape == (2, 12, 32) and out.loss.item() > 0

    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert isinstance(loaded, LinAttnForCausalLM)
    assert loaded.lm.head.weight.data_ptr() == loaded.lm.embed.weight.data_ptr()  # still tied
    assert torch.equal(loaded(ids).logits, model(ids).logits)

    generated = loaded.generate(ids[:, :5], max_new_tokens=6)
    assert generated.shape == (2, 11) and torch.equal(generated[:, :5], ids[:, :5])
    # greedy decoding through the recurrent state picks what a full forward would
    lm: DecoderLM = loaded.lm
    logits, _ = lm(generated[:, :-1])
    assert torch.equal(logits[:, 4:].argmax(-1), generated[:, 5:])
