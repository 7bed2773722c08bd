"""The two-key gated delta rule, chunkwise-parallel in PyTorch (UT transform).

Write the recurrence as `S_t = γ_t S_{t-1} + w_t u_tᵀ` with pseudo-values `u_t = β_t (v_t − γ_t S_{t-1}ᵀ k_t)`.
Within a chunk of `C` tokens with start state `S_0`, cumulative decay `Γ_t = Π_{s≤t} γ_s` and
`D_ts = Γ_t / Γ_s` (s ≤ t):

    (I + strict_tril(diag(β) (K Wᵀ ⊙ D))) U = diag(β) V − diag(β Γ) K S_0          (1)
    S_C = Γ_C S_0 + (W ⊙ Γ_C / Γ)ᵀ U                                               (2)
    O   = scale · ( diag(Γ) Q S_0 + tril(Q Wᵀ ⊙ D) U )                               (3)

(1) is a unit lower-triangular system. Its two right-hand sides are solved for every chunk at once
(`Ṽ = T β V`, `K̃ = T β Γ K` with `T` the inverse of the system's matrix), so the only sequential part is
the hand-over `U_c = Ṽ_c − K̃_c S_c`, `S_{c+1}` by (2): two small matmuls per chunk. (3) is batched again.
With `W = K` this is DeltaNet / Gated DeltaNet's WY algorithm; the two-key case (VLA) swaps `K Kᵀ` for
`K Wᵀ` and `Kᵀ` for `Wᵀ` in the update, at the same cost.
"""

from __future__ import annotations

import torch

from linattn.ops.checks import compute_dtype
from linattn.ops.chunking import causal, chunk_size, cumulative_log_decay, decay_matrix, from_chunks, to_chunks

CHUNK_SIZE = 64


def chunk_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor | None,
    beta: torch.Tensor | None,
    g: torch.Tensor | None,
    initial_state: torch.Tensor | None,
    *,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same contract as `naive_delta_rule`."""
    dt = compute_dtype(q)
    B, T, H, K = q.shape
    V = v.shape[-1]
    C = chunk_size(T, CHUNK_SIZE)
    q, k, v = (to_chunks(x.to(dt), C) for x in (q, k, v))  # [B, H, N, C, K|V]
    w = k if w is None else to_chunks(w.to(dt), C)
    # Padding tokens have k = w = v = 0, so they write nothing whatever their β.
    if beta is not None:
        beta = to_chunks(beta.to(dt), C)[..., None]  # [B, H, N, C, 1]
    # Without a gate every decay factor is 1 and is skipped (VLA, DeltaNet).
    G = None if g is None else cumulative_log_decay(g, C)  # [B, H, N, C], float64
    D = None if G is None else decay_matrix(G).to(dt)  # [B, H, N, C, C]

    # (1) for all chunks: unit lower-triangular system, two right-hand sides
    kw = k @ w.transpose(-1, -2)  # [C, K] @ [K, C] -> [C, C]
    L = torch.eye(C, dtype=dt, device=q.device) + causal(kw if beta is None else beta * kw, D, strict=True)
    eye = torch.eye(C, dtype=dt, device=q.device).expand_as(L)
    T_inv = torch.linalg.solve_triangular(L, eye, upper=False, unitriangular=True)  # [C, C]
    if beta is not None:
        T_inv = T_inv * beta.transpose(-1, -2)  # right-multiplied by diag(β)
    v_tilde = T_inv @ v  # [C, C] @ [C, V]
    k_tilde = T_inv @ (k if G is None else G.exp().to(dt)[..., None] * k)  # [C, C] @ [C, K]: T β Γ K

    # (2) sequential hand-over between chunks
    if G is None:
        w_to_end, chunk_decay = w, torch.ones_like(q[:, :, :, :1, :1])
    else:
        G_last = G[..., -1:]  # [B, H, N, 1]
        w_to_end = w * (G_last - G).exp().to(dt)[..., None]  # [B, H, N, C, K]
        chunk_decay = G_last.exp().to(dt)[..., None]  # [B, H, N, 1, 1]
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(dt)
    starts, pseudo_values = [], []
    # unbind once rather than index per chunk: one backward node instead of N zero-filled ones
    per_chunk = zip(v_tilde.unbind(2), k_tilde.unbind(2), w_to_end.transpose(-1, -2).unbind(2), chunk_decay.unbind(2))
    for v_c, k_c, w_c, decay_c in per_chunk:
        U = v_c - k_c @ S  # [C, V] - [C, K] @ [K, V]
        starts.append(S)
        pseudo_values.append(U)
        S = (S if G is None else decay_c * S) + w_c @ U  # [K, C] @ [C, V]
    S0 = torch.stack(starts, dim=2)  # [B, H, N, K, V]
    U = torch.stack(pseudo_values, dim=2)  # [B, H, N, C, V]

    # (3) outputs
    q_start = q if G is None else q * G.exp().to(dt)[..., None]  # diag(Γ) Q
    o = scale * (q_start @ S0 + causal(q @ w.transpose(-1, -2), D) @ U)
    return from_chunks(o, T), S
