"""HuggingFace generation through the recurrent state (`GenerationMixin` + `LinAttnCache`), on every mixer: the
cache gives what full recomputation gives, padded batches give what each row gives alone; sampling, beam search,
stopping criteria, streamers, the text-generation pipeline, gradient checkpointing, hidden states, the Trainer."""

from __future__ import annotations

import warnings

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    PreTrainedTokenizerFast,
    TextStreamer,
    Trainer,
    TrainingArguments,
    pipeline,
)
from transformers.generation.streamers import BaseStreamer

from linattn.layers import LAYERS
from linattn.layers.base import DECODE
from linattn.models import DecoderLM, ModelConfig
from linattn.models.cache import LinAttnCache
from linattn.models.hf import LinAttnConfig, LinAttnForCausalLM
from tests.ops.cases import rel_err

VOCAB = 64
GREEDY = {"do_sample": False, "pad_token_id": 0}


def tiny(mixer: str = "gated_deltanet", **changes) -> LinAttnForCausalLM:
    """d_model 32, 2 layers, vocab 64, float64 (so that cached and recomputed logits pick the same tokens)."""
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=VOCAB, d_model=32, n_layers=2, n_heads=2, mixer=mixer, mlp_hidden=64, max_seq_len=64, **changes
    )
    return LinAttnForCausalLM(LinAttnConfig.from_model_config(config)).double().eval()


def prompts(*lengths: int, seed: int = 1) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, VOCAB, (n,), generator=g) for n in lengths]


def padded(rows: list[torch.Tensor], side: str = "left") -> tuple[torch.Tensor, torch.Tensor]:
    """`(ids, attention_mask)`, `[B, max length]`, padded with 0."""
    T = max(len(r) for r in rows)
    ids, mask = torch.zeros(len(rows), T, dtype=torch.long), torch.zeros(len(rows), T, dtype=torch.long)
    for b, r in enumerate(rows):
        at = slice(T - len(r), T) if side == "left" else slice(0, len(r))
        ids[b, at], mask[b, at] = r, 1
    return ids, mask


def hand_loop(lm: DecoderLM, ids: torch.Tensor, n: int) -> torch.Tensor:
    """Greedy decoding written out: a prefill, then `DecoderLM.step`."""
    logits, state = lm(ids)
    tokens = [ids]
    for _ in range(n):
        token = logits[:, -1].argmax(-1)
        tokens.append(token[:, None])
        logits, state = lm(token[:, None], state)
    return torch.cat(tokens, dim=1)


# a forgetting VLA carries each row's tokens seen (its refresh's phase) in the cache
@pytest.mark.parametrize(
    ("mixer", "options"), [(m, {}) for m in sorted(LAYERS)] + [("vla", {"rho": 0.9})], ids=[*sorted(LAYERS), "vla-rho"]
)
def test_cached_generation_equals_recomputation_and_padded_rows_equal_each_alone(mixer, options, one_thread):
    model = tiny(mixer, mixer_options=options)
    rows = prompts(5, 9, 2)
    ids = rows[1][None]
    greedy = model.generate(ids, max_new_tokens=6, **GREEDY)
    assert torch.equal(greedy, model.generate(ids, max_new_tokens=6, use_cache=False, **GREEDY))
    assert torch.equal(greedy, hand_loop(model.lm, ids, 6))

    batch, mask = padded(rows)
    out = model.generate(batch, attention_mask=mask, max_new_tokens=6, **GREEDY)
    assert torch.equal(out, model.generate(batch, attention_mask=mask, max_new_tokens=6, use_cache=False, **GREEDY))
    for b, row in enumerate(rows):
        alone = greedy if b == 1 else model.generate(row[None], max_new_tokens=6, **GREEDY)
        assert torch.equal(out[b, batch.shape[1] :], alone[0, len(row) :])

    beams = model.generate(batch, attention_mask=mask, max_new_tokens=4, num_beams=3, **GREEDY)
    no_cache = model.generate(batch, attention_mask=mask, max_new_tokens=4, num_beams=3, use_cache=False, **GREEDY)
    assert beams.shape == (3, batch.shape[1] + 4) and torch.equal(beams, no_cache)


@pytest.mark.parametrize("mixer", sorted(LAYERS))
def test_a_right_padded_training_batch_gives_each_rows_logits_and_loss(mixer, one_thread):
    model = tiny(mixer).train()
    rows = prompts(7, 3, 10, seed=2)
    batch, mask = padded(rows, side="right")
    out = model(batch, attention_mask=mask, labels=batch)  # padded labels are no targets
    assert out.cache is None  # no cache in training unless asked
    losses = []
    for b, row in enumerate(rows):
        alone = model(row[None], labels=row[None])
        assert rel_err(out.logits[b, : len(row)], alone.logits[0]) < 1e-10
        losses.append(alone.loss * (len(row) - 1))
    assert rel_err(out.loss, sum(losses) / sum(len(r) - 1 for r in rows)) < 1e-6  # the loss is taken in float32


def test_sampling_is_reproducible_and_uses_the_cache_as_recomputation_does(one_thread):
    model = tiny("vla")
    ids = torch.stack(prompts(6, 6, seed=3))
    options = {"do_sample": True, "top_k": 8, "top_p": 0.9, "temperature": 0.7, "repetition_penalty": 1.3}
    samples = []
    for use_cache in (True, True, False):
        torch.manual_seed(7)
        samples.append(model.generate(ids, max_new_tokens=8, use_cache=use_cache, pad_token_id=0, **options))
    assert samples[0].shape == (2, 14)
    assert torch.equal(samples[0], samples[1]) and torch.equal(samples[0], samples[2])


def test_generate_prefills_once_then_steps_one_token_at_a_time(monkeypatch, one_thread):
    model = tiny("vla")
    batch, mask = padded(prompts(3, 7, seed=11))
    calls = []
    features = model.lm.features

    def spy(input_ids, state=None, cu_seqlens=None, **options):
        calls.append((input_ids.shape[1], state is None, options["backend"], options["attention_mask"] is None))
        return features(input_ids, state, cu_seqlens, **options)

    monkeypatch.setattr(model.lm, "features", spy)
    model.generate(batch, attention_mask=mask, max_new_tokens=4, **GREEDY)
    # the padded prompt through the layers' own backend, then 3 steps without a mask on the decode backend
    assert calls == [(7, True, None, False)] + [(1, False, DECODE, True)] * 3


class Collect(BaseStreamer):
    def __init__(self):
        self.chunks = []

    def put(self, value):
        self.chunks.append(value.clone())

    def end(self):
        self.chunks.append(None)


def test_stopping_criteria_and_streamers(one_thread):
    model = tiny("mamba2")
    ids = torch.stack(prompts(4, 4, seed=4))
    greedy = model.generate(ids, max_new_tokens=5, **GREEDY)
    assert greedy.shape == (2, 9)
    eos = int(greedy[0, 4])  # the first row's first new token: it stops there and is padded after
    stopped = model.generate(ids, max_new_tokens=5, eos_token_id=eos, **GREEDY)
    assert stopped[0, 4] == eos and (stopped[0, 5:] == 0).all()
    for b in range(2):  # each row: greedy's tokens up to its first EOS, then padding
        new = greedy[b, 4 : stopped.shape[1]].clone()
        ends = (new == eos).nonzero()
        if len(ends):
            new[int(ends[0]) + 1 :] = 0
        assert torch.equal(stopped[b, 4:], new)
    streamer = Collect()
    model.generate(ids[:1], max_new_tokens=5, streamer=streamer, **GREEDY)
    assert streamer.chunks[-1] is None and torch.equal(streamer.chunks[0], ids[:1])
    assert torch.cat([c.flatten() for c in streamer.chunks[1:-1]]).tolist() == greedy[0, 4:].tolist()


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer of `VOCAB` words, made here (nothing is downloaded); prompts are left-padded."""
    words = ["[PAD]", "[UNK]", "[EOS]"] + [f"w{i}" for i in range(VOCAB - 3)]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece()  # joins words with spaces
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]", padding_side="left"
    )


def test_text_generation_pipeline_and_text_streamer(capsys, one_thread):
    model, tokenizer = tiny("softmax"), tiny_tokenizer()
    generator = pipeline("text-generation", model=model, tokenizer=tokenizer)
    texts = ["w1 w2 w3 w4 w5", "w9 w8"]
    out = generator(texts, max_new_tokens=4, do_sample=False, batch_size=2, return_tensors=True)  # padded together
    for text, result in zip(texts, out):
        alone = model.generate(**tokenizer(text, return_tensors="pt"), max_new_tokens=4, do_sample=False)[0].tolist()
        tokens = result[0]["generated_token_ids"]
        assert tokens == [tokenizer.pad_token_id] * (len(tokens) - len(alone)) + alone  # left-padded as given
    assert generator(texts[1], max_new_tokens=4, do_sample=False)[0]["generated_text"].startswith(texts[1])
    model.generate(**tokenizer(texts[0], return_tensors="pt"), max_new_tokens=4, streamer=TextStreamer(tokenizer))
    printed = capsys.readouterr().out.strip()
    assert printed == tokenizer.decode(out[0][0]["generated_token_ids"], skip_special_tokens=True)


def test_gradient_checkpointing_gives_the_same_gradients(one_thread):
    model = tiny("kla", block="zoology").train()
    batch, mask = padded(prompts(9, 5, seed=5), side="right")

    def grads():
        model.zero_grad()
        model(batch, attention_mask=mask, labels=batch).loss.backward()
        return [p.grad.clone() for p in model.parameters()]

    plain = grads()
    with warnings.catch_warnings():  # HuggingFace's older name of activation_checkpointing_enable, still common
        warnings.simplefilter("ignore", FutureWarning)
        model.gradient_checkpointing_enable()
    calls = []
    checkpoint = model.lm._gradient_checkpointing_func
    model.lm._gradient_checkpointing_func = lambda *args: calls.append(1) or checkpoint(*args)
    for a, b in zip(grads(), plain):
        assert rel_err(a, b) < 1e-12
    assert len(calls) == 2  # each block ran under the checkpoint


def test_hidden_states_and_logits_to_keep(one_thread):
    model = tiny("gla")
    ids = torch.stack(prompts(7, 7, seed=6))
    out = model(ids, output_hidden_states=True)
    assert len(out.hidden_states) == 3 and all(h.shape == (2, 7, 32) for h in out.hidden_states)
    assert torch.equal(model.lm.head(out.hidden_states[-1]), out.logits)
    assert rel_err(model(ids, logits_to_keep=2).logits, out.logits[:, -2:]) < 1e-12
    assert rel_err(model(ids, logits_to_keep=torch.tensor([0, 3])).logits, out.logits[:, [0, 3]]) < 1e-12
    assert model(ids).hidden_states is None


def test_save_load_then_generate_the_same(tmp_path, one_thread):
    model = tiny("deltanet")
    batch, mask = padded(prompts(3, 8, seed=7))
    want = model.generate(batch, attention_mask=mask, max_new_tokens=5, **GREEDY)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float64)
    assert isinstance(loaded, LinAttnForCausalLM) and loaded.can_generate()
    assert torch.equal(loaded.generate(batch, attention_mask=mask, max_new_tokens=5, **GREEDY), want)


def test_trainer_trains_on_padded_batches(tmp_path, one_thread):
    pytest.importorskip("accelerate", reason="HuggingFace's Trainer needs accelerate (the hf extra)")
    model = tiny("linear").float()
    ids, mask = padded(prompts(6, 9, 4, 8, seed=8), side="right")
    data = [{"input_ids": i, "attention_mask": m, "labels": i} for i, m in zip(ids, mask)]
    before = [p.detach().clone() for p in model.parameters()]
    args = TrainingArguments(
        output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, learning_rate=1e-2, report_to=[],
        save_strategy="no", use_cpu=True, logging_steps=1,
    )  # fmt: skip
    result = Trainer(model=model, args=args, train_dataset=data).train()
    assert torch.isfinite(torch.tensor(result.training_loss))
    assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), before))


def test_the_cache_api(one_thread):
    model = tiny("softmax", mixer_options={"short_conv": True})
    batch, mask = padded(prompts(3, 6, 4, seed=9))
    out = model(batch, attention_mask=mask, use_cache=True)
    cache = out.cache
    assert isinstance(cache, LinAttnCache) and len(cache) == 2 and cache.batch_size == 3
    assert cache.get_seq_length() == 6 and cache.positions.tolist() == [3, 6, 4]
    step = model(torch.tensor([[5], [6], [7]]), cache=cache)
    assert cache.get_seq_length() == 7 and step.cache is cache
    # beam search's reorder, and row selection: every tensor of every state follows the rows
    state = cache.get_layer_state(1)["mixer"]
    k = state["k"].clone()
    cache.reorder_cache(torch.tensor([2, 2, 0]))
    assert torch.equal(cache.get_layer_state(1)["mixer"]["k"], k[[2, 2, 0]])
    assert cache.positions.tolist() == [5, 5, 4]
    cache.batch_select_indices(torch.tensor([1, 2]))
    cache.batch_repeat_interleave(2)
    assert torch.equal(cache.get_layer_state(1)["mixer"]["k"], k[[2, 2, 0, 0]]) and cache.batch_size == 4
    with pytest.raises(NotImplementedError, match="cannot be rolled back"):
        cache.crop(1)
    cache.reset()
    assert len(cache) == 0 and cache.get_seq_length() == 0 and cache.batch_size == -1
    # a decoding step from the cache equals the full forward's last logits
    full = model(batch[:, :5]).logits
    prefix = model(batch[:, :4], use_cache=True)
    assert rel_err(model(batch[:, 4:5], past_key_values=prefix.cache).logits[:, -1], full[:, -1]) < 1e-10


def test_refused_arguments_name_themselves(one_thread):
    model = tiny()
    ids = torch.stack(prompts(4, 4, seed=10))
    cache = model(ids, use_cache=True).cache
    for call, error, message in (
        (lambda: model(ids, cache=object()), TypeError, "^cache: expected a LinAttnCache"),
        (lambda: model(ids, cache=cache, past_key_values=cache), ValueError, "^past_key_values: the older name"),
        (lambda: model(ids[:, :1], cache=cache, attention_mask=torch.ones(2, 3)), ValueError,
         r"^attention_mask: expected 1 \(input_ids\) or 5 \(the cache's 4"),
        (lambda: model(inputs_embeds=torch.randn(2, 4, 32)), ValueError, "^inputs_embeds: not supported"),
        (lambda: model(ids, output_attentions=True), ValueError, "^forward: not supported.*: output_attentions"),
        (lambda: model(ids, labels=ids, logits_to_keep=1), ValueError, "^labels: the loss needs every position"),
        (lambda: model.generate(ids[:1], cache=LinAttnCache(), max_new_tokens=2, prompt_lookup_num_tokens=2),
         ValueError, "Assisted decoding requires a cache that can be cropped"),  # a state cannot be rolled back
    ):  # fmt: skip
        with pytest.raises(error, match=message):
            call()
