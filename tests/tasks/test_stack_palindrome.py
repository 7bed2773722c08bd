"""Palindrome (copy in reverse) and stack generators: layout against a plain-Python reading, determinism, checks."""

from __future__ import annotations

import pytest
import torch

from linattn.tasks import IGNORE, CopyConfig, StackConfig, generate


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize(("n", "V"), [(1, 2), (3, 8), (31, 128)])
def test_palindrome_layout(n, V):
    batch = generate(CopyConfig(n_tokens=n, vocab_size=V, reverse=True), 16, gen(0))
    assert batch.inputs.shape == batch.targets.shape == (16, 2 * n + 1)
    for row, target in zip(batch.inputs.tolist(), batch.targets.tolist()):
        tokens = row[:n]
        assert row[n] == V - 1 and max(tokens) < V - 1 and row[n + 1 :] == tokens[::-1]
        assert target[:n] == [IGNORE] * n and target[n : 2 * n] == tokens[::-1] and target[-1] == IGNORE


@pytest.mark.parametrize(("T", "V", "depth", "p"), [(1, 2, 1, 0.5), (64, 16, 16, 0.5), (200, 5, 3, 0.9)])
def test_stack_targets_are_what_each_pop_removes(T, V, depth, p):
    batch = generate(StackConfig(seq_len=T, vocab_size=V, max_depth=depth, push_prob=p), 32, gen(1))
    assert batch.inputs.shape == batch.targets.shape == (32, T)
    pops = 0
    for row, target in zip(batch.inputs.tolist(), batch.targets.tolist()):
        stack = []
        for token, want in zip(row, target):
            if token == V - 1:
                assert stack and want == stack.pop()  # never a pop of an empty stack
                pops += 1
            else:
                assert 0 <= token < V - 1 and want == IGNORE and len(stack) < depth
                stack.append(token)
    assert pops > 0 or T == 1


def test_determinism_and_dispatch():
    for config in (CopyConfig(n_tokens=5, reverse=True), StackConfig(seq_len=40)):
        a, b, c = generate(config, 8, gen(7)), generate(config, 8, gen(7)), generate(config, 8, gen(8))
        assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
        assert not torch.equal(a.inputs, c.inputs)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: CopyConfig(reverse=1), "reverse"),
        (lambda: StackConfig(seq_len=0), "seq_len"),
        (lambda: StackConfig(vocab_size=1), "vocab_size"),
        (lambda: StackConfig(max_depth=0), "max_depth"),
        (lambda: StackConfig(push_prob=1.0), "push_prob"),
        (lambda: StackConfig(push_prob=float("nan")), "push_prob"),
    ],
)
def test_config_validation_names_the_field(make, field):
    with pytest.raises(ValueError, match=rf"^{field}: expected"):
        make()
