"""The Jacobian diagnostics on cases whose answer is known."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from linattn.experiments.jacobian import cosine, rank_one_update_norm, window_product_norms


def unit_pair(c: float, d: int = 5):
    k = torch.zeros(d, dtype=torch.float64)
    k[0] = 1
    a = torch.zeros(d, dtype=torch.float64)
    a[0], a[1] = c, math.sqrt(1 - c * c)
    return a, k


def test_norm_is_one_exactly_when_the_write_follows_the_key():
    k = F.normalize(torch.randn(100, 32, dtype=torch.float64), dim=-1)
    assert torch.allclose(rank_one_update_norm(k, k), torch.ones(100, dtype=torch.float64))


@pytest.mark.parametrize(("c", "want"), [(1.0, 1.0), (0.9, 1.0916079783), (0.5, 1.3660254038), (0.0, 1.6180339887)])
def test_known_values_for_unit_vectors(c, want):
    a, k = unit_pair(c)
    assert rank_one_update_norm(a, k).item() == pytest.approx(want, rel=1e-9)
    assert cosine(a, k).item() == pytest.approx(c)


def test_closed_form_matches_the_matrix_norm_also_unnormalised():
    gen = torch.Generator().manual_seed(0)
    alpha = torch.randn(64, 12, generator=gen, dtype=torch.float64) * torch.rand(64, 1, generator=gen) * 5
    k = F.normalize(torch.randn(64, 12, generator=gen, dtype=torch.float64), dim=-1)
    J = torch.eye(12, dtype=torch.float64) - alpha[:, :, None] * k[:, None, :]
    assert torch.allclose(rank_one_update_norm(alpha, k), torch.linalg.matrix_norm(J, ord=2), rtol=1e-10)


def test_products_over_windows():
    gen = torch.Generator().manual_seed(1)
    k = F.normalize(torch.randn(60, 8, generator=gen, dtype=torch.float64), dim=-1)
    # with α̂ = k̂ every factor is an orthogonal projection: products never exceed 1
    assert (window_product_norms(k, k, 25) <= 1 + 1e-12).all()
    # against the explicit product of the matrices
    a = F.normalize(k + 0.5 * torch.randn(60, 8, generator=gen, dtype=torch.float64), dim=-1)
    got = window_product_norms(a, k, 10, stride=25)
    for i, start in enumerate(range(0, 51, 25)):
        P = torch.eye(8, dtype=torch.float64)
        for t in range(start, start + 10):
            P = (torch.eye(8, dtype=torch.float64) - torch.outer(a[t], k[t])) @ P
        assert got[i].item() == pytest.approx(torch.linalg.matrix_norm(P, ord=2).item(), rel=1e-10)
    with pytest.raises(ValueError, match="^window"):
        window_product_norms(a, k, 61)
