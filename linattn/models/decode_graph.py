"""A decoding step replayed from a CUDA graph, its recurrent state advanced in place.

A step of a recurrent model decodes from a state of fixed size, so its every kernel is launched on tensors of the
same shapes at every token: on a GPU the step's time is the host's launches (about a hundred operations a layer),
not the kernels'. A graph captures one step, the state's update included, and replays it with one launch a token.
Softmax attention's KV cache grows with every token, so its step cannot be replayed: `GraphedDecoder` refuses it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext

import torch
from torch import nn

WARMUP_STEPS = 2  # eager steps on a copy of the state before the capture: Triton compiles and autotunes


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


class GraphedDecoder:
    """`model.step(token, state)` (a `DecoderLM`) from a CUDA graph: `decoder(token: [B]) -> logits: [B, vocab]`, the
    state (`decoder.state`, a copy of the one given, e.g. a prefill's) advanced in place.

    The logits are the graph's own tensor, rewritten by the next call (clone them to keep them). `dtype` runs the
    step under that autocast (bfloat16, as a bf16 model decodes). The model's weights are read where they are at
    every call, so a model updated in place decodes with its new weights.

    Example:
        >>> logits, state = model(prompt)                      # prefill, on the GPU
        >>> decoder = GraphedDecoder(model, state, torch.bfloat16)
        >>> token = logits[:, -1].argmax(-1)
        >>> for _ in range(32):
        ...     token = decoder(token).argmax(-1)
    """

    def __init__(self, model: nn.Module, state: dict, dtype: torch.dtype | None = None):
        device = state["pos"].device
        if device.type != "cuda":
            raise ValueError(f"GraphedDecoder: needs a state on a CUDA device, got one on {device}")
        self.model, self.dtype = model, dtype
        self.state = clone_state(state)
        self.token = torch.zeros_like(state["pos"])  # [B]
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            scratch = clone_state(self.state)
            for _ in range(WARMUP_STEPS):
                _, after = self._step(scratch)
                check_fixed_size(scratch, after)
                scratch = after
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits, after = self._step(self.state)
            for old, new in zip(state_tensors(self.state), state_tensors(after)):
                old.copy_(new)

    @torch.no_grad()
    def _step(self, state: dict) -> tuple[torch.Tensor, dict]:
        autocast = torch.autocast("cuda", self.dtype, cache_enabled=False) if self.dtype is not None else nullcontext()
        with autocast:
            return self.model.step(self.token, state)

    def __call__(self, token: torch.Tensor) -> torch.Tensor:
        self.token.copy_(token)
        self.graph.replay()
        return self.logits
