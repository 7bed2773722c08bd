"""Each op against an independent statement of its math (explicit sums, inverses, covariances)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from linattn.ops import (
    ccq_query,
    delta_rule,
    gated_linear_attention,
    kaczmarz_beta,
    linear_attention,
    softmax_attention,
    vla_gate,
)
from tests.ops.cases import rel_err

F64 = torch.float64
BACKENDS = ["naive", "chunk"]


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_linear_attention_normalized_is_a_ratio_of_sums(backend):
    B, T, H, K, V = 2, 90, 2, 6, 5
    q, k = F.elu(randn(B, T, H, K, seed=1)) + 1, F.elu(randn(B, T, H, K, seed=2)) + 1
    v = randn(B, T, H, V, seed=3)
    scores = torch.einsum("bthk,bshk->bhts", q, k).tril()  # [B, H, T, T]
    want = torch.einsum("bhts,bshv->bthv", scores, v) / scores.sum(-1).transpose(1, 2)[..., None]
    o, (S, z) = linear_attention(q, k, v, normalize=True, output_final_state=True, backend=backend)
    assert rel_err(o, want) < 1e-12
    assert rel_err(z, k.sum(1)) < 1e-12
    assert rel_err(S, torch.einsum("bthk,bthv->bhkv", k, v)) < 1e-12


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_gla_is_a_decayed_sum(backend, per_channel):
    B, T, H, K, V = 1, 40, 2, 4, 3
    q, k, v = randn(B, T, H, K, seed=1), randn(B, T, H, K, seed=2), randn(B, T, H, V, seed=3)
    g = -torch.rand(B, T, H, K if per_channel else 1, dtype=F64) * 3
    G = g.cumsum(1).expand(B, T, H, K)  # [B, T, H, K]
    decay = (G[:, :, None] - G[:, None, :]).exp() * torch.ones(T, T).tril()[None, :, :, None, None]  # [B,t,s,H,K]
    want = torch.einsum("bthk,bshk,btshk,bshv->bthv", q, k, decay, v) * K**-0.5
    o, _ = gated_linear_attention(q, k, v, g if per_channel else g[..., 0], backend=backend)
    assert rel_err(o, want) < 1e-12


@pytest.mark.parametrize("backend", BACKENDS)
def test_kaczmarz_step_is_an_exact_projection(backend):
    """With η = 1, ε = 0 and no decay, each write makes the state recall its value exactly: `S_tᵀ k_t = v_t`."""
    B, T, H, K, V = 1, 7, 2, 5, 3
    k, v = randn(B, T, H, K, seed=1) * 4, randn(B, T, H, V, seed=2)
    beta = kaczmarz_beta(k, torch.ones(B, T, H, dtype=F64), eps=0.0)
    for t in range(1, T + 1):
        _, S = delta_rule(k[:, :t], k[:, :t], v[:, :t], beta=beta[:, :t], output_final_state=True, backend=backend)
        recalled = torch.einsum("bhkv,bhk->bhv", S, k[:, t - 1])
        assert rel_err(recalled, v[:, t - 1]) < 1e-12


@pytest.mark.parametrize("eta", [True, False], ids=["eta", "eta=1"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_kaczmarz_eps_is_the_explicit_kaczmarz_beta(backend, eta):
    """`delta_rule(..., beta=η, kaczmarz_eps=ε)` equals `delta_rule(..., beta=kaczmarz_beta(k, η, ε))`: outputs,
    final state and the gradients of q, k (through the step too), v, η, g and the initial state."""
    B, T, H, K, V, eps = 2, 70, 2, 5, 3, 1e-3
    x = {
        "q": randn(B, T, H, K, seed=1),
        "k": randn(B, T, H, K, seed=2) * 2,
        "v": randn(B, T, H, V, seed=3),
        "eta": torch.rand(B, T, H, dtype=F64, generator=torch.Generator().manual_seed(4)),
        "g": -torch.rand(B, T, H, dtype=F64, generator=torch.Generator().manual_seed(5)),
        "h0": randn(B, H, K, V, seed=6),
    }
    cot = [randn(B, T, H, V, seed=7), randn(B, H, K, V, seed=8)]

    def run(in_op):
        leaves = {n: t.clone().requires_grad_() for n, t in x.items()}
        q, k, v, g, h0 = (leaves[n] for n in ("q", "k", "v", "g", "h0"))
        eta_ = leaves["eta"] if eta else None
        common = {"g": g, "initial_state": h0, "output_final_state": True, "backend": backend}
        if in_op:
            o, S = delta_rule(q, k, v, beta=eta_, kaczmarz_eps=eps, **common)
        else:
            step = kaczmarz_beta(k, torch.ones_like(x["eta"]) if eta_ is None else eta_, eps=eps)
            o, S = delta_rule(q, k, v, beta=step, **common)
        grads = torch.autograd.grad((o * cot[0]).sum() + (S * cot[1]).sum(), list(leaves.values()), allow_unused=True)
        return [o, S, *(torch.zeros_like(t) if d is None else d for t, d in zip(x.values(), grads))]

    for what, a, b in zip(["o", "S", *(f"d{n}" for n in x)], run(True), run(False)):
        assert rel_err(a, b) < 1e-12, what


@pytest.mark.parametrize("backend", BACKENDS)
def test_vla_gate_is_the_normalised_regularised_inverse(backend):
    B, T, H, K, lam0 = 1, 80, 2, 6, 0.5
    k, u = randn(B, T, H, K, seed=1), randn(B, T, H, K, seed=2) / K
    alpha_hat, A = vla_gate(k, u, lam0=lam0, output_final_state=True, backend=backend)
    M = lam0 * torch.eye(K, dtype=F64) + torch.einsum("bthi,bthj->bthij", u, u).cumsum(1)  # [B, T, H, K, K]
    want = F.normalize(torch.linalg.solve(M, F.normalize(k, dim=-1)[..., None])[..., 0], dim=-1)
    assert rel_err(alpha_hat, want) < 1e-10
    assert rel_err(A, torch.linalg.inv(M[:, -1])) < 1e-10
    assert torch.allclose(alpha_hat.norm(dim=-1), torch.ones(B, T, H, dtype=F64))


@pytest.mark.parametrize("backend", BACKENDS)
def test_ccq_uses_the_running_key_covariance(backend):
    B, T, H, K = 1, 30, 1, 4
    q, k, lam = randn(B, T, H, K, seed=1), randn(B, T, H, K, seed=2), torch.rand(B, T, H, dtype=F64)
    q_clean, _ = ccq_query(q, k, lam, normalize_keys=False, backend=backend)
    for t in range(T):
        sigma = torch.cov(k[0, : t + 1, 0].T, correction=0).reshape(K, K)
        want = q[0, t, 0] - lam[0, t, 0] * sigma @ q[0, t, 0]
        assert rel_err(q_clean[0, t, 0], want) < 1e-12


def test_softmax_attention_matches_explicit_softmax():
    B, T, H, K, V = 2, 33, 2, 8, 5
    q, k, v = randn(B, T, H, K, seed=1), randn(B, T, H, K, seed=2), randn(B, T, H, V, seed=3)
    scores = torch.einsum("bthk,bshk->bhts", q, k) * K**-0.5
    scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    want = torch.einsum("bhts,bshv->bthv", scores.softmax(-1), v)
    assert rel_err(softmax_attention(q, k, v)[0], want) < 1e-12
    cu = torch.tensor([0, 10, 22, 25, 30, 33])  # causal: in groups of similar lengths (two of 16, two of 4)
    for causal in (True, False):
        packed, _ = softmax_attention(q[:1], k[:1], v[:1], causal=causal, cu_seqlens=cu)
        for bos, eos in zip(cu[:-1].tolist(), cu[1:].tolist()):
            alone, _ = softmax_attention(q[:1, bos:eos], k[:1, bos:eos], v[:1, bos:eos], causal=causal)
            assert rel_err(packed[:, bos:eos], alone) < 1e-12


@pytest.mark.parametrize("per_channel", [False, True])
def test_strong_decay_stays_finite_in_float32(per_channel):
    """A chunk can span hundreds of e-folds of decay; the chunk path never forms `e^{-G}`."""
    B, T, H, K = 1, 130, 2, 8
    q, k, v = (randn(B, T, H, K, seed=s).float() for s in (1, 2, 3))
    g = torch.full((B, T, H, K) if per_channel else (B, T, H), -20.0)
    want, _ = gated_linear_attention(q, k, v, g, backend="naive")
    got, _ = gated_linear_attention(q, k, v, g, backend="chunk")
    assert torch.isfinite(got).all() and rel_err(got, want) < 1e-5
    if not per_channel:
        want, _ = delta_rule(q, F.normalize(k, dim=-1), v, g=g, backend="naive")
        got, _ = delta_rule(q, F.normalize(k, dim=-1), v, g=g, backend="chunk")
        assert torch.isfinite(got).all() and rel_err(got, want) < 1e-5
