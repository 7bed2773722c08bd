"""VLA's write gate, chunk-parallel: a Cholesky per chunk instead of a token loop.

For chunk `c` with penalty rows `U_c` and unit keys `K̂_c` (`C × d`), and the inverse penalty at the chunk's
start `A_c = M_c⁻¹`, `M_c = M_0 + Σ_{c' < c} U_{c'}ᵀ U_{c'}` (`M_0 = λ0 I`, or `A_0⁻¹`):

    L Lᵀ = I + U_c A_c U_cᵀ                      (C × C Cholesky)
    W_c  = L⁻¹ U_c A_c                           (C × d)
    α_c  = K̂_c A_c − tril(K̂_c W_cᵀ) W_c          (row t is A_t k̂_t, A_t after token t's update)
    α̂   = rows of α_c normalised

Why: by Woodbury, `A_t = A_c − (U_{≤t} A_c)ᵀ (I + U_{≤t} A_c U_{≤t}ᵀ)⁻¹ (U_{≤t} A_c)`; the leading `t × t` block
of `L` is the Cholesky factor of the leading block of the Gram matrix, so `A_t = A_c − Σ_{s≤t} w_s w_sᵀ`
with `w_s` the rows of `W_c`. This equals the Sherman–Morrison token loop exactly.

Every chunk's `A_c` comes from its own `M_c` (a prefix sum of `d × d` Gram matrices, then a `d × d`
Cholesky), so no step depends on the previous chunk's result: the gate is parallel over chunks and its
rounding does not accumulate along the sequence the way repeated downdates `A ← A − WᵀW` would.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from linattn.ops.checks import compute_dtype
from linattn.ops.chunking import chunk_size, from_chunks, to_chunks

CHUNK_SIZE = 64


def chunk_vla_gate(
    k: torch.Tensor,
    u: torch.Tensor,
    initial_state: torch.Tensor | None,
    *,
    lam0: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same contract as `naive_vla_gate`."""
    dt = compute_dtype(k)
    B, T, H, K = k.shape
    C = chunk_size(T, CHUNK_SIZE)
    eye_d = torch.eye(K, dtype=dt, device=k.device)
    k_hat = to_chunks(F.normalize(k.to(dt), dim=-1), C)  # [B, H, N, C, d]; padded rows are 0
    u = to_chunks(u.to(dt), C)  # [B, H, N, C, d]; padded rows are 0 and add nothing to M

    # inverse penalty at each chunk's start: A_c = M_c⁻¹ (SPD, so through its Cholesky factor)
    if initial_state is None:
        M0 = (lam0 * eye_d).expand(B, H, K, K)
    else:
        M0 = torch.cholesky_inverse(torch.linalg.cholesky(initial_state.to(dt)))
    gram = u.transpose(-1, -2) @ u  # [B, H, N, d, d]
    M = M0[:, :, None] + gram.cumsum(2) - gram  # exclusive prefix sum over chunks
    A = torch.cholesky_inverse(torch.linalg.cholesky(M))  # [B, H, N, d, d]
    UA, KA = u @ A, k_hat @ A  # [B, H, N, C, d] each

    # Woodbury within the chunk
    L = torch.linalg.cholesky(torch.eye(C, dtype=dt, device=k.device) + UA @ u.transpose(-1, -2))  # [C, C]
    W = torch.linalg.solve_triangular(L, UA, upper=False)  # [C, d]
    alpha = KA - (k_hat @ W.transpose(-1, -2)).tril() @ W  # [C, d] - ([C, C] masked) @ [C, d]

    alpha_hat = F.normalize(from_chunks(alpha, T), dim=-1)  # [B, T, H, d]
    A_final = torch.cholesky_inverse(torch.linalg.cholesky(M0 + gram.sum(2)))
    return alpha_hat, A_final
