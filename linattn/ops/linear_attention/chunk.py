"""Gated linear attention, chunkwise-parallel in PyTorch.

Within a chunk of `C` tokens with cumulative log-decay `G_t = Σ_{s≤t} g_s` (from the chunk start) and
start state `S_0`:

    O   = scale · ( (Q ⊙ e^G) S_0 + [ (Q Kᵀ) ⊙ D ] V ),     D_ts = e^{G_t − G_s} for s ≤ t, else 0
    S_C = e^{G_C} ⊙ S_0 + (K ⊙ e^{G_C − G})ᵀ V

Everything but the state hand-over between chunks is one batched matmul over all chunks. A per-channel
decay makes `D` depend on the key channel, so the intra-chunk scores are formed from the `[C, C, K]`
tensor of exact differences (never `e^{G}` and `e^{−G}` separately, which overflow for strong decay);
that is why per-channel gates use a smaller chunk.
"""

from __future__ import annotations

import torch

from linattn.ops.checks import compute_dtype
from linattn.ops.chunking import causal_mask, chunk_size, cumulative_log_decay, decay_matrix, from_chunks, to_chunks

CHUNK_SIZE = 64
CHUNK_SIZE_PER_CHANNEL = 16


def chunk_gated_linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor | None,
    initial_state: torch.Tensor | None,
    *,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same contract as `naive_gated_linear_attention`."""
    dt = compute_dtype(q)
    B, T, H, K = q.shape
    V = v.shape[-1]
    per_channel = g is not None and g.dim() == 4
    C = chunk_size(T, CHUNK_SIZE_PER_CHANNEL if per_channel else CHUNK_SIZE)
    q, k, v = (to_chunks(x.to(dt), C) for x in (q, k, v))  # [B, H, N, C, K|V]
    # a scalar decay's factors from float64 (`cumulative_log_decay`); a per-channel one's `[C, C, K]` tensor is K
    # times larger, so its factors stay in `dt`, as do no decay's (every factor exactly 1, nothing to cancel)
    if g is None:
        G = q.new_zeros(B, H, q.shape[2], C)  # [B, H, N, C]
    elif per_channel:
        G = to_chunks(g.to(dt), C).cumsum(3)  # [B, H, N, C, K]
    else:
        G = cumulative_log_decay(g, C)  # [B, H, N, C], float64

    # 1. intra-chunk scores
    if per_channel:
        diff = G[..., :, None, :] - G[..., None, :, :]  # [B, H, N, C, C, K]
        mask = causal_mask(C, q.device)[..., None]
        E = torch.where(mask, diff, torch.full_like(diff, float("-inf"))).exp()
        scores = torch.einsum("bhntk,bhnsk,bhntsk->bhnts", q, k, E)
        G_last = G[:, :, :, -1]  # [B, H, N, K]
        k_to_end = k * (G_last[:, :, :, None] - G).exp()  # [B, H, N, C, K]
        q_from_start = q * G.exp()
        chunk_decay = G_last.exp()[..., None]  # [B, H, N, K, 1]
    else:
        scores = (q @ k.transpose(-1, -2)) * decay_matrix(G).to(dt)  # [B, H, N, C, C]
        G_last = G[:, :, :, -1:]  # [B, H, N, 1]
        k_to_end = k * (G_last - G).exp().to(dt)[..., None]
        q_from_start = q * G.exp().to(dt)[..., None]
        chunk_decay = G_last.exp().to(dt)[..., None]  # [B, H, N, 1, 1]

    # 2. each chunk's contribution to the state, then the sequential hand-over
    dS = k_to_end.transpose(-1, -2) @ v  # [B, H, N, K, V]
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.to(dt)
    starts = []
    # unbind once rather than index per chunk: one backward node instead of N zero-filled ones
    for decay_c, dS_c in zip(chunk_decay.unbind(2), dS.unbind(2)):
        starts.append(S)
        S = decay_c * S + dS_c
    S0 = torch.stack(starts, dim=2)  # [B, H, N, K, V]: state at each chunk's start

    # 3. outputs
    o = scale * (q_from_start @ S0 + scores @ v)  # [B, H, N, C, V]
    return from_chunks(o, T), S
