"""Stage 1 of the chunked forward: the chunk-local cumulative log-decay, on the chunk grid of `utils/layout.py`.

`G_t = Σ_{s ≤ t, s in t's chunk} g_s` (float32), restarted at every chunk, so that inside a chunk `Γ_t = exp(G_t)`
and `D_ts = exp(G_t − G_s)`.

The backward's last stage is the transpose of this one: `dg_s = Σ_{t ≥ s, t in s's chunk} dG_t`, the reverse
chunk-local cumsum (`reverse=True`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.utils.grid import next_power_of_2
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import ChunkLayout


def chunk_cumsum_ref(g: torch.Tensor, layout: ChunkLayout, reverse: bool = False) -> torch.Tensor:
    """`[B, T, H]` -> chunk-local inclusive cumsum `[B, T, H]` (from the chunk's end if `reverse`), in float64."""
    G = torch.zeros_like(g, dtype=torch.float64)
    for _, b, bos, eos, _ in layout.sequences():
        for start in range(bos, eos, layout.BT):
            x = g[b, start : min(start + layout.BT, eos)].double()
            G[b, start : start + len(x)] = x.flip(0).cumsum(0).flip(0) if reverse else x.cumsum(0)
    return G


@triton.jit(do_not_specialize=["T"])
def chunk_cumsum_kernel(
    g,
    G,
    cu_seqlens,
    chunk_indices,
    T,
    H: tl.constexpr,
    BT: tl.constexpr,
    BH: tl.constexpr,
    REVERSE: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    """One program per (chunk, batch row) sums all heads at once: a `[BT, BH]` tile, scanned along time."""
    i_t, i_b = tl.program_id(0), tl.program_id(1)
    i_t, _, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)

    o_t = tl.arange(0, BT)
    o_h = tl.arange(0, BH)
    # tokens past the sequence's end load as 0 and are not stored
    m_g = (o_t < T - i_t * BT)[:, None] & (o_h < H)[None, :]
    # offsets from the chunk's first token; a token step is H elements
    o_g = (bos + i_t * BT) * H + o_t[:, None] * H + o_h[None, :]
    # [BT, BH]
    b_g = tl.load(g + o_g, mask=m_g, other=0).to(tl.float32)
    # the padding rows are zeros, so a reverse scan over the whole tile starts right at the last real token
    tl.store(G + o_g, tl.cumsum(b_g, axis=0, reverse=REVERSE), mask=m_g)


def chunk_cumsum(g: torch.Tensor, layout: ChunkLayout, reverse: bool = False) -> torch.Tensor:
    """`g: [B, T, H]` (any float dtype, contiguous) -> `G: [B, T, H]` float32, the chunk-local inclusive cumsum
    (summed from the chunk's end if `reverse`: the transpose of the forward cumsum, which the backward needs)."""
    B, T, H = g.shape
    G = torch.empty(B, T, H, dtype=torch.float32, device=g.device)
    grid = (layout.NT, B)
    chunk_cumsum_kernel[grid](
        g, G, layout.cu_seqlens, layout.chunk_indices, T,
        H=H, BT=layout.BT, BH=next_power_of_2(H), REVERSE=reverse, IS_VARLEN=layout.cu_seqlens is not None,
    )  # fmt: skip
    return G
