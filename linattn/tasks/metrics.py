"""Accuracy of a model's argmax predictions on a `Batch`: overall, per slice, and exact match per example; and the
mean cross-entropy of its predictions."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from linattn.tasks.batch import Batch


class AccuracyMeter:
    """Accumulates counts over batches, so `compute()` averages several eval batches by counts, not by batch.

    Keys of `compute()`:
    - `"acc"`: correct / supervised positions, over everything seen;
    - `"acc/<slice>=<value>"`: the same restricted to examples whose slice has that value (e.g. `"acc/n_pairs=8"`);
    - `"exact"`: fraction of examples whose every supervised position is right;
    - `"acc_example_mean"`: mean over examples of each example's accuracy (Zoology's `valid/accuracy`; equals
      `"acc"` when every example has the same number of targets);
    - `"loss"`: the mean cross-entropy (nats) of the supervised positions (language modelling's measure: bits per
      byte are `loss / ln 2` for a byte-level model).
    Examples without any supervised position count in none of them. A value with nothing counted is `nan`.

    Example:
    ```
    meter = AccuracyMeter()
    for batch in batches:
        meter.update(model(batch.inputs)[0], batch)  # DecoderLM returns (logits, state)
    metrics = meter.compute()  # {"acc": …, "exact": …, "acc/seq_len=512": …, …}
    ```
    """

    def __init__(self) -> None:
        self.correct = 0
        self.supervised = 0
        self.examples = 0
        self.exact = 0
        self.example_acc_sum = 0.0
        self.loss_sum = 0.0
        self.by_slice: dict[tuple[str, int | float], list[int]] = {}  # (name, value) -> [correct, supervised]

    def update(self, logits: torch.Tensor, batch: Batch) -> AccuracyMeter:
        """Adds a batch: `logits: [B, T, V]`, or `[N, V]` at the batch's `N` supervised positions in row-major order
        (`DecoderLM(…, logits_at=batch.supervised)`), any float dtype, any device; `batch.targets: [B, T]`."""
        mask = batch.supervised  # [B, T]
        if logits.dim() == 3 and logits.shape[:2] == batch.targets.shape:
            logits = logits[mask]  # [N, V]
        elif logits.dim() != 2 or logits.shape[0] != int(mask.sum()):
            raise ValueError(
                f"logits: expected [B, T, V] with [B, T] = {list(batch.targets.shape)} or [N, V] with N = "
                f"{int(mask.sum())} supervised positions, got {list(logits.shape)}"
            )
        targets = batch.targets[mask]  # [N]
        hit = torch.zeros_like(mask).masked_scatter_(mask, logits.argmax(dim=-1) == targets)  # [B, T]
        hits, counts = hit.sum(dim=1), mask.sum(dim=1)  # [B], [B]
        seen = counts > 0  # [B]
        exact = (hits == counts) & seen
        example_acc = torch.where(seen, hits / counts.clamp_min(1), 0.0)  # [B]
        totals = torch.stack([hits.sum(), counts.sum(), seen.sum(), exact.sum()]).tolist()
        self.correct += totals[0]
        self.supervised += totals[1]
        self.examples += totals[2]
        self.exact += totals[3]
        self.example_acc_sum += example_acc.double().sum().item()
        self.loss_sum += F.cross_entropy(logits.double(), targets, reduction="sum").item()

        per_example = torch.stack([hits, counts], dim=1)  # [B, 2]
        for name, values in batch.slices.items():
            unique, index = values.unique(return_inverse=True)  # [U], [B]
            sums = torch.zeros(len(unique), 2, dtype=per_example.dtype, device=per_example.device)
            sums.index_add_(0, index.to(per_example.device), per_example)  # [U, 2]
            for value, (c, s) in zip(unique.tolist(), sums.tolist()):
                entry = self.by_slice.setdefault((name, value), [0, 0])
                entry[0] += c
                entry[1] += s
        return self

    def compute(self) -> dict[str, float]:
        """The metrics described in the class docstring, over every batch added so far."""
        out = {
            "acc": _ratio(self.correct, self.supervised),
            "exact": _ratio(self.exact, self.examples),
            "acc_example_mean": _ratio(self.example_acc_sum, self.examples),
            "loss": _ratio(self.loss_sum, self.supervised),
        }
        for (name, value), (c, s) in sorted(self.by_slice.items()):
            if s > 0:
                out[f"acc/{name}={_format(value)}"] = c / s
        return out


def accuracy(logits: torch.Tensor, batch: Batch) -> dict[str, float]:
    """Accuracy of `logits.argmax(-1)` (`logits: [B, T, V]`) on `batch`: `"acc"`, `"exact"`, `"acc_example_mean"`,
    `"acc/<slice>=<value>"` per slice value, and the mean `"loss"` (see `AccuracyMeter`).
    Example: `accuracy(model(b.inputs)[0], b)["acc"]` (a `DecoderLM` returns `(logits, state)`).
    """
    return AccuracyMeter().update(logits, batch).compute()


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else float("nan")


def _format(value: int | float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
