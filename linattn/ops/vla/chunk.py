"""VLA's write gate, chunk-parallel: a Cholesky per chunk instead of a token loop, and a backward of matmuls.

Forward. For chunk `c` with penalty rows `U_c` and unit keys `K̂_c` (`C × d`), and the inverse penalty at the
chunk's start `A_c = M_c⁻¹`, `M_c = M_0 + Σ_{c' < c} U_{c'}ᵀ U_{c'}` (`M_0 = λ0 I`, or `A_0⁻¹`):

    L Lᵀ = I + U_c A_c U_cᵀ                      (C × C Cholesky)
    W_c  = L⁻¹ U_c A_c                           (C × d)
    α_c  = K̂_c A_c − tril(K̂_c W_cᵀ) W_c          (row t is α_t = A_t k̂_t, A_t after token t's update)
    α̂   = rows of α_c normalised

Why: by Woodbury, `A_t = A_c − (U_{≤t} A_c)ᵀ (I + U_{≤t} A_c U_{≤t}ᵀ)⁻¹ (U_{≤t} A_c)`; the leading `t × t` block
of `L` is the Cholesky factor of the leading block of the Gram matrix, so `A_t = A_c − Σ_{s≤t} w_s w_sᵀ`
with `w_s` the rows of `W_c`. This equals the Sherman–Morrison token loop exactly.

Every `carry`-th chunk's `A_c` comes from its own `M_c` (a prefix sum of `d × d` Gram matrices, then a `d × d`
Cholesky); the chunks between follow by the downdates `A_{c+1} = A_c − W_cᵀ W_c`, all groups in parallel. So the
rounding of the downdates never accumulates over more than `carry` chunks (a sequential carry over the whole
sequence would let it grow with T), and the `d × d` factorisations, the gate's most expensive step, are `carry`
times fewer than one per chunk.

Backward (`_ChunkGate`), without differentiating any factorisation. `α_t = M_t⁻¹ k̂_t` with
`M_t = M_0 + Σ_{s≤t} u_s u_sᵀ`, so for `g_t = ∂L/∂α_t`, with `a_t = A_t g_t` (the forward's map applied to `g`):

    ∂L/∂k̂_t = a_t
    ∂L/∂M_t = −a_t α_tᵀ
    ∂L/∂u_s = −Σ_{t≥s} (a_t α_tᵀ + α_t a_tᵀ) u_s + 2 F u_s           F = −A_T sym(∂L/∂A_T) A_T
    ∂L/∂M_0 = −sym(Σ_t a_t α_tᵀ) + F

`∂L/∂u` is a reverse-causal linear attention (queries `u`, key/value pairs `(α, a)` and `(a, α)`): within a
chunk through `triu(U Αᵀ)` and `triu(U Aᵀ)`, across chunks through the reverse prefix sum of the `d × d` matrices
`Σ_{t∈c} (a_t α_tᵀ + α_t a_tᵀ)`. The backward saves `W_c` and `A_c` of each group's first chunk only (the others
follow by the same downdates, `carry` times fewer `d × d` matrices kept); `α̂`'s and `k̂`'s normalisations stay
outside, in autograd.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from linattn.ops.checks import compute_dtype
from linattn.ops.chunking import chunk_size, from_chunks, to_chunks


def gate_chunk(T: int, d: int) -> int:
    """Chunk size of the gate: its `d × d` inverse per chunk costs `∝ d³ / C` per token, its `C × C` factorisation
    and products `∝ C² + C d`, so the chunk grows with the head dim: 64 tokens, 128 from d = 128 on."""
    return chunk_size(T, 128 if d >= 128 else 64)


# chunks per `d × d` factorisation, the others carried by Woodbury downdates. `python -m linattn.bench stages
# --op vla-gate --device cpu --lengths 8192` (2-core AMD EPYC, torch 2.13, 2026-11-29; benchmarks/cpu-2026-11-29/),
# carry 1 → 8: forward 229 → 142 ms and 1498 → 1331 ms, forward + backward 337 → 343 ms and 4465 → 3564 ms at
# d = 32 and 128. `python -m linattn.bench gate`: the float32 gate's α̂ within 4.6e-7 of float64 at T = 1M.
CARRY = 8


def _apply_inverses(X: torch.Tensor, A: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Rows `A_t x_t` for every token of every chunk: `X A_c − tril(X W_cᵀ) W_c`; `X, W: [.., C, d]`,
    `A: [.., d, d]`."""
    return X @ A - (X @ W.transpose(-1, -2)).tril() @ W


def _sym(x: torch.Tensor) -> torch.Tensor:
    return (x + x.transpose(-1, -2)) / 2


def _penalties(M0: torch.Tensor, gram: torch.Tensor) -> torch.Tensor:
    """`M_c = M_0 + Σ_{c' < c} gram_{c'}`: `M0: [B, H, d, d]`, `gram: [B, H, N, d, d]` -> `[B, H, N, d, d]`."""
    return M0[:, :, None] + gram.cumsum(2) - gram


def _later_pairs(pair: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`S_c = pair_c + pair_cᵀ` and `Σ_{c' > c} S_{c'}`, both `[B, H, N, d, d]`."""
    S = pair + pair.transpose(-1, -2)
    return S, S.flip(2).cumsum(2).flip(2) - S


def _groups(x: torch.Tensor, R: int) -> torch.Tensor:
    """`[B, H, N, C, d]` -> `[B, H, ⌈N/R⌉, R, C, d]`, the last group padded with empty chunks."""
    B, H, N = x.shape[:3]
    NR = -(-N // R)
    return F.pad(x, (0, 0, 0, 0, 0, NR * R - N)).view(B, H, NR, R, *x.shape[3:])


def _ungroup(rows: list[torch.Tensor], N: int) -> torch.Tensor:
    """R tensors `[B, H, NR, C, d]` (chunk j of every group) -> `[B, H, N, C, d]`."""
    return torch.stack(rows, 3).flatten(2, 3)[:, :, :N]


class _ChunkGate(torch.autograd.Function):
    """`(k̂, u, M_0) -> (α, A_T)` with `α_t = M_t⁻¹ k̂_t` unnormalised; inputs `[B, T, H, d]` and `[B, H, d, d]` in
    the compute dtype. Saved for the backward: `A_c` at each group's first chunk (the others follow from `W` by
    the same downdates), `W`, `α`, `u`, `A_T`."""

    @staticmethod
    def forward(ctx, k_hat, u, M0, carry):
        T, d = k_hat.shape[1], k_hat.shape[-1]
        C = gate_chunk(T, d)
        Kc, Uc = to_chunks(k_hat, C), to_chunks(u, C)  # [B, H, N, C, d]; padded rows are 0 and add nothing to M
        N = Kc.shape[2]
        gram = Uc.transpose(-1, -2) @ Uc  # [B, H, N, d, d]
        # A_c by Cholesky at every R-th chunk, by Woodbury downdates A ← A − WᵀW in between; groups of R chunks,
        # the last one padded with empty chunks (u = 0: nothing changes)
        R = min(carry, N)
        A0 = A = torch.cholesky_inverse(torch.linalg.cholesky(_penalties(M0, gram)[:, :, ::R]))  # [B, H, NR, d, d]
        K6, U6 = _groups(Kc, R), _groups(Uc, R)
        eye = torch.eye(C, dtype=A.dtype, device=A.device)
        Ws, alphas = [], []
        for j in range(R):
            U_j = U6[:, :, :, j]  # [B, H, NR, C, d]
            UA = U_j @ A
            L = torch.linalg.cholesky(eye + UA @ U_j.transpose(-1, -2))  # [C, C]
            Ws.append(torch.linalg.solve_triangular(L, UA, upper=False))  # [B, H, NR, C, d]
            alphas.append(_apply_inverses(K6[:, :, :, j], A, Ws[-1]))
            if j < R - 1:
                A = A - Ws[-1].transpose(-1, -2) @ Ws[-1]
        W, alpha = _ungroup(Ws, N), _ungroup(alphas, N)  # [B, H, N, C, d]
        A_final = torch.cholesky_inverse(torch.linalg.cholesky(M0 + gram.sum(2)))  # [B, H, d, d]
        ctx.save_for_backward(Uc, A0, W, alpha, A_final)
        ctx.T, ctx.R = T, R
        return from_chunks(alpha, T), A_final

    @staticmethod
    def backward(ctx, d_alpha, d_A_final):
        Uc, A, W, alpha, A_final = ctx.saved_tensors
        C, N, R = Uc.shape[-2], Uc.shape[2], ctx.R
        G6, W6 = _groups(to_chunks(d_alpha, C), R), _groups(W, R)
        a = []  # a_t = A_t g_t, the groups' A_c rebuilt by the forward's downdates
        for j in range(R):
            a.append(_apply_inverses(G6[:, :, :, j], A, W6[:, :, :, j]))
            if j < R - 1:
                A = A - W6[:, :, :, j].transpose(-1, -2) @ W6[:, :, :, j]
        a = _ungroup(a, N)  # [B, H, N, C, d]
        F_T = torch.zeros_like(A_final) if d_A_final is None else -A_final @ _sym(d_A_final) @ A_final
        S, later = _later_pairs(a.transpose(-1, -2) @ alpha)  # from Σ_{t∈c} a_t α_tᵀ: [B, H, N, d, d]
        du = (Uc @ alpha.transpose(-1, -2)).triu() @ a + (Uc @ a.transpose(-1, -2)).triu() @ alpha
        du = -du - Uc @ later + 2 * Uc @ F_T[:, :, None]
        dM0 = -S.sum(2) / 2 + F_T
        return from_chunks(a, ctx.T), from_chunks(du, ctx.T), dM0, None


def chunk_vla_gate(
    k: torch.Tensor,
    u: torch.Tensor,
    initial_state: torch.Tensor | None,
    *,
    lam0: float,
    carry: int = CARRY,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same contract as `naive_vla_gate`; `carry`: chunks per `d × d` factorisation (1: every chunk its own)."""
    dt = compute_dtype(k)
    B, _, H, K = k.shape
    if initial_state is None:
        M0 = (lam0 * torch.eye(K, dtype=dt, device=k.device)).expand(B, H, K, K)
    else:
        M0 = torch.cholesky_inverse(torch.linalg.cholesky(initial_state.to(dt)))
    alpha, A_final = _ChunkGate.apply(F.normalize(k.to(dt), dim=-1), u.to(dt), M0, carry)
    return F.normalize(alpha, dim=-1), A_final
