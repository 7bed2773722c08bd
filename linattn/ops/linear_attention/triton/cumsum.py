"""Stage 1: the chunk-local cumulative log-decay of a per-channel `g`, `G_t = Σ_{s ≤ t in its chunk} g_s`."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.delta_rule.triton.cumsum import ChunkLayout
from linattn.ops.delta_rule.triton.index import chunk_coords


@triton.jit(do_not_specialize=["T"])
def gla_cumsum_kernel(
    g,
    G,
    cu_seqlens,
    chunk_indices,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    """One program per (key block, chunk, batch row · head): `[BT, BK]` of `g` -> its cumsum down the tokens."""
    i_k, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, _, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)
    o_t = i_t * BT + tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    m = (o_t < T)[:, None] & (o_k < K)[None, :]
    o = ((bos + o_t) * H + i_h)[:, None] * K + o_k[None, :]
    # [BT, BK]
    b_g = tl.load(g + o, mask=m, other=0).to(tl.float32)
    tl.store(G + o, tl.cumsum(b_g, axis=0), mask=m)


def gla_cumsum(g: torch.Tensor, layout: ChunkLayout) -> torch.Tensor:
    """`g: [B, T, H, K]` (any float dtype) -> float32 chunk-local cumsum `G: [B, T, H, K]`."""
    B, T, H, K = g.shape
    BK = min(64, max(16, triton.next_power_of_2(K)))
    G = torch.empty(B, T, H, K, dtype=torch.float32, device=g.device)
    grid = (triton.cdiv(K, BK), layout.NT, B * H)
    gla_cumsum_kernel[grid](
        g, G, layout.cu_seqlens, layout.chunk_indices, T, H=H, K=K, BT=layout.BT, BK=BK,
        IS_VARLEN=layout.cu_seqlens is not None,
    )  # fmt: skip
    return G
