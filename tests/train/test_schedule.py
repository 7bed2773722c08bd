"""The warmup + cosine multiplier: its shape, and that `LambdaLR` follows it update by update."""

from __future__ import annotations

import math
from functools import partial
from itertools import pairwise

import pytest
import torch

from linattn.train import warmup_cosine


def test_linear_warmup_then_cosine_to_the_floor():
    W, S, r = 10, 110, 0.1
    m = [warmup_cosine(s, warmup_steps=W, total_steps=S, min_ratio=r) for s in range(S + 5)]
    assert m[0] == 0.0 and m[W // 2] == 0.5 and m[W] == 1.0
    assert all(a < b for a, b in pairwise(m[: W + 1])), "warmup must rise"
    assert all(a > b for a, b in pairwise(m[W : S + 1])), "cosine must fall"
    assert m[(W + S) // 2] == pytest.approx((1 + r) / 2)
    assert m[S] == pytest.approx(r) and m[S + 4] == pytest.approx(r)


def test_without_warmup_the_first_update_is_at_the_peak():
    assert warmup_cosine(0, warmup_steps=0, total_steps=100) == 1.0
    assert warmup_cosine(100, warmup_steps=0, total_steps=100) == pytest.approx(0.0)


def test_lambda_lr_follows_the_multiplier():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, partial(warmup_cosine, warmup_steps=4, total_steps=20))
    lrs = []
    for _ in range(20):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    expected = [2.0 * warmup_cosine(s, warmup_steps=4, total_steps=20) for s in range(20)]
    assert all(math.isclose(a, b, abs_tol=1e-12) for a, b in zip(lrs, expected))


def test_warmup_longer_than_the_run_is_rejected():
    with pytest.raises(ValueError, match="warmup_steps"):
        warmup_cosine(0, warmup_steps=30, total_steps=20)
