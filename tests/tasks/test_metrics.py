"""Accuracy from hand-made logits: overall, per slice, exact match, accumulation by counts."""

from __future__ import annotations

import math

import pytest
import torch

from linattn.tasks import IGNORE, AccuracyMeter, Batch, accuracy


def logits_for(predictions: torch.Tensor, vocab: int = 5) -> torch.Tensor:
    """`[B, T]` predicted tokens -> `[B, T, V]` logits whose argmax is that token."""
    return torch.nn.functional.one_hot(predictions, vocab).float()


def make_batch() -> tuple[torch.Tensor, Batch]:
    X = IGNORE
    targets = torch.tensor(
        [
            [X, 1, 2, X],  # 2 targets, both right
            [X, 3, 3, 3],  # 3 targets, 1 right
            [X, X, 4, X],  # 1 target, wrong
            [X, X, X, X],  # nothing supervised
        ]
    )
    predictions = torch.tensor(
        [
            [0, 1, 2, 0],
            [3, 3, 0, 0],
            [0, 0, 1, 4],
            [0, 0, 0, 0],
        ]
    )
    slices = {"n_pairs": torch.tensor([2, 8, 8, 8]), "seq_len": torch.tensor([4, 4, 4, 4])}
    return logits_for(predictions), Batch(torch.zeros_like(targets), targets, slices)


def test_accuracy_by_hand():
    logits, batch = make_batch()
    metrics = accuracy(logits, batch)
    assert metrics["acc"] == pytest.approx(3 / 6)
    assert metrics["exact"] == pytest.approx(1 / 3)
    assert metrics["acc_example_mean"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert metrics["acc/n_pairs=2"] == pytest.approx(1.0)
    assert metrics["acc/n_pairs=8"] == pytest.approx(1 / 4)
    assert metrics["acc/seq_len=4"] == pytest.approx(3 / 6)
    assert set(metrics) == {
        "acc", "exact", "acc_example_mean", "loss", "acc/n_pairs=2", "acc/n_pairs=8", "acc/seq_len=4"
    }  # fmt: skip
    mask = batch.supervised
    want = torch.nn.functional.cross_entropy(logits[mask].double(), batch.targets[mask])
    assert metrics["loss"] == pytest.approx(want.item())


def test_logits_at_the_supervised_positions_only_give_the_same_metrics():
    logits, batch = make_batch()
    assert accuracy(logits[batch.supervised], batch) == pytest.approx(accuracy(logits, batch))
    with pytest.raises(
        ValueError, match=r"^logits: expected \[B, T, V\] with \[B, T\] = \[4, 4\] or \[N, V\] with N = 6"
    ):
        accuracy(logits[batch.supervised][:5], batch)


def test_meter_averages_by_counts_not_by_batches():
    logits, batch = make_batch()
    meter = AccuracyMeter()
    for rows in (slice(0, 1), slice(1, 4)):
        part = Batch(batch.inputs[rows], batch.targets[rows], {k: v[rows] for k, v in batch.slices.items()})
        meter.update(logits[rows], part)
    assert meter.compute() == pytest.approx(accuracy(logits, batch))


def test_empty_meter_and_all_ignored_batch_are_nan():
    assert math.isnan(AccuracyMeter().compute()["acc"])
    targets = torch.full((2, 3), IGNORE)
    metrics = accuracy(torch.zeros(2, 3, 4), Batch(targets.clone(), targets, {"seq_len": torch.tensor([3, 3])}))
    assert math.isnan(metrics["acc"]) and math.isnan(metrics["exact"]) and "acc/seq_len=3" not in metrics
    assert math.isnan(metrics["loss"])


def test_shape_mismatch_raises():
    _, batch = make_batch()
    with pytest.raises(ValueError, match="logits"):
        accuracy(torch.zeros(4, 3, 5), batch)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_accuracy_on_cuda_matches_cpu():
    logits, batch = make_batch()
    assert accuracy(logits.cuda(), batch.to("cuda")) == pytest.approx(accuracy(logits, batch))
