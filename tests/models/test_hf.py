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
    with pytest.raises(ValueError, match="^attention_mask: padding is not supported"):
        model(ids, attention_mask=torch.cat([torch.zeros(2, 2), torch.ones(2, 4)], 1).long())
    with pytest.raises(ValueError, match="^forward: not supported by LinAttnForCausalLM: output_hidden_states"):
        model(ids, output_hidden_states=True)
    loss, logits = model(ids, labels=ids, return_dict=False)
    assert torch.equal(logits, model(ids).logits)
    summed = model(ids, labels=ids, num_items_in_batch=5).loss  # the Trainer's gradient-accumulation normaliser
    assert torch.allclose(summed, loss * ids.shape[0] * (ids.shape[1] - 1) / 5)

    greedy = model.generate(ids, max_new_tokens=4)
    assert torch.equal(
        model.generate(ids, attention_mask=ones, max_length=10, do_sample=False, use_cache=False), greedy
    )
    eos = int(greedy[0, 6])  # the first sequence's first new token: it stops there, then pads
    stopped = model.generate(ids, max_new_tokens=4, eos_token_id=eos, pad_token_id=0)
    assert stopped[0, 6] == eos and (stopped[0, 7:] == 0).all()
    sampled = model.generate(ids, max_new_tokens=4, do_sample=True, generator=torch.Generator().manual_seed(1))
    assert sampled.shape == (2, 10)
    for call, message in (
        (lambda: model.generate(ids[:, :0]), "^input_ids: expected a prompt"),
        (lambda: model.generate(ids, max_new_tokens=2, max_length=9), "^max_length"),
        (lambda: model.generate(ids, do_sample=False, temperature=0.7), "^temperature"),
        (lambda: model.generate(ids, num_beams=4), "^generate: not supported by LinAttnForCausalLM: num_beams"),
    ):
        with pytest.raises(ValueError, match=message):
            call()

    untied = LinAttnForCausalLM(LinAttnConfig.from_model_config(preset("debug", tie_embeddings=False)))
    untied.save_pretrained(tmp_path / "untied")
    assert torch.equal(AutoModelForCausalLM.from_pretrained(tmp_path / "untied")(ids).logits, untied(ids).logits)
    model.resize_token_embeddings(40)
    assert model(torch.tensor([[39]])).logits.shape == (1, 1, 40) and model.lm.config.vocab_size == 40
    model.save_pretrained(tmp_path / "resized")
    assert torch.equal(AutoModelForCausalLM.from_pretrained(tmp_path / "resized")(ids).logits, model(ids).logits)
