"""HuggingFace `transformers` integration of the decoder LM (optional: `pip install linattn[hf]`).

`LinAttnForCausalLM` wraps `DecoderLM` as a `PreTrainedModel`: `save_pretrained` / `from_pretrained`
(safetensors, tied embeddings), `AutoConfig` / `AutoModelForCausalLM` registration under `model_type="linattn"`,
the usual causal-LM loss (`labels` shifted inside, `-100` ignored), and `generate`, which decodes through the
fixed-size recurrent state (`DecoderLM.step`) rather than HuggingFace's KV-cache machinery.

Example:
    >>> model = LinAttnForCausalLM(LinAttnConfig(mixer="vla"))
    >>> input_ids = torch.randint(0, 128, (2, 16))
    >>> model.save_pretrained("ckpt"); model = AutoModelForCausalLM.from_pretrained("ckpt")
    >>> out = model(input_ids, labels=input_ids); out.loss.backward()
    >>> tokens = model.generate(input_ids, max_new_tokens=20)
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch
import torch.nn.functional as F

from linattn.extras import require

require("transformers", "hf", "linattn.models.hf")  # before the imports below: say which extra brings it

from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig, PreTrainedModel  # noqa: E402
from transformers.modeling_outputs import CausalLMOutput  # noqa: E402

from linattn.models.config import ModelConfig  # noqa: E402
from linattn.models.lm import DecoderLM  # noqa: E402

_FIELDS = [f.name for f in dataclasses.fields(ModelConfig)]


class LinAttnConfig(PretrainedConfig):
    """The fields of `ModelConfig` (same names and defaults) as a HuggingFace config."""

    model_type = "linattn"

    def __init__(self, **kwargs):
        defaults = ModelConfig()
        # HuggingFace's name for tied embeddings and ours are one setting
        tie = kwargs.get("tie_word_embeddings", kwargs.get("tie_embeddings"))
        if "tie_embeddings" in kwargs and "tie_word_embeddings" in kwargs and tie != kwargs["tie_embeddings"]:
            raise ValueError(
                f"tie_word_embeddings: {tie} disagrees with tie_embeddings: {kwargs['tie_embeddings']} (one setting)"
            )
        if tie is not None:
            kwargs["tie_embeddings"] = kwargs["tie_word_embeddings"] = tie
        for name in _FIELDS:
            value = kwargs.pop(name, getattr(defaults, name))
            setattr(self, name, dict(value) if name == "mixer_options" and isinstance(value, dict) else value)
        kwargs.setdefault("tie_word_embeddings", self.tie_embeddings)
        super().__init__(**kwargs)
        self.to_model_config()  # validate now, with ModelConfig's errors

    def to_model_config(self) -> ModelConfig:
        return ModelConfig(**{name: getattr(self, name) for name in _FIELDS})

    @classmethod
    def from_model_config(cls, config: ModelConfig) -> LinAttnConfig:
        return cls(**dataclasses.asdict(config))


class LinAttnForCausalLM(PreTrainedModel):
    config_class = LinAttnConfig
    base_model_prefix = "lm"
    _tied_weights_keys: ClassVar[dict[str, str]] = {"lm.head.weight": "lm.embed.weight"}

    def __init__(self, config: LinAttnConfig):
        super().__init__(config)
        self.lm = DecoderLM(config.to_model_config())
        self.post_init()  # HuggingFace's bookkeeping (tied weights); `_init_weights` leaves our init alone

    def _init_weights(self, module):  # DecoderLM initialises itself
        pass

    def get_input_embeddings(self):
        return self.lm.embed

    def set_input_embeddings(self, embedding: torch.nn.Embedding):
        """Used by `resize_token_embeddings`: the new table sets the vocabulary size."""
        self.lm.embed = embedding
        self.lm.config = self.lm.config.replace(vocab_size=embedding.num_embeddings)

    def get_output_embeddings(self):
        return self.lm.head

    def set_output_embeddings(self, head: torch.nn.Linear):
        self.lm.head = head

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        return_dict: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> CausalLMOutput | tuple:
        """`input_ids: [B, T]` -> logits `[B, T, vocab]`; with `labels` (usually `input_ids`), the next-token loss
        (summed over the labels and divided by `num_items_in_batch` when the HuggingFace Trainer passes it).

        The recurrent LM has no padding: `attention_mask` may be given (tokenizers return it) but must be all ones.
        `return_dict=False` returns `(loss, logits)` (or `(logits,)`). HuggingFace's other switches
        (`use_cache`, `output_hidden_states`, `output_attentions`, `past_key_values`, …) are refused when they ask
        for something this model does not compute, so that none is ignored silently."""
        _check_mask(attention_mask, input_ids)
        _refuse(kwargs, "forward")
        logits, _ = self.lm(input_ids)
        loss = None
        if labels is not None:
            flat_logits, flat_labels = logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten()
            if num_items_in_batch is None:
                loss = F.cross_entropy(flat_logits, flat_labels, ignore_index=-100)
            else:
                loss = F.cross_entropy(flat_logits, flat_labels, ignore_index=-100, reduction="sum")
                loss = loss / num_items_in_batch
        if return_dict is False:
            return (loss, logits) if loss is not None else (logits,)
        return CausalLMOutput(loss=loss, logits=logits)

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        generator: torch.Generator | None = None,
        *,
        attention_mask: torch.Tensor | None = None,
        max_length: int | None = None,
        do_sample: bool | None = None,
        eos_token_id: int | None = None,
        pad_token_id: int | None = None,
        use_cache: bool = True,
        **kwargs,
    ) -> torch.Tensor:
        """Prefill `input_ids: [B, T]`, then decode one token at a time from the recurrent state. Returns
        `[B, T + new]`.

        Length: `max_new_tokens` (default 20), or `max_length` for prompt and new tokens together. Greedy unless
        `do_sample=True` or `temperature > 0` (sampling at `temperature`, default 1.0 when sampling; `generator`
        seeds it). With `eos_token_id`, a sequence that emits it is continued with `pad_token_id` (default: the
        EOS id) and decoding stops once every sequence has. `attention_mask` must be all ones (no padding);
        `use_cache=False` gives the same tokens (the state is this model's cache, always used)."""
        _check_mask(attention_mask, input_ids)
        _refuse(kwargs, "generate")
        if input_ids.dim() != 2 or input_ids.shape[1] == 0:
            raise ValueError(f"input_ids: expected a prompt [B, T] with T >= 1, got {list(input_ids.shape)}")
        if max_new_tokens is None:
            max_new_tokens = 20 if max_length is None else max_length - input_ids.shape[1]
        elif max_length is not None:
            raise ValueError("max_length: give max_new_tokens or max_length, not both")
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens: expected >= 0, got {max_new_tokens}")
        if do_sample and temperature is not None and temperature <= 0:
            raise ValueError(f"temperature: expected > 0 with do_sample=True, got {temperature}")
        if do_sample is False and temperature:
            raise ValueError(f"temperature: {temperature} asks for sampling, but do_sample=False")
        temperature = (1.0 if do_sample else 0.0) if temperature is None else temperature
        pad = eos_token_id if pad_token_id is None else pad_token_id
        logits, state = self.lm(input_ids)
        tokens, last = [input_ids], logits[:, -1]
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for _ in range(max_new_tokens):
            if temperature > 0:
                probs = torch.softmax(last.float() / temperature, dim=-1)
                token = torch.multinomial(probs, 1, generator=generator)[:, 0]
            else:
                token = last.argmax(-1)
            if eos_token_id is not None:
                token = token.masked_fill(done, pad)
                done |= token == eos_token_id
            tokens.append(token[:, None])
            if eos_token_id is not None and bool(done.all()):
                break
            last, state = self.lm.step(token, state)
        return torch.cat(tokens, dim=1)


def _check_mask(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> None:
    """The recurrent LM reads every token: a mask may only say so."""
    if attention_mask is None:
        return
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask: expected the shape of input_ids {list(input_ids.shape)}, got {list(attention_mask.shape)}"
        )
    if not bool(attention_mask.bool().all()):
        raise ValueError(
            "attention_mask: padding is not supported (the recurrent state would read the pad tokens); "
            "run prompts of different lengths one at a time, or packed with DecoderLM's cu_seqlens"
        )


# HuggingFace switches and the value that asks nothing of this model
_NEUTRAL = {"use_cache": (None, True, False), "output_hidden_states": (None, False), "output_attentions": (None, False),
            "past_key_values": (None,), "position_ids": (None,), "token_type_ids": (None,)}  # fmt: skip


def _refuse(kwargs: dict, where: str) -> None:
    asked = {k: v for k, v in kwargs.items() if k not in _NEUTRAL or not any(v is n for n in _NEUTRAL[k])}
    if asked:
        raise ValueError(f"{where}: not supported by LinAttnForCausalLM: {', '.join(sorted(asked))}")


AutoConfig.register(LinAttnConfig.model_type, LinAttnConfig, exist_ok=True)
AutoModelForCausalLM.register(LinAttnConfig, LinAttnForCausalLM, exist_ok=True)
