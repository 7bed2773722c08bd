"""S-NIAH proxy: one pair of the KLA-format MQAR, with a depth slice."""

from __future__ import annotations

import pytest
import torch

from linattn.tasks import SNIAH_EVAL_SEQ_LENS, KLAMQARConfig, SNIAHConfig, sniah
from linattn.tasks.mqar import generate_kla


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("T", [1024, SNIAH_EVAL_SEQ_LENS[-1]])
def test_sniah_layout(T):
    B, V = 8, 8192
    batch = sniah.generate(SNIAHConfig(seq_len=T), B, gen())
    assert batch.inputs.shape == (B, T)
    key, value = batch.inputs[:, 0], batch.inputs[:, 1]
    assert (key < V // 2).all() and (value >= V // 2).all()
    mask = batch.supervised
    assert (mask.sum(dim=1) == 1).all()
    position = mask.int().argmax(dim=1)
    assert (position >= 64).all() and (position <= T - 2).all()
    assert torch.equal(batch.inputs[mask], key) and torch.equal(batch.targets[mask], value)
    assert torch.equal(batch.slices["depth"], position * 10 // T)
    assert (batch.slices["seq_len"] == T).all() and (batch.slices["n_pairs"] == 1).all()


def test_sniah_is_the_one_pair_kla_generator():
    config = SNIAHConfig(seq_len=2048, power_alpha=1.0)
    assert config.to_mqar() == KLAMQARConfig(n_pairs=1, seq_len=2048, power_alpha=1.0)
    a, b = sniah.generate(config, 4, gen(3)), generate_kla(config.to_mqar(), 4, gen(3))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, sniah.generate(config, 4, gen(4)).inputs)


def test_sniah_uniform_depth_covers_every_bucket():
    depth = sniah.generate(SNIAHConfig(seq_len=1024, power_alpha=1.0), 2000, gen()).slices["depth"]
    assert set(depth.tolist()) == set(range(10))


@pytest.mark.parametrize(
    ("make", "field"),
    [(lambda: SNIAHConfig(seq_len=64), "seq_len"), (lambda: SNIAHConfig(power_alpha=0.0), "power_alpha")],
)
def test_sniah_validation(make, field):
    with pytest.raises(ValueError, match=rf"^{field}: expected"):
        make()
