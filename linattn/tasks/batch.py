"""A batch of a synthetic task: token ids, next-token targets, and each example's slice labels."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

IGNORE = -100  # target value of positions that carry no loss (torch's cross-entropy default)


@dataclass
class Batch:
    """`inputs, targets: [B, T]` int64; `targets[b, t]` is what the model must predict at position `t`
    (`IGNORE` where nothing is asked). `slices` maps a slice name (e.g. `"n_pairs"`, `"seq_len"`) to a `[B]`
    tensor, so accuracy can be reported per slice of a mixed batch."""

    inputs: torch.Tensor
    targets: torch.Tensor
    slices: dict[str, torch.Tensor] = field(default_factory=dict)

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.inputs.to(device), self.targets.to(device), {k: v.to(device) for k, v in self.slices.items()})

    @property
    def supervised(self) -> torch.Tensor:
        """`[B, T]` bool: positions that carry a target."""
        return self.targets != IGNORE
