"""A decoding step replayed from a CUDA graph, its recurrent state advanced in place.

A step of a recurrent model decodes from a state of fixed size, so its every kernel is launched on tensors of the
same shapes at every token: on a GPU a small batch's step is the host's launches of many small kernels, not the
kernels' work. A graph captures one step, the state's update included, and replays it with one launch a token.
Softmax attention's KV cache grows with every token, so its step cannot be replayed: `GraphedDecoder` refuses it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext

import torch
from torch import nn

from linattn import cuda_graph


def state_tensors(state: object) -> Iterator[torch.Tensor]:
    """The tensors of a decoding state (nested dicts, lists and tuples; None entries skipped), in a fixed order."""
    if isinstance(state, torch.Tensor):
        yield state
    elif isinstance(state, dict):
        for key in sorted(state):
            yield from state_tensors(state[key])
    elif isinstance(state, (list, tuple)):
        for item in state:
            yield from state_tensors(item)
    elif state is not None:
        raise TypeError(f"state: expected tensors in dicts, lists and tuples, got a {type(state).__name__}")


def clone_state(state: object) -> object:
    """A copy of `state` with every tensor cloned (the same nesting)."""
    if isinstance(state, torch.Tensor):
        return state.clone()
    if isinstance(state, dict):
        return {key: clone_state(value) for key, value in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(clone_state(item) for item in state)
    return state


def check_fixed_size(before: object, after: object) -> None:
    """A step's state must keep its tensors' shapes and dtypes (a KV cache that grows cannot be replayed)."""
    old, new = list(state_tensors(before)), list(state_tensors(after))
    same = len(old) == len(new) and all(a.shape == b.shape and a.dtype == b.dtype for a, b in zip(old, new))
    if not same:
        shapes = [tuple(t.shape) for t in old], [tuple(t.shape) for t in new]
        raise ValueError(
            "GraphedDecoder: a step must keep the state's size to be replayed (softmax attention's KV cache grows); "
            f"got tensors of shapes {shapes[0]} before a step and {shapes[1]} after"
        )


def has_growing_state(model: nn.Module) -> bool:
    """Whether a block of `model` (a `DecoderLM`) keeps a state that grows with the context (a KV cache)."""
    return any(getattr(block.mixer, "growing_state", None) for block in model.blocks)


class GraphedDecoder:
    """`model.step(token, state)` (a `DecoderLM`) from a CUDA graph: `decoder(token: [B]) -> logits: [B, vocab]`, the
    state (`decoder.state`, a copy of the one given, e.g. a prefill's) advanced in place.

    The logits are the graph's own tensor, rewritten by the next call (clone them to keep them). `autocast_dtype`
    runs the step under that autocast (bfloat16, as a bf16 model decodes). The model's weights are read where they
    are at every call, so a model updated in place decodes with its new weights (not one whose parameters are
    replaced, e.g. moved by `.to()`). The state's update copies each new tensor of the step into the old one: a
    step must not return one entry's old tensor as another entry's new one (none of the library's layers does).

    Example:
        >>> logits, state = model(prompt)                      # prefill, on the GPU
        >>> decoder = GraphedDecoder(model, state, torch.bfloat16)
        >>> token = logits[:, -1].argmax(-1)
        >>> for _ in range(32):
        ...     token = decoder(token).argmax(-1)
    """

    def __init__(self, model: nn.Module, state: dict, autocast_dtype: torch.dtype | None = None):
        device = state["pos"].device
        if device.type != "cuda":
            raise ValueError(f"GraphedDecoder: needs a state on a CUDA device, got one on {device}")
        if has_growing_state(model):
            raise ValueError("GraphedDecoder: a step must keep the state's size to be replayed; this model's state "
                             "grows with the context (softmax attention's KV cache)")  # fmt: skip
        self.model, self.autocast_dtype = model, autocast_dtype
        self.state = clone_state(state)
        self.token = torch.zeros_like(state["pos"])  # [B]
        scratch = clone_state(self.state)

        def warm_up() -> None:  # on a copy, whose size each step must keep
            nonlocal scratch
            _, after = self._step(scratch)
            check_fixed_size(scratch, after)
            scratch = after

        def step() -> torch.Tensor:
            logits, after = self._step(self.state)
            for old, new in zip(state_tensors(self.state), state_tensors(after)):
                old.copy_(new)
            return logits

        self.graph, self.logits = cuda_graph.capture(warm_up, step, device, "decode with model.step")

    @torch.no_grad()
    def _step(self, state: dict) -> tuple[torch.Tensor, dict]:
        dtype = self.autocast_dtype
        autocast = torch.autocast("cuda", dtype, cache_enabled=False) if dtype is not None else nullcontext()
        with autocast:
            return self.model.step(self.token, state)

    def __call__(self, token: torch.Tensor) -> torch.Tensor:
        if token.shape != self.token.shape:
            raise ValueError(f"token: expected shape {list(self.token.shape)}, got {list(token.shape)}")
        self.token.copy_(token)
        self.graph.replay()
        return self.logits
