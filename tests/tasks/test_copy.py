"""Copy task: layout, next-token targets on the copy, the authors' identity targets, determinism, validation."""

from __future__ import annotations

import pytest
import torch

from linattn.tasks import IGNORE, CopyConfig, copy


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize(("n", "V"), [(31, 128), (3, 8), (1, 2)])
def test_copy_layout(n, V):
    B, T, sep = 32, 2 * n + 1, V - 1
    batch = copy.generate(CopyConfig(n_tokens=n, vocab_size=V), B, gen())
    x = batch.inputs
    assert x.shape == batch.targets.shape == (B, T) and x.dtype == torch.int64
    assert (x[:, n] == sep).all() and (x[:, :n] < sep).all() and (x[:, :n] >= 0).all()
    assert torch.equal(x[:, :n], x[:, n + 1 :])
    # the target at t is the next token, on the copy only: SEP predicts the first copied token
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[:, n : 2 * n] = True
    assert torch.equal(batch.supervised, mask)
    assert torch.equal(batch.targets[:, n : 2 * n], x[:, n + 1 :])
    assert (batch.targets[:, 2 * n] == IGNORE).all()
    assert (batch.slices["seq_len"] == T).all()


def test_identity_targets_are_the_inputs_on_the_copy():
    """The VLA authors' copy: each copied token is its own target, so echoing the input scores 1."""
    n, B = 5, 16
    batch = copy.generate(CopyConfig(n_tokens=n, vocab_size=16, identity=True), B, gen())
    x = batch.inputs
    mask = torch.zeros(B, 2 * n + 1, dtype=torch.bool)
    mask[:, n + 1 :] = True
    assert torch.equal(batch.supervised, mask) and torch.equal(batch.targets[:, n + 1 :], x[:, n + 1 :])
    plain = copy.generate(CopyConfig(n_tokens=n, vocab_size=16), B, gen())
    assert torch.equal(plain.inputs, x)  # the same sequences, other targets


def test_copy_defaults_and_determinism():
    config = CopyConfig()
    assert (config.n_tokens, config.vocab_size, config.seq_len) == (31, 128, 63)
    a, b, c = copy.generate(config, 4, gen(1)), copy.generate(config, 4, gen(1)), copy.generate(config, 4, gen(2))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, c.inputs)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: CopyConfig(n_tokens=0), "n_tokens"),
        (lambda: CopyConfig(vocab_size=1), "vocab_size"),
        (lambda: CopyConfig(identity=1), "identity"),
    ],
)
def test_copy_validation(make, field):
    with pytest.raises(ValueError, match=rf"^{field}: expected"):
        make()
