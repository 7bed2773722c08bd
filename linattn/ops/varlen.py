"""Packed variable-length batches (`cu_seqlens`) for backends that take no `cu_seqlens` of their own.

A packed batch holds `N` sequences back to back in `B == 1`: sequence `i` is `x[:, cu[i]:cu[i+1]]`.
Its states are stacked along the first dim (`[N, ...]`). `per_sequence` runs a single-sequence function on
each piece and stitches the outputs and final states back together; `per_length` runs a batched function once per
group of similar lengths, on the sequences right-padded with zeros, for functions that zeros at the end leave
unchanged.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import torch

from linattn.ops.utils.grid import next_power_of_2

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


def per_length(
    fn: Callable[..., tuple[torch.Tensor, State]],
    cu_seqlens: torch.Tensor | None,
    inputs: Sequence[torch.Tensor | None],
    initial_state: State,
) -> tuple[torch.Tensor, State]:
    """`per_sequence`'s result in at most `log₂ T_max + 1` calls of a batched `fn(*inputs, initial_state)`: the
    sequences are grouped by their length rounded up to a power of two, and each group runs as one batch
    `[n, L, ...]`, its sequences right-padded with zeros (at most twice the tokens).

    Only for an `fn` whose outputs before the padding and whose final state zero inputs at the end leave as they
    are: a causal map whose state a zero input does not move, as the delta rule and linear attention (`k = v = 0`,
    `β = 0` and `g = 0` write and decay nothing) and VLA's gate without forgetting (`u = 0` adds nothing to the
    penalty). `inputs` are `[1, T, ...]` tensors (or None); `fn` returns `o: [n, L, ...]` and an `n`-batched state.
    """
    if cu_seqlens is None:
        return fn(*inputs, initial_state)
    bounds = cu_seqlens.tolist()
    lengths = [eos - bos for bos, eos in itertools.pairwise(bounds)]
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        groups.setdefault(next_power_of_2(max(n, 1)), []).append(i)
    device = next(x for x in inputs if x is not None).device
    output, states, order = None, [], []
    for L, members in sorted(groups.items()):
        rows = torch.tensor(members, device=device)
        t = torch.arange(L, device=device)
        n = torch.tensor([lengths[i] for i in members], device=device)[:, None]  # [m, 1]
        real = t < n  # [m, L]
        where = torch.where(real, cu_seqlens.to(device)[rows][:, None] + t, 0)  # [m, L] each place's token
        padded = [None if x is None else _zero_past(x[0][where], real) for x in inputs]  # [m, L, ...]
        o, s = fn(*padded, None if initial_state is None else _rows(initial_state, rows))
        if output is None:
            output = o.new_zeros(bounds[-1], *o.shape[2:])
        output = output.index_copy(0, where[real], o[real])
        states.append(s)
        order += members
    state = cat_states(states)  # the groups' states, in the groups' order of sequences
    back = torch.argsort(torch.tensor(order, device=device))  # [N] each sequence's place there
    return output[None], None if state is None else _rows(state, back)


def _rows(state: State, rows: torch.Tensor) -> State:
    """The states of sequences `rows`, batched."""
    if isinstance(state, tuple):
        return tuple(s[rows] for s in state)
    return state[rows]


def _zero_past(x: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """`x: [m, L, ...]` with zeros where `real: [m, L]` is False."""
    return torch.where(real.view(*real.shape, *[1] * (x.dim() - 2)), x, x.new_zeros(()))
