"""HuggingFace `transformers` integration of the decoder LM (optional: `pip install linattn[hf]`).

`LinAttnForCausalLM` wraps `DecoderLM` as a `PreTrainedModel` with HuggingFace's `GenerationMixin`:
`save_pretrained` / `from_pretrained` (safetensors, tied embeddings), `AutoConfig` / `AutoModelForCausalLM`
registration under `model_type="linattn"`, the causal-LM loss (`labels` shifted inside, `-100` and padding ignored),
padded batches (`attention_mask`, left or right), `output_hidden_states`, `gradient_checkpointing_enable()`, HF's
`Trainer`, and `generate` with all of HuggingFace's decoding (greedy, sampling with `top_k` / `top_p` /
`temperature` / `repetition_penalty`, beam search, stopping criteria, streamers, the `text-generation` pipeline).
Generation prefills the prompt with the layers' chunked (or Triton) path, then decodes one token at a time from
the fixed-size recurrent state, kept in a `LinAttnCache` (softmax attention: its KV cache).

Example:
    >>> model = LinAttnForCausalLM(LinAttnConfig(mixer="vla"))
    >>> input_ids = torch.randint(0, 128, (2, 16))
    >>> model.save_pretrained("ckpt"); model = AutoModelForCausalLM.from_pretrained("ckpt")
    >>> out = model(input_ids, labels=input_ids); out.loss.backward()
    >>> tokens = model.generate(input_ids, max_new_tokens=20, do_sample=True, top_p=0.9)
    >>> mask = torch.ones_like(input_ids); mask[0, :5] = 0  # the first prompt left-padded
    >>> tokens = model.generate(input_ids, attention_mask=mask, max_new_tokens=20, num_beams=3)
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch
import torch.nn.functional as F

from linattn.extras import require

require("transformers", "hf", "linattn.models.hf")  # before the imports below: say which extra brings it

from transformers import (  # noqa: E402
    AutoConfig,
    AutoModelForCausalLM,
    GenerationMixin,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import CausalLMOutputWithPast  # noqa: E402

from linattn.layers.base import DECODE  # noqa: E402
from linattn.models.cache import LinAttnCache  # noqa: E402
from linattn.models.config import ModelConfig  # noqa: E402
from linattn.models.lm import DecoderLM  # noqa: E402

_FIELDS = [f.name for f in dataclasses.fields(ModelConfig)]


class LinAttnConfig(PretrainedConfig):
    """The fields of `ModelConfig` (same names and defaults) as a HuggingFace config, plus HuggingFace's `use_cache`
    (default True: a forward outside training returns its `LinAttnCache`)."""

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
        self.use_cache = kwargs.pop("use_cache", True)
        if not isinstance(self.use_cache, bool):
            raise ValueError(f"use_cache: expected a bool, got {self.use_cache!r}")
        kwargs.setdefault("tie_word_embeddings", self.tie_embeddings)
        super().__init__(**kwargs)
        self.to_model_config()  # validate now, with ModelConfig's errors

    def to_model_config(self) -> ModelConfig:
        return ModelConfig(**{name: getattr(self, name) for name in _FIELDS})

    @classmethod
    def from_model_config(cls, config: ModelConfig) -> LinAttnConfig:
        return cls(**dataclasses.asdict(config))


class LinAttnForCausalLM(PreTrainedModel, GenerationMixin):
    """`DecoderLM` as a HuggingFace causal LM; see the module docstring."""

    config_class = LinAttnConfig
    base_model_prefix = "lm"
    supports_gradient_checkpointing = True  # DecoderLM checkpoints its blocks (`gradient_checkpointing`)
    _tied_weights_keys: ClassVar[dict[str, str]] = {"lm.head.weight": "lm.embed.weight"}

    def __init__(self, config: LinAttnConfig):
        super().__init__(config)
        self.lm = DecoderLM(config.to_model_config())
        self.post_init()  # HuggingFace's bookkeeping (tied weights); `_init_weights` leaves our init alone

    def _init_weights(self, module):  # DecoderLM initialises itself
        pass

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        """`generate` must not make a `DynamicCache`: `forward` makes the `LinAttnCache` (as Mamba's does)."""
        return False

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
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: LinAttnCache | None = None,
        use_cache: bool | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        inputs_embeds: torch.Tensor | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        num_items_in_batch: int | torch.Tensor | None = None,
        past_key_values: LinAttnCache | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast | tuple:
        """`input_ids: [B, T]` -> `CausalLMOutputWithPast` with `logits: [B, T, vocab]`.

        - `attention_mask: [B, T]` (1 = a real token, 0 = padding, left, right or inside a row): padded positions
          reach no state and no real token, positions count real tokens, and padded labels are ignored. With a
          `cache` it may also cover the cached positions (`[B, P + T]`, as `generate` keeps it).
        - `cache` (`past_key_values` is its older name): a `LinAttnCache` to continue from and update in place;
          `use_cache` (default `config.use_cache`, off in training) returns the cache, a new one if none was
          given. One token on a non-empty cache is a decoding step (`DECODE`: the fused recurrent kernel on CUDA).
        - `labels` (usually `input_ids`): the next-token loss, mean over the labels that are not `-100`, or their
          sum divided by `num_items_in_batch` when HuggingFace's Trainer passes it.
        - `output_hidden_states`: the embeddings, each block's output but the last, and the final normed states.
        - `logits_to_keep`: the logits of the last `n` positions only (`generate` asks for 1), or of the positions
          in a 1-D index tensor; 0 keeps all.
        `return_dict=False` (default: `config.return_dict`) returns the output's tuple (`loss`, `logits`, `cache`,
        `hidden_states`: the ones that are set). HuggingFace switches that ask for what this model does not compute
        (`inputs_embeds`, `output_attentions`, `position_ids`, …) are refused rather than ignored.

        Example:
            >>> out = model(input_ids[:, :-1], use_cache=True)
            >>> out = model(input_ids[:, -1:], cache=out.cache)  # one decoding step
        """
        _refuse(kwargs, "forward")
        if inputs_embeds is not None:
            raise ValueError("inputs_embeds: not supported by LinAttnForCausalLM (its positions follow the tokens); "
                             "pass input_ids")  # fmt: skip
        if input_ids is None:
            raise ValueError("input_ids: expected the token ids [B, T], got None")
        if past_key_values is not None:
            if cache is not None:
                raise ValueError("past_key_values: the older name of cache; pass one of them")
            cache = past_key_values
        if cache is not None and not isinstance(cache, LinAttnCache):
            raise TypeError(f"cache: expected a LinAttnCache (the recurrent state), got {type(cache).__name__}")
        if use_cache is None:
            use_cache = self.config.use_cache and not self.training
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        mask = _mask_of_new_tokens(attention_mask, input_ids, cache)
        state = None if cache is None else _state_of(cache, len(self.lm.blocks))
        T = input_ids.shape[-1]
        h, state, hidden = self.lm.features(
            input_ids,
            state,
            attention_mask=mask,
            backend=DECODE if state is not None and T == 1 else None,
            all_layers=bool(output_hidden_states),
            output_state=bool(use_cache) or cache is not None,
        )
        if use_cache and cache is None:
            cache = LinAttnCache()
        if cache is not None:
            for i, layer_state in enumerate(state["layers"]):
                cache.set_layer_state(i, layer_state)
            cache.positions = state["pos"]
            cache.advance(T)
        if isinstance(logits_to_keep, int):
            h = h[:, -logits_to_keep:] if logits_to_keep else h
        else:
            h = h[:, logits_to_keep]
        logits = self.lm.head(h)
        loss = None
        if labels is not None:
            if h.shape[1] != T:
                raise ValueError("labels: the loss needs every position's logits; leave logits_to_keep at 0")
            if mask is not None:
                labels = labels.masked_fill(mask == 0, -100)  # a padded position is no target
            flat_logits, flat_labels = logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten()
            if num_items_in_batch is None:
                loss = F.cross_entropy(flat_logits, flat_labels, ignore_index=-100)
            else:
                loss = F.cross_entropy(flat_logits, flat_labels, ignore_index=-100, reduction="sum")
                loss = loss / num_items_in_batch
        out = CausalLMOutputWithPast(loss=loss, logits=logits, cache=cache if use_cache else None, hidden_states=hidden)
        return out if (self.config.return_dict if return_dict is None else return_dict) else out.to_tuple()

    def prepare_inputs_for_generation(
        self,
        input_ids: torch.Tensor,
        cache: LinAttnCache | None = None,
        attention_mask: torch.Tensor | None = None,
        is_first_iteration: bool | None = False,
        **kwargs,
    ) -> dict:
        """HuggingFace's preparation (only the new token once there is a cache), without the attention mask after
        the prefill: every generated token is real, so each decoding step is a plain one-token step."""
        inputs = super().prepare_inputs_for_generation(
            input_ids, cache=cache, attention_mask=attention_mask, is_first_iteration=is_first_iteration, **kwargs
        )
        if cache is not None and not is_first_iteration:
            inputs.pop("attention_mask", None)
        return inputs


def _mask_of_new_tokens(
    attention_mask: torch.Tensor | None, input_ids: torch.Tensor, cache: LinAttnCache | None
) -> torch.Tensor | None:
    """The columns of `attention_mask` for the new tokens: all of them (`[B, T]`) or, when the mask also covers the
    cache's `P` positions (`[B, P + T]`), the last `T`."""
    if attention_mask is None or attention_mask.dim() != 2 or input_ids.dim() != 2:
        return attention_mask  # DecoderLM names what is wrong
    T, P = input_ids.shape[1], 0 if cache is None else cache.get_seq_length()
    if attention_mask.shape[1] == T:
        return attention_mask
    if P and attention_mask.shape[1] == P + T:
        return attention_mask[:, P:]
    expected = f"{T} (input_ids) or {P + T} (the cache's {P} and input_ids' {T})" if P else f"{T} (input_ids)"
    raise ValueError(f"attention_mask: expected {expected} columns, got {attention_mask.shape[1]}")


def _state_of(cache: LinAttnCache, n_layers: int) -> dict | None:
    """DecoderLM's state from the cache, or None for an empty cache (the model's initial state)."""
    if len(cache) == 0:
        return None
    if cache.positions is None or sorted(cache.states) != list(range(n_layers)):
        raise ValueError(
            f"cache: expected the states of layers 0..{n_layers - 1} and the positions this model stores, got "
            f"layers {sorted(cache.states)} and positions {'unset' if cache.positions is None else 'set'}"
        )
    return {"pos": cache.positions, "layers": [cache.get_layer_state(i) for i in range(n_layers)]}


# HuggingFace switches and the value that asks nothing of this model
_NEUTRAL = {"output_attentions": (None, False), "position_ids": (None,), "token_type_ids": (None,),
            "cache_position": (None,)}  # fmt: skip


def _refuse(kwargs: dict, where: str) -> None:
    asked = {k: v for k, v in kwargs.items() if k not in _NEUTRAL or not any(v is n for n in _NEUTRAL[k])}
    if asked:
        raise ValueError(f"{where}: not supported by LinAttnForCausalLM: {', '.join(sorted(asked))}")


AutoConfig.register(LinAttnConfig.model_type, LinAttnConfig, exist_ok=True)
AutoModelForCausalLM.register(LinAttnConfig, LinAttnForCausalLM, exist_ok=True)
