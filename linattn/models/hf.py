"""HuggingFace `transformers` integration of the decoder LM (optional: `pip install linattn[hf]`).

`LinAttnForCausalLM` wraps `DecoderLM` as a `PreTrainedModel`: `save_pretrained` / `from_pretrained`
(safetensors, tied embeddings), `AutoConfig` / `AutoModelForCausalLM` registration under `model_type="linattn"`,
the usual causal-LM loss (`labels` shifted inside, `-100` ignored), and `generate`, which decodes through the
fixed-size recurrent state (`DecoderLM.step`) rather than HuggingFace's KV-cache machinery.

Example:
    >>> model = LinAttnForCausalLM(LinAttnConfig(mixer="vla"))
    >>> model.save_pretrained("ckpt"); model = AutoModelForCausalLM.from_pretrained("ckpt")
    >>> out = model(input_ids, labels=input_ids); out.loss.backward()
    >>> tokens = model.generate(input_ids, max_new_tokens=20)
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from linattn.models.config import ModelConfig
from linattn.models.lm import DecoderLM

_FIELDS = [f.name for f in dataclasses.fields(ModelConfig)]


class LinAttnConfig(PretrainedConfig):
    """The fields of `ModelConfig` (same names and defaults) as a HuggingFace config."""

    model_type = "linattn"

    def __init__(self, **kwargs):
        defaults = ModelConfig()
        for name in _FIELDS:
            value = kwargs.pop(name, getattr(defaults, name))
            setattr(self, name, dict(value) if name == "mixer_options" else value)
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

    def get_output_embeddings(self):
        return self.lm.head

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None, **kwargs) -> CausalLMOutput:
        """`input_ids: [B, T]` -> logits `[B, T, vocab]`; with `labels` (usually `input_ids`), the next-token loss."""
        logits, _ = self.lm(input_ids)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=-100)
        return CausalLMOutput(loss=loss, logits=logits)

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int = 20,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Prefill `input_ids: [B, T]`, then decode `max_new_tokens` one at a time from the recurrent state
        (greedy when `temperature == 0`, else sampled). Returns `[B, T + max_new_tokens]`."""
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens: expected >= 0, got {max_new_tokens}")
        logits, state = self.lm(input_ids)
        tokens, last = [input_ids], logits[:, -1]
        for _ in range(max_new_tokens):
            if temperature > 0:
                probs = torch.softmax(last.float() / temperature, dim=-1)
                token = torch.multinomial(probs, 1, generator=generator)[:, 0]
            else:
                token = last.argmax(-1)
            tokens.append(token[:, None])
            last, state = self.lm.step(token, state)
        return torch.cat(tokens, dim=1)


AutoConfig.register(LinAttnConfig.model_type, LinAttnConfig, exist_ok=True)
AutoModelForCausalLM.register(LinAttnConfig, LinAttnForCausalLM, exist_ok=True)
