"""Padded batches through the packed-sequence path: `attention_mask: [B, T]` (1 / True = a real token, 0 = padding,
anywhere in a row) becomes one packed row with `cu_seqlens`, so that padding never reaches a state or a real token's
output (as fla does for its layers).

    info = unpad_info(mask)              # which tokens are real, and the packed row's cu_seqlens
    y, state = fn(unpad(x, info), select_rows(state, info.rows), info.cu_seqlens)
    y = pad(y, info)                     # back to [B, T, ...], zeros at the padded positions

`run_unpadded` does all of it for a layer's `(x, state, cu_seqlens) -> (y, state)` function, including rows that
hold no real token (their state is carried over unchanged). `check_padding` validates a mask and packs it once: the
LM hands its result to every layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Unpadded:
    """Where the real tokens of a padded `[B, T]` batch go in the packed row.

    `mask: [B, T]` bool, True at the real tokens; `indices: [n]` their flat positions `b·T + t` in row-major order;
    `cu_seqlens: [N + 1]` the packed row's sequence offsets, one sequence per row in `rows: [N]` (the rows with at
    least one real token).
    """

    mask: torch.Tensor
    indices: torch.Tensor
    cu_seqlens: torch.Tensor
    rows: torch.Tensor

    @property
    def batch_size(self) -> int:
        return self.mask.shape[0]

    @property
    def seq_len(self) -> int:
        return self.mask.shape[1]

    @property
    def all_rows(self) -> bool:
        """Every row has a real token: the packed states are the batch's, row for row."""
        return self.rows.numel() == self.batch_size


def check_mask(attention_mask: object, batch_size: int, seq_len: int) -> torch.Tensor | None:
    """Validate `attention_mask: [B, T]` (bool or 0/1 integers) and return it as bool, or None when it pads nothing
    (the fast path: the layer runs as without a mask).

    Example:
        >>> check_mask(torch.tensor([[0, 1, 1], [1, 1, 1]]), 2, 3)
        tensor([[False,  True,  True],
                [ True,  True,  True]])
    """
    if attention_mask is None:
        return None
    if not isinstance(attention_mask, torch.Tensor):
        raise TypeError(f"attention_mask: expected a torch.Tensor [B, T], got {type(attention_mask).__name__}")
    if attention_mask.shape != (batch_size, seq_len):
        raise ValueError(
            f"attention_mask: expected shape [B, T] = {[batch_size, seq_len]}, got {list(attention_mask.shape)}"
        )
    if attention_mask.is_floating_point() or attention_mask.is_complex():
        raise TypeError(f"attention_mask: expected a bool or integer tensor, got dtype {attention_mask.dtype}")
    mask = attention_mask.bool()
    if attention_mask.dtype != torch.bool and not torch.equal(mask.to(attention_mask.dtype), attention_mask):
        raise ValueError("attention_mask: expected 1 (a real token) or 0 (padding) entries only")
    return None if bool(mask.all()) else mask


def unpad_info(mask: torch.Tensor) -> Unpadded:
    """The packing of the real tokens of `mask: [B, T]` (bool).

    Example:
        >>> info = unpad_info(torch.tensor([[False, True, True], [True, True, True]]))
        >>> info.indices.tolist(), info.cu_seqlens.tolist()
        ([1, 2, 3, 4, 5], [0, 2, 5])
    """
    lengths = mask.sum(dim=1)
    rows = lengths.nonzero().flatten()
    cu = torch.zeros(rows.numel() + 1, dtype=torch.long, device=mask.device)
    cu[1:] = lengths[rows].cumsum(0)
    return Unpadded(mask, mask.flatten().nonzero().flatten(), cu, rows)


def check_padding(
    attention_mask: object, cu_seqlens: torch.Tensor | None, batch_size: int, seq_len: int
) -> Unpadded | None:
    """The packing (`unpad_info`) of a valid `attention_mask` (`check_mask`), which cannot come with `cu_seqlens`, or
    None when it pads nothing. An `Unpadded` is taken as checked and returned: the LM checks its mask once and passes
    this to every layer, which then neither checks it again (`check_mask` waits for the device) nor packs it again."""
    if isinstance(attention_mask, Unpadded):
        return attention_mask
    mask = check_mask(attention_mask, batch_size, seq_len)
    if mask is None:
        return None
    if cu_seqlens is not None:
        raise ValueError("attention_mask: not with cu_seqlens (a packed row has no padding); pass one of them")
    return unpad_info(mask)


def unpad(x: torch.Tensor, info: Unpadded) -> torch.Tensor:
    """`x: [B, T, ...]` -> the packed row `[1, n, ...]` of its real tokens."""
    return x.flatten(0, 1).index_select(0, info.indices)[None]


def pad(y: torch.Tensor, info: Unpadded) -> torch.Tensor:
    """The packed row `y: [1, n, ...]` -> `[B, T, ...]`, zeros at the padded positions (differentiable)."""
    flat = y.new_zeros(info.batch_size * info.seq_len, *y.shape[2:])
    return flat.index_copy(0, info.indices, y[0]).unflatten(0, (info.batch_size, info.seq_len))


def map_state(fn: Callable[[torch.Tensor], torch.Tensor], state: Any) -> Any:
    """Apply `fn` to every tensor of a state (nested dicts, lists and tuples of tensors; other leaves kept)."""
    if isinstance(state, torch.Tensor):
        return fn(state)
    if isinstance(state, dict):
        return {k: map_state(fn, v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(map_state(fn, v) for v in state)
    return state


def select_rows(state: Any, rows: torch.Tensor) -> Any:
    """The states of `rows` (every tensor's first dim is the batch)."""
    return map_state(lambda t: t.index_select(0, rows.to(t.device)), state)


def scatter_rows(base: Any, rows: torch.Tensor, new: Any) -> Any:
    """`base` with the states of `rows` replaced by `new` (same structure; out of place, differentiable)."""
    if isinstance(base, torch.Tensor):
        return base.to(new.dtype).index_copy(0, rows.to(base.device), new)
    if isinstance(base, dict):
        if base.keys() != new.keys():
            raise ValueError(f"state: expected the keys {sorted(base)} of the layer's state, got {sorted(new)}")
        return {k: scatter_rows(base[k], rows, new[k]) for k in base}
    if isinstance(base, (list, tuple)):
        return type(base)(scatter_rows(b, rows, n) for b, n in zip(base, new, strict=True))
    return new


def run_unpadded(
    fn: Callable[[torch.Tensor, Any, torch.Tensor], tuple[Any, Any]],
    x: torch.Tensor,
    state: Any,
    info: Unpadded,
    init_state: Callable[[int], Any],
    *,
    output_state: bool = True,
) -> tuple[Any, Any]:
    """`fn(x_packed, state_per_sequence, cu_seqlens) -> (y, state)` on the real tokens of `x: [B, T, ...]` (`info`
    says which), with `y` (a tensor `[1, n, ...]` or a dict of them) padded back to `[B, T, ...]`. The state keeps its
    batch dim `B`: a row without a real token keeps `state`'s row (`init_state(B)`'s when `state` is None).
    `output_state=False`: no state is wanted, and the second result is None whatever `fn` returns.

    Example:
        >>> conv = ShortConv(8)
        >>> info = unpad_info(torch.tensor([[False, True, True], [True, True, False]]))
        >>> y, state = run_unpadded(conv, torch.randn(2, 3, 8), None, info, lambda b: conv.init_state(b))
    """
    if info.rows.numel() == 0:
        # no real token at all: zeros of the shapes that one token's run gives, and the state unchanged
        one = torch.zeros_like(info.mask)
        one[0, 0] = True
        y, _ = run_unpadded(fn, x, state, unpad_info(one), init_state, output_state=False)
        if not output_state:
            return map_state(torch.zeros_like, y), None
        return map_state(torch.zeros_like, y), init_state(x.shape[0]) if state is None else state
    packed_state = state if state is None or info.all_rows else select_rows(state, info.rows)
    y, new = fn(unpad(x, info), packed_state, info.cu_seqlens)
    y = map_state(lambda t: pad(t, info), y)
    if not output_state:
        return y, None
    if info.all_rows:
        return y, new
    return y, scatter_rows(init_state(x.shape[0]) if state is None else state, info.rows, new)
