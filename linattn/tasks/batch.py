"""A batch of a task: token ids, next-token targets, each example's slice labels, and for packed documents their
boundaries."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

IGNORE = -100  # target value of positions that carry no loss (torch's cross-entropy default)


@dataclass
class Batch:
    """`inputs, targets: [B, T]` int64; `targets[b, t]` is what the model must predict at position `t`
    (`IGNORE` where nothing is asked). `slices` maps a slice name (e.g. `"n_pairs"`, `"seq_len"`) to a `[B]`
    tensor, so accuracy can be reported per slice of a mixed batch. Every task's `seq_len` slice is its row's own
    length: a mixture's shorter rows are right-padded past it (`by_length` takes the padding off).

    `cu_seqlens: [N + 1]` (None unless packed) marks `N` sequences packed in one row (`B == 1`), for a model called
    as `model(inputs, cu_seqlens=cu_seqlens)` (`DecoderLM`): packed documents of a text corpus."""

    inputs: torch.Tensor
    targets: torch.Tensor
    slices: dict[str, torch.Tensor] = field(default_factory=dict)
    cu_seqlens: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> Batch:
        slices = {k: v.to(device) for k, v in self.slices.items()}
        cu_seqlens = None if self.cu_seqlens is None else self.cu_seqlens.to(device)
        return Batch(self.inputs.to(device), self.targets.to(device), slices, cu_seqlens)

    @property
    def supervised(self) -> torch.Tensor:
        """`[B, T]` bool: positions that carry a target."""
        return self.targets != IGNORE

    def by_length(self) -> list[Batch]:
        """The rows grouped by their length (the `seq_len` slice), each group cut to it, shortest first: the same
        examples without the padding of a mixture such as Zoology's (47% of its tokens). A batch of one length, or
        without the slice, is its own one group. Reads the lengths on the host (a few device syncs).

        Example: a `[128, 256]` batch of Zoology's training mix gives about `[72, 64]`, `[14, 128]` and `[42, 256]`.
        """
        lengths = self._lengths()  # [B]
        if lengths is None:
            return [self]
        values = lengths.unique().tolist()  # ascending
        if values == [self.inputs.shape[1]]:
            return [self]
        parts = []
        for length in values:
            rows = (lengths == length).nonzero().squeeze(1)  # [m]
            cut = {name: value[rows] for name, value in self.slices.items()}
            parts.append(Batch(self.inputs[rows, :length], self.targets[rows, :length], cut))
        return parts

    def row_groups(self, max_tokens: int) -> list[Batch]:
        """The rows in consecutive groups of at most `max_tokens` tokens (one row at least): a long-context test
        batch evaluated a few rows at a time. A packed batch (one row) is its own one group."""
        B, T = self.inputs.shape
        n = max(1, max_tokens // T)
        if n >= B:
            return [self]
        return [
            Batch(self.inputs[i : i + n], self.targets[i : i + n], {k: v[i : i + n] for k, v in self.slices.items()})
            for i in range(0, B, n)
        ]

    def packed(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rows back to back in one row without their padding, for a model that takes packed sequences
        (`DecoderLM(inputs, cu_seqlens=cu_seqlens)`): `(inputs, targets: [1, N], cu_seqlens: [B + 1])`, `N` the
        rows' lengths summed (the `seq_len` slice; without it every row is `T` long).

        Example: rows of 3 and 5 tokens padded to 5 give `[1, 8]` tensors and `cu_seqlens = [0, 3, 8]`.
        """
        if self.cu_seqlens is not None:
            raise ValueError("packed: this batch is packed already (it has cu_seqlens)")
        B, T = self.inputs.shape
        lengths = self._lengths()
        if lengths is None:
            lengths = torch.full((B,), T, dtype=torch.int64, device=self.inputs.device)
        real = torch.arange(T, device=lengths.device) < lengths[:, None]  # [B, T]
        cu_seqlens = torch.nn.functional.pad(lengths.cumsum(0), (1, 0))  # [B + 1]
        return self.inputs[real][None], self.targets[real][None], cu_seqlens

    def _lengths(self) -> torch.Tensor | None:
        """The rows' lengths (the `seq_len` slice, `[B]`), checked: in `[1, T]`, and no target past one."""
        lengths = self.slices.get("seq_len")
        if lengths is None:
            return None
        T = self.inputs.shape[1]
        low, high = int(lengths.min()), int(lengths.max())
        if low < 1 or high > T:
            raise ValueError(f"slices['seq_len']: expected row lengths in [1, {T}], got {low} – {high}")
        past_end = torch.arange(T, device=lengths.device) >= lengths[:, None]  # [B, T]
        if bool((self.supervised & past_end).any()):
            raise ValueError("targets: a row has a target past its length (slices['seq_len']), which cutting drops")
        return lengths
