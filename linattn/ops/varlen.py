"""Packed variable-length batches (`cu_seqlens`) for backends that run one sequence at a time.

A packed batch holds `N` sequences back to back in `B == 1`: sequence `i` is `x[:, cu[i]:cu[i+1]]`.
Its states are stacked along the first dim (`[N, ...]`). `per_sequence` runs a single-sequence function on
each piece and stitches the outputs and final states back together.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import torch

# A recurrent state: one tensor, a tuple of tensors (e.g. VLA's `(S, A)`), or None.
State = torch.Tensor | tuple[torch.Tensor, ...] | None


def index_state(state: State, i: int) -> State:
    """The state of sequence `i` (kept 1-batched)."""
    if state is None:
        return None
    if isinstance(state, tuple):
        return tuple(s[i : i + 1] for s in state)
    return state[i : i + 1]


def cat_states(states: Sequence[State]) -> State:
    """Stack per-sequence states back into one `[N, ...]` state."""
    if states[0] is None:
        return None
    if isinstance(states[0], tuple):
        return tuple(torch.cat(parts, dim=0) for parts in zip(*states))
    return torch.cat(states, dim=0)


def per_sequence(
    fn: Callable[..., tuple[torch.Tensor, State]],
    cu_seqlens: torch.Tensor | None,
    inputs: Sequence[torch.Tensor | None],
    initial_state: State,
) -> tuple[torch.Tensor, State]:
    """`fn(*inputs, initial_state) -> (o, final_state)` on each packed sequence, outputs concatenated in time.

    `inputs` are `[1, T, ...]` tensors (or None); `fn` returns `o: [1, T_i, ...]` and a 1-batched state.
    Without `cu_seqlens` this is a plain call.
    """
    if cu_seqlens is None:
        return fn(*inputs, initial_state)
    bounds = cu_seqlens.tolist()
    outputs, states = [], []
    for i, (bos, eos) in enumerate(itertools.pairwise(bounds)):
        pieces = [None if x is None else x[:, bos:eos] for x in inputs]
        o, s = fn(*pieces, index_state(initial_state, i))
        outputs.append(o)
        states.append(s)
    return torch.cat(outputs, dim=1), cat_states(states)
