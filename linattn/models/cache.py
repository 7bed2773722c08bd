"""The recurrent state as a HuggingFace `Cache` (optional: `pip install linattn[hf]`).

`LinAttnCache` holds each layer's state by `layer_idx`: a dict of tensors (or nested dicts / tuples of them) whose
first dim is the batch, fixed in size for the recurrent mixers, a growing KV cache for softmax attention. Layer code
reads and writes it with `get_layer_state` / `set_layer_state`; the model that owns the cache counts the tokens it
has read (`advance`), which is `get_seq_length()`. `GenerationMixin` reorders it for beam search (`reorder_cache`:
a batch-index select of every tensor of every state). A recurrent state cannot be rolled back, so the cache is not
croppable (assisted decoding is not available), and it is not compileable.

Example:
    >>> cache = LinAttnCache()
    >>> y, state = layer(x, cache.get_layer_state(0))   # None before the first call: the layer's initial state
    >>> cache.set_layer_state(0, state)
    >>> cache.advance(x.shape[1])
    >>> cache.reorder_cache(torch.tensor([1, 1, 0]))     # beam search kept rows 1, 1 and 0
"""

from __future__ import annotations

from typing import Any

import torch

from linattn.extras import require

require("transformers", "hf", "linattn.models.cache")  # before the import below: say which extra brings it

from transformers.cache_utils import Cache  # noqa: E402

from linattn.layers.padding import map_state  # noqa: E402


class LinAttnCache(Cache):
    """Per-layer recurrent states for `generate`, plus `positions: [B]` (the next position of each row, for a model
    with position embeddings; None if unused). See the module docstring."""

    is_compileable = False

    def __init__(self):
        super().__init__(layers=[])  # HuggingFace's per-layer KV objects are not used: states are kept whole
        self.states: dict[int, Any] = {}
        self.positions: torch.Tensor | None = None
        self.seen_tokens = 0

    def __repr__(self) -> str:
        return f"LinAttnCache(layers={sorted(self.states)}, seen_tokens={self.seen_tokens}, batch={self.batch_size})"

    def __len__(self) -> int:
        return len(self.states)

    def get_layer_state(self, layer_idx: int) -> Any:
        """The state layer `layer_idx` stored, or None before it stored one (the layer starts from its initial
        state)."""
        return self.states.get(layer_idx)

    def set_layer_state(self, layer_idx: int, state: Any) -> None:
        """Store layer `layer_idx`'s state (what its forward returned); kept as given, not copied."""
        if isinstance(layer_idx, bool) or not isinstance(layer_idx, int) or layer_idx < 0:
            raise ValueError(f"layer_idx: expected an int >= 0, got {layer_idx!r}")
        self.states[layer_idx] = state

    def advance(self, n_tokens: int) -> None:
        """Count `n_tokens` more positions read (padding included), once per forward of the model."""
        self.seen_tokens += n_tokens

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Positions read so far (padding included): the length of the inputs the state summarises."""
        return self.seen_tokens

    def get_max_length(self, layer_idx: int | None = None) -> int:
        return -1  # no maximum: a recurrent state has no length

    @property
    def batch_size(self) -> int:
        """The rows the states hold, or -1 before any is stored."""
        return next((t.shape[0] for s in self.states.values() for t in _tensors(s)), -1)

    @property
    def is_croppable(self) -> bool:
        return False

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError(
            "LinAttnCache.crop: a recurrent state cannot be rolled back to an earlier position "
            "(assisted and speculative decoding need that)"
        )

    def activate_past_recording(self, **kwargs) -> None:
        """Nothing to record: intermediate recurrent states are not kept (the cache is not croppable)."""

    def reset(self) -> None:
        """Forget every state, as a new cache."""
        self.states.clear()
        self.positions = None
        self.seen_tokens = 0

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Beam search: row `i` of every state becomes row `beam_idx[i]`."""
        self._map(lambda t: t.index_select(0, beam_idx.to(t.device)))

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Each row repeated `repeats` times in place (`[a, b] -> [a, a, b, b]`)."""
        self._map(lambda t: t.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows `indices`."""
        self._map(lambda t: t[indices.to(t.device)])

    def _map(self, fn) -> None:
        self.states = {i: map_state(fn, s) for i, s in self.states.items()}
        if self.positions is not None:
            self.positions = fn(self.positions)


def _tensors(state: Any):
    """The tensors of a state, depth first."""
    if isinstance(state, torch.Tensor):
        yield state
    elif isinstance(state, dict):
        for v in state.values():
            yield from _tensors(v)
    elif isinstance(state, (list, tuple)):
        for v in state:
            yield from _tensors(v)
