"""Each op against an independent statement of its math (explicit sums, inverses, covariances), and mutation checks:
wrong recurrences (VLA's keys swapped, CCQ's decay dropped from a sum, the two-key rule's keys swapped) fail the
same comparison the ops pass."""

from __future__ import annotations

import importlib

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
    vla,
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


# ---------------------------------------------------------------------------------------------------------------
# Whole ops from a given state, against statements written in plain torch (no `unit_rows`, no `kaczmarz_step`, no
# `linattn.ops` internals). `mismatch` is the one check: the tests of the ops and the mutation tests below use it
# alike, so the mutations exercise exactly what guards each op.

TOL = 1e-10  # relative RMS, float64: an op's `naive` and `chunk` backends against its statement
WRONG = 1e-3  # a wrong recurrence is off by at least this (seven orders above TOL) on the same inputs


def mismatch(run, statement, x, *, grad=False):
    """Relative RMS errors of `run(x)` against `statement(x)` (each a list: the outputs, then the final state), by
    name; with `grad` also of the gradients w.r.t. every tensor of `x` for fixed random cotangents on every output."""
    results = []
    for fn in (run, statement):
        leaves = {n: t.detach().clone().requires_grad_(grad) for n, t in x.items()}
        outs = fn(leaves)
        found = {f"out{i}": o.detach() for i, o in enumerate(outs)}
        if grad:
            gen = torch.Generator().manual_seed(99)
            loss = sum((o * torch.randn(o.shape, generator=gen, dtype=F64)).sum() for o in outs)
            ds = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
            found |= {f"d{n}": torch.zeros_like(t) if d is None else d for (n, t), d in zip(leaves.items(), ds)}
        results.append(found)
    got, want = results
    assert got.keys() == want.keys()
    return {n: rel_err(got[n], want[n]) for n in want}


def assert_matches(run, statement, x, *, grad=False):
    errs = mismatch(run, statement, x, grad=grad)
    assert max(errs.values()) < TOL, {n: f"{e:.1e}" for n, e in errs.items() if e >= TOL}


def assert_rejected(wrong, statement, x):
    """The check that guards the op tells `wrong` (a different recurrence) from the statement, by far, on the op's
    output itself (not only on its final state)."""
    errs = mismatch(wrong, statement, x)
    assert errs["out0"] > WRONG, {n: f"{e:.1e}" for n, e in errs.items()}


def uniform(*shape, seed=0):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def unit(x):
    return x / x.norm(dim=-1, keepdim=True)


def spd_from(P):
    """A symmetric positive-definite matrix from a free leaf (its gradient is the same for a backend that reads
    the matrix through its symmetric part, or reads its transpose)."""
    return P @ P.transpose(-1, -2) / P.shape[-1] + 0.5 * torch.eye(P.shape[-1], dtype=F64)


def outer(a, b):
    return a[..., :, None] * b[..., None, :]


# --- linear attention and GLA from an initial state ----------------------------------------------------------------


def linear_inputs(normalize):
    B, T, H, K, V = 2, 37, 2, 5, 3
    feature = (lambda x: F.elu(x) + 1) if normalize else (lambda x: x)
    x = {"q": feature(randn(B, T, H, K, seed=1)), "k": feature(randn(B, T, H, K, seed=2))}
    x |= {"v": randn(B, T, H, V, seed=3), "S0": randn(B, H, K, V, seed=4)}
    if normalize:
        x["z0"] = uniform(B, H, K, seed=5) * 4
    return x


def linear_statement(normalize):
    """`S_t = S_0 + Σ_{s≤t} k_s v_sᵀ`, `o_t = scale · S_tᵀ q_t`; normalised: `z_t = z_0 + Σ_{s≤t} k_s`,
    `o_t = S_tᵀ q̃_t / max(z_tᵀ q̃_t, 10⁻⁴)` with `q̃ = scale · q`."""

    def statement(x):
        q, k, v = x["q"], x["k"], x["v"]
        scale = q.shape[-1] ** -0.5
        S = x["S0"][:, None] + torch.einsum("bshk,bshv->bshkv", k, v).cumsum(1)  # [B, T, H, K, V]
        read = torch.einsum("bthkv,bthk->bthv", S, scale * q)
        if not normalize:
            return [read, S[:, -1]]
        z = x["z0"][:, None] + k.cumsum(1)  # [B, T, H, K]
        return [read / (z * scale * q).sum(-1, keepdim=True).clamp_min(1e-4), S[:, -1], z[:, -1]]

    return statement


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_linear_attention_from_a_state(backend, normalize):
    def run(x):
        state = (x["S0"], x["z0"]) if normalize else x["S0"]
        o, S = linear_attention(x["q"], x["k"], x["v"], normalize=normalize, initial_state=state,
                                output_final_state=True, backend=backend)  # fmt: skip
        return [o, *S] if normalize else [o, S]

    assert_matches(run, linear_statement(normalize), linear_inputs(normalize), grad=True)


def gla_statement(x):
    """`S_t = e^{G_t} ⊙ S_0 + Σ_{s≤t} e^{G_t − G_s} ⊙ k_s v_sᵀ` (`G` the cumulative log-decay, scalar or per key
    channel), `o_t = scale · S_tᵀ q_t`: every state formed from the sums, none carried."""
    q, k, v, S0 = x["q"], x["k"], x["v"], x["S0"]
    B, T, H, K = q.shape
    G = x["g"].cumsum(1).expand(B, T, H, K) if x["g"].dim() == 4 else x["g"].cumsum(1)[..., None].expand(B, T, H, K)
    mask = torch.ones(T, T, dtype=torch.bool).tril()[None, :, :, None, None]
    decay = torch.where(mask, G[:, :, None] - G[:, None, :], -torch.inf).exp()  # [B, t, s, H, K]
    S = G.exp()[..., None] * S0[:, None] + torch.einsum("btshk,bshk,bshv->bthkv", decay, k, v)
    return [torch.einsum("bthkv,bthk->bthv", S, q) * K**-0.5, S[:, -1]]


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_gla_from_a_state(backend, per_channel):
    B, T, H, K, V = 2, 37, 2, 4, 3
    x = {"q": randn(B, T, H, K, seed=1), "k": randn(B, T, H, K, seed=2), "v": randn(B, T, H, V, seed=3)}
    x |= {"g": -uniform(B, T, H, *((K,) if per_channel else ()), seed=4), "S0": randn(B, H, K, V, seed=5)}

    def run(x):
        o, S = gated_linear_attention(x["q"], x["k"], x["v"], x["g"], initial_state=x["S0"],
                                      output_final_state=True, backend=backend)  # fmt: skip
        return [o, S]

    assert_matches(run, gla_statement, x, grad=True)


# --- the two-key delta rule: DeltaNet, GDN, KLA (`kaczmarz_eps`), two keys, from an initial state -------------------


def delta_statement(eps=None):
    """`S_t = e^{g_t} (I − β_t w_t k_tᵀ) S_{t-1} + β_t w_t v_tᵀ`, `o_t = scale · S_tᵀ q_t`, `w = k`, `β = 1`, `g = 0`
    where not given; with `kaczmarz_eps=ε` the step is `β_t = η_t / (‖k_t‖² + ε)` of the erase key `k`."""

    def statement(x):
        q, k, v = x["q"], x["k"], x["v"]
        B, T, H, K = q.shape
        w = x.get("w", k)
        beta = x.get("beta", torch.ones(B, T, H, dtype=F64))
        if eps is not None:
            beta = beta / ((k * k).sum(-1) + eps)
        decay = x["g"].exp() if "g" in x else torch.ones(B, T, H, dtype=F64)
        S, I, outs = x["S0"], torch.eye(K, dtype=F64), []
        for t in range(T):
            b, a = beta[:, t, :, None, None], decay[:, t, :, None, None]
            S = a * (I - b * outer(w[:, t], k[:, t])) @ S + b * outer(w[:, t], v[:, t])
            outs.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t]) * K**-0.5)
        return [torch.stack(outs, 1), S]

    return statement


DELTA = {  # keys: unit, raw; gates given; kaczmarz_eps
    "deltanet": ("unit", {"beta"}, None),
    "gdn": ("unit", {"beta", "g"}, None),
    "kla": ("raw", {"beta", "g"}, 0.25),
    "kla-eta1": ("raw", {"g"}, 0.25),  # beta=None: η = 1
    "two-key": ("unit", {"w", "beta", "g"}, None),
    "two-key-kla": ("raw", {"w", "beta", "g"}, 0.25),  # the step from k, not w
}


def delta_inputs(config):
    keys, given, _ = DELTA[config]
    B, T, H, K, V = 2, 37, 2, 5, 3
    k = randn(B, T, H, K, seed=2)
    x = {"q": randn(B, T, H, K, seed=1), "k": unit(k) if keys == "unit" else k, "v": randn(B, T, H, V, seed=3)}
    if "w" in given:  # a unit write direction at about 50° to the key (wᵀk > 0, as VLA's α̂): not parallel to it
        x["w"] = unit(unit(k) + unit(randn(B, T, H, K, seed=4)))
    if "beta" in given:
        x["beta"] = uniform(B, T, H, seed=5) * 0.8 + 0.2
    if "g" in given:
        x["g"] = -uniform(B, T, H, seed=6) * 0.5
    x["S0"] = randn(B, H, K, V, seed=7)
    return x


def delta_op(backend, eps):
    def run(x):
        o, S = delta_rule(x["q"], x["k"], x["v"], w=x.get("w"), beta=x.get("beta"), g=x.get("g"),
                          kaczmarz_eps=eps, initial_state=x["S0"], output_final_state=True,
                          backend=backend)  # fmt: skip
        return [o, S]

    return run


@pytest.mark.parametrize("config", DELTA)
@pytest.mark.parametrize("backend", BACKENDS)
def test_delta_rule_from_a_state(backend, config):
    eps = DELTA[config][2]
    assert_matches(delta_op(backend, eps), delta_statement(eps), delta_inputs(config), grad=True)


# --- VLA: the gate, the write, the read; with and without forgetting, from an initial (S, A) ------------------------

LAM0 = 0.3


def vla_inputs(init):
    B, T, H, K, V = 2, 37, 2, 4, 3
    x = {"q": F.elu(randn(B, T, H, K, seed=1)) + 1, "k": F.elu(randn(B, T, H, K, seed=2)) + 1}
    x |= {"v": randn(B, T, H, V, seed=3), "u": unit(randn(B, T, H, K, seed=4)) / K**0.5}
    if init:
        x |= {"S0": randn(B, H, K, V, seed=5), "P": randn(B, H, K, K, seed=6)}  # A_0 = spd_from(P)
    return x


def vla_statement(rho, write="alpha", position=None):
    """`k̂_t = k_t / ‖k_t‖`, `M_t = ρ M_{t-1} + u_t u_tᵀ` (`M_0 = λ0 I`, or `A_0⁻¹`), `α̂_t = M_t⁻¹ k̂_t / ‖M_t⁻¹ k̂_t‖`,
    `S_t = (I − α̂_t k̂_tᵀ) S_{t-1} + α̂_t v_tᵀ`, `o_t = scale · S_tᵀ q_t`; the final state `(S_T, M_T⁻¹)`.
    `write="k"` is a wrong variant, for the mutation test: `S_t = (I − k̂_t α̂_tᵀ) S_{t-1} + k̂_t v_tᵀ`.
    With `position` (`[B]`, the refresh's): `M_t` also gains `√ρ λ0 (1 − ρ^K)` at entry `(j, j)`,
    `j = (n_b + t) mod K`."""

    def statement(x):
        q, k, v, u = x["q"], x["k"], x["v"], x["u"]
        B, T, H, K = q.shape
        I = torch.eye(K, dtype=F64)
        if "P" in x:
            S, M = x["S0"], torch.linalg.inv(spd_from(x["P"]))
        else:
            S, M = torch.zeros(B, H, K, v.shape[-1], dtype=F64), (LAM0 * I).expand(B, H, K, K)
        outs = []
        for t in range(T):
            k_hat = k[:, t] / k[:, t].norm(dim=-1, keepdim=True)
            M = rho * M + outer(u[:, t], u[:, t])
            if position is not None:
                j = (position + t) % K  # [B]
                M = M + (rho**0.5 * LAM0 * (1 - rho**K) * F.one_hot(j, K).to(F64).diag_embed())[:, None]
            alpha = torch.linalg.solve(M, k_hat)
            alpha_hat = alpha / alpha.norm(dim=-1, keepdim=True)
            if write == "k":
                alpha_hat, k_hat = k_hat, alpha_hat
            S = (I - outer(alpha_hat, k_hat)) @ S + outer(alpha_hat, v[:, t])
            outs.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t]) * K**-0.5)
        return [torch.stack(outs, 1), S, torch.linalg.inv(M)]

    return statement


def vla_op(backend, rho, position=None):
    refresh = {} if position is None else {"refresh": True, "position": position}

    def run(x):
        state = (x["S0"], spd_from(x["P"])) if "P" in x else None
        o, (S, A) = vla(x["q"], x["k"], x["v"], x["u"], lam0=LAM0, rho=rho, initial_state=state,
                        output_final_state=True, backend=backend, **refresh)  # fmt: skip
        return [o, S, A]

    return run


@pytest.mark.parametrize("init", [False, True], ids=["zero-state", "initial-state"])
@pytest.mark.parametrize("rho", [1.0, 0.9])
@pytest.mark.parametrize("backend", BACKENDS)
def test_vla_is_the_regularised_two_key_write(backend, rho, init, monkeypatch):
    """Outputs, `(S_T, A_T)` and the gradients of q, k, v, u and the initial state. At `ρ = 0.9` the chunk gate runs
    on rescaled `u` (`forgetting.py`), here in segments of 7 tokens (of 128 otherwise), each from the last one's `A`."""
    forgetting = importlib.import_module("linattn.ops.vla.forgetting")
    monkeypatch.setattr(forgetting, "MAX_LOG_SCALE", 0.4)
    assert rho == 1 or forgetting.segment_length(rho) == 7
    assert_matches(vla_op(backend, rho), vla_statement(rho), vla_inputs(init), grad=True)


@pytest.mark.parametrize("init", [False, True], ids=["zero-state", "initial-state"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_vla_refresh_reinjects_the_prior_one_coordinate_a_token(backend, init, monkeypatch):
    """`refresh=True` at `ρ = 0.9`, each sequence from its own position (the refresh's phase), segments of 7 rows:
    outputs, `(S_T, A_T)` and every gradient. Ignoring the positions (every sequence from 0) fails the check."""
    forgetting = importlib.import_module("linattn.ops.vla.forgetting")
    monkeypatch.setattr(forgetting, "MAX_LOG_SCALE", 0.4)
    position = torch.tensor([3, 10])
    x = vla_inputs(init)
    assert_matches(vla_op(backend, 0.9, position), vla_statement(0.9, position=position), x, grad=True)
    assert_rejected(vla_op(backend, 0.9, 0), vla_statement(0.9, position=position), x)


# --- CCQ: decay, centred or not, raw or unit keys, from an initial (C, m, Z) ---------------------------------------


def ccq_statement(centered=True, normalize_keys=True, decayed="CmZ"):
    """`q'_t = q_t − λ_t Σ_t q_t`, `Σ_t = C_t / Z_t − μ_t μ_tᵀ` (centred; else `C_t / Z_t`), `μ_t = m_t / Z_t`, with
    the sums over earlier keys and the initial state formed directly, none carried:
    `C_t = e^{G_t} C_0 + Σ_{s≤t} e^{G_t − G_s} k_s k_sᵀ`, `m_t = e^{G_t} m_0 + Σ e^{G_t − G_s} k_s`,
    `Z_t = e^{G_t} Z_0 + Σ e^{G_t − G_s}` (`G` the cumulative log-decay; 0 without `g`); keys `k / ‖k‖` when
    `normalize_keys`. `decayed` names the sums that decay: fewer than all three is a wrong variant, for the mutation
    test."""

    def statement(x):
        q, k, lam = x["q"], x["k"], x["lam"]
        B, T, H = q.shape[:3]
        if normalize_keys:
            k = k / k.norm(dim=-1, keepdim=True)
        G = x["g"].cumsum(1) if "g" in x else torch.zeros(B, T, H, dtype=F64)
        mask = torch.ones(T, T, dtype=torch.bool).tril()[None, :, :, None]
        decay = torch.where(mask, G[:, :, None] - G[:, None, :], -torch.inf).exp()  # [B, t, s, H]
        plain = mask.to(F64).expand(B, T, T, H)
        w = {n: decay if n in decayed else plain for n in "CmZ"}  # ω_ts
        C = torch.einsum("btsh,bshi,bshj->bthij", w["C"], k, k)
        m = torch.einsum("btsh,bshi->bthi", w["m"], k)
        Z = w["Z"].sum(2)
        if "C0" in x:
            w0 = {n: G.exp() if n in decayed else torch.ones_like(G) for n in "CmZ"}  # ω_t0 = e^{G_t}
            C = C + w0["C"][..., None, None] * spd_from(x["C0"])[:, None]
            m = m + w0["m"][..., None] * x["m0"][:, None]
            Z = Z + w0["Z"] * x["Z0"][:, None]
        mu = m / Z[..., None]
        sigma = C / Z[..., None, None] - (outer(mu, mu) if centered else 0)
        q_clean = q - lam[..., None] * torch.einsum("bthij,bthj->bthi", sigma, q)
        return [q_clean, C[:, -1], m[:, -1], Z[:, -1]]

    return statement


CCQ = {  # decay, initial state, centered, normalize_keys
    "decay": (True, False, True, True),
    "decay-state": (True, True, True, True),
    "decay-uncentered": (True, True, False, True),
    "decay-rawkeys": (True, True, True, False),
    "rawkeys-uncentered": (False, True, False, False),
    "state": (False, True, True, True),
}


def ccq_inputs(config):
    decay, init, _, _ = CCQ[config]
    B, T, H, K = 2, 37, 2, 4
    x = {"q": randn(B, T, H, K, seed=1), "k": randn(B, T, H, K, seed=2), "lam": uniform(B, T, H, seed=3)}
    if decay:
        x["g"] = -uniform(B, T, H, seed=4) * 0.5
    if init:  # C_0 = spd_from(C0): a state carried from earlier keys is symmetric positive (semi-)definite
        x |= {"C0": randn(B, H, K, K, seed=5), "m0": randn(B, H, K, seed=6), "Z0": uniform(B, H, seed=7) * 3 + 0.5}
    return x


def ccq_op(backend, centered, normalize_keys):
    def run(x):
        state = (spd_from(x["C0"]), x["m0"], x["Z0"]) if "C0" in x else None
        q_clean, (C, m, Z) = ccq_query(x["q"], x["k"], x["lam"], g=x.get("g"), centered=centered,
                                       normalize_keys=normalize_keys, initial_state=state,
                                       output_final_state=True, backend=backend)  # fmt: skip
        return [q_clean, C, m, Z]

    return run


@pytest.mark.parametrize("config", CCQ)
@pytest.mark.parametrize("backend", BACKENDS)
def test_ccq_is_the_decayed_key_covariance(backend, config):
    """`q'` and `(C, m, Z)`, and the gradients of q, k, λ, g and the initial state."""
    _, _, centered, normalize_keys = CCQ[config]
    x = ccq_inputs(config)
    assert_matches(ccq_op(backend, centered, normalize_keys), ccq_statement(centered, normalize_keys), x, grad=True)


# --- mutations: the checks above tell these recurrences apart ------------------------------------------------------


@pytest.mark.parametrize("init", [False, True], ids=["zero-state", "initial-state"])
@pytest.mark.parametrize("rho", [1.0, 0.9])
def test_vla_check_rejects_swapped_write_and_erase_keys(rho, init):
    """`S_t = (I − k̂_t α̂_tᵀ) S_{t-1} + k̂_t v_tᵀ` (`k̂` and `α̂` swapped), built from the library's own ops as `vla`
    composes them and as the statement's edited copy, fails the check that `vla` passes; the same composition with
    the keys in their places passes it."""
    x, statement = vla_inputs(init), vla_statement(rho)

    def composed(swap):
        def run(x):
            A0 = spd_from(x["P"]) if "P" in x else None
            alpha_hat, A = vla_gate(x["k"], x["u"], lam0=LAM0, rho=rho, initial_state=A0, output_final_state=True,
                                    backend="naive")  # fmt: skip
            k_hat = x["k"] / x["k"].norm(dim=-1, keepdim=True)
            erase, write = (alpha_hat, k_hat) if swap else (k_hat, alpha_hat)
            o, S = delta_rule(x["q"], erase, x["v"], w=write, initial_state=x.get("S0"), output_final_state=True,
                              backend="naive")  # fmt: skip
            return [o, S, A]

        return run

    assert_matches(composed(swap=False), statement, x)
    assert_rejected(composed(swap=True), statement, x)
    assert_rejected(vla_statement(rho, write="k"), statement, x)


@pytest.mark.parametrize("decayed", ["", "C", "m", "Z", "Cm", "CZ", "mZ"])
def test_ccq_check_rejects_a_decay_dropped_from_any_sum(decayed):
    """CCQ with decay where the decay is dropped (from the op: `g=None`; from the statement's copy: all sums), or
    applied to some of `C, m, Z` only, fails the check that `ccq_query` with decay passes."""
    x = ccq_inputs("decay-state")
    statement = ccq_statement()
    if not decayed:
        assert_rejected(lambda x: ccq_op("naive", True, True)({n: t for n, t in x.items() if n != "g"}), statement, x)
    assert_rejected(ccq_statement(decayed=decayed), statement, x)


def test_two_key_check_rejects_swapped_keys():
    """The two-key rule with `w` and `k` swapped (`S_t = e^{g_t} (I − β_t k_t w_tᵀ) S_{t-1} + β_t k_t v_tᵀ`), and the
    Kaczmarz step taken from `w` instead of the erase key `k`, fail the checks that `delta_rule` passes."""
    x = delta_inputs("two-key")
    assert_matches(delta_op("naive", None), delta_statement(), x)
    assert_rejected(lambda y: delta_op("naive", None)({**y, "k": y["w"], "w": y["k"]}), delta_statement(), x)
    x, eps = delta_inputs("two-key-kla"), DELTA["two-key-kla"][2]
    assert_matches(delta_op("naive", eps), delta_statement(eps), x)
    step_from_w = lambda y: {**y, "beta": y["beta"] / ((y["w"] * y["w"]).sum(-1) + eps)}
    assert_rejected(lambda y: delta_op("naive", None)(step_from_w(y)), delta_statement(eps), x)
