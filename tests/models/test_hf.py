"""The HuggingFace integration: config round trip, save/load through the Auto classes, loss, generation
(`tests/models/test_generation.py`: generation in depth)."""

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
    bad_fields = {"d_model": 32.0, "mlp_hidden": -1, "dropout": 2.0, "mixer_options": None, "tie_embeddings": "no"}
    for field, value in bad_fields.items():
        with pytest.raises(ValueError, match=f"^{field}: expected"):
            LinAttnConfig(**{field: value})
    # HuggingFace's name for tied embeddings is the same setting
    assert LinAttnConfig(tie_word_embeddings=False).tie_embeddings is False
    assert LinAttnConfig(tie_embeddings=False).tie_word_embeddings is False
    with pytest.raises(ValueError, match="^tie_word_embeddings: False disagrees"):
        LinAttnConfig(tie_embeddings=True, tie_word_embeddings=False)


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


def test_huggingface_arguments_are_honoured_or_refused(tmp_path):
    torch.manual_seed(0)
    model = LinAttnForCausalLM(LinAttnConfig.from_model_config(preset("debug", mixer="gated_deltanet"))).eval()
    ids = torch.randint(1, 32, (2, 6))
    ones = torch.ones_like(ids)
    assert torch.equal(model(ids, attention_mask=ones).logits, model(ids).logits)
    with pytest.raises(ValueError, match="^forward: not supported by LinAttnForCausalLM: output_attentions"):
        model(ids, output_attentions=True)
    with pytest.raises(ValueError, match="^attention_mask: expected 1 \\(a real token\\) or 0"):
        model(ids, attention_mask=ones * 2)
    loss, logits = model(ids, labels=ids, return_dict=False, use_cache=False)
    assert torch.equal(logits, model(ids).logits)
    loss_, _, cache = model(ids, labels=ids, return_dict=False)  # eval: the cache by default
    assert torch.equal(loss_, loss) and cache.get_seq_length() == 6
    summed = model(ids, labels=ids, num_items_in_batch=5).loss  # the Trainer's gradient-accumulation normaliser
    assert torch.allclose(summed, loss * ids.shape[0] * (ids.shape[1] - 1) / 5)
    assert not LinAttnConfig(use_cache=False).use_cache
    with pytest.raises(ValueError, match="^use_cache: expected a bool"):
        LinAttnConfig(use_cache="yes")

    untied = LinAttnForCausalLM(LinAttnConfig.from_model_config(preset("debug", tie_embeddings=False)))
    untied.save_pretrained(tmp_path / "untied")
    assert torch.equal(AutoModelForCausalLM.from_pretrained(tmp_path / "untied")(ids).logits, untied(ids).logits)
    model.resize_token_embeddings(40)
    assert model(torch.tensor([[39]])).logits.shape == (1, 1, 40) and model.lm.config.vocab_size == 40
    model.save_pretrained(tmp_path / "resized")
    assert torch.equal(AutoModelForCausalLM.from_pretrained(tmp_path / "resized")(ids).logits, model(ids).logits)
