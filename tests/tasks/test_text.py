"""Byte-level text: windows of the stdlib's manual topics, next-byte targets, disjoint splits, seeded draws."""

from __future__ import annotations

import pytest
import torch

from linattn.tasks import TextConfig, generate
from linattn.tasks.text import corpus


def test_targets_are_the_next_bytes_of_the_split():
    batch = generate(TextConfig(seq_len=32, split="val"), 4, torch.Generator().manual_seed(0))
    assert batch.inputs.shape == batch.targets.shape == (4, 32) and batch.inputs.dtype == torch.int64
    assert torch.equal(batch.inputs[:, 1:], batch.targets[:, :-1]) and bool(batch.supervised.all())
    data = bytes(corpus("val").tolist())
    for row in torch.cat([batch.inputs, batch.targets[:, -1:]], dim=1):
        assert bytes(row.tolist()) in data
    assert batch.slices["seq_len"].tolist() == [32] * 4


def test_the_splits_cut_one_stream_80_10_10():
    parts = [corpus(s) for s in ("train", "val", "test")]
    total = sum(len(p) for p in parts)
    assert total > 400_000 and [round(len(p) / total, 3) for p in parts] == [0.8, 0.1, 0.1]
    assert "Assert statements" in bytes(torch.cat(parts).tolist()).decode()


def test_draws_follow_the_generator():
    config = TextConfig(seq_len=16)
    a, b = (generate(config, 3, torch.Generator().manual_seed(7)) for _ in range(2))
    assert torch.equal(a.inputs, b.inputs)
    assert not torch.equal(a.inputs, generate(config, 3, torch.Generator().manual_seed(8)).inputs)


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="^split: expected one of"):
        TextConfig(split="dev")
    with pytest.raises(ValueError, match="^seq_len: expected < "):
        TextConfig(seq_len=10**7, split="test")
    with pytest.raises(ValueError, match="^seq_len: expected an int >= 1"):
        TextConfig(seq_len=0)
