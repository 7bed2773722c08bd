"""A batch of a synthetic task: token ids, next-token targets, and each example's slice labels."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

IGNORE = -100  # target value of positions that carry no loss (torch's cross-entropy default)


@dataclass
class Batch:
    """`inputs, targets: [B, T]` int64; `targets[b, t]` is what the model must predict at position `t`
    (`IGNORE` where nothing is asked). `slices` maps a slice name (e.g. `"n_pairs"`, `"seq_len"`) to a `[B]`
    tensor, so accuracy can be reported per slice of a mixed batch. Every task's `seq_len` slice is its row's own
    length: a mixture's shorter rows are right-padded past it (`by_length` takes the padding off)."""

    inputs: torch.Tensor
    targets: torch.Tensor
    slices: dict[str, torch.Tensor] = field(default_factory=dict)

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.inputs.to(device), self.targets.to(device), {k: v.to(device) for k, v in self.slices.items()})

    @property
    def supervised(self) -> torch.Tensor:
        """`[B, T]` bool: positions that carry a target."""
        return self.targets != IGNORE

    def by_length(self) -> list[Batch]:
        """The rows grouped by their length (the `seq_len` slice), each group cut to it, shortest first: the same
        examples without the padding of a mixture such as Zoology's (47% of its tokens). A batch of one length, or
        without the slice, is its own one group. Reads the lengths on the host (one device sync).

        Example: a `[128, 256]` batch of Zoology's training mix gives about `[72, 64]`, `[14, 128]` and `[42, 256]`.
        """
        lengths = self.slices.get("seq_len")  # [B]
        T = self.inputs.shape[1]
        if lengths is None:
            return [self]
        values = lengths.unique().tolist()  # ascending
        if values == [T]:
            return [self]
        if values[0] < 1 or values[-1] > T:
            raise ValueError(f"slices['seq_len']: expected row lengths in [1, {T}], got {values[0]} – {values[-1]}")
        past_end = torch.arange(T, device=lengths.device) >= lengths[:, None]  # [B, T]
        if bool((self.supervised & past_end).any()):
            raise ValueError("targets: a row has a target past its length (slices['seq_len']), which cutting drops")
        parts = []
        for length in values:
            rows = (lengths == length).nonzero().squeeze(1)  # [m]
            cut = {name: value[rows] for name, value in self.slices.items()}
            parts.append(Batch(self.inputs[rows, :length], self.targets[rows, :length], cut))
        return parts
