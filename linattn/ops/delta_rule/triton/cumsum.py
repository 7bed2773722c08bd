"""Stage 1 of the chunked forward: the chunk grid shared by every stage, and the chunk-local cumulative log-decay.

`G_t = Σ_{s ≤ t, s in t's chunk} g_s` (float32), restarted at every chunk, so that inside a chunk `Γ_t = exp(G_t)`
and `D_ts = exp(G_t − G_s)`. Chunks are `BT = 64` tokens long and never straddle a packed sequence: sequence `n`
of a packed batch owns chunks `chunk_offsets[n] … chunk_offsets[n+1] − 1`, its last chunk possibly short.

The backward's last stage is the transpose of this one: `dg_s = Σ_{t ≥ s, t in s's chunk} dG_t`, the reverse
chunk-local cumsum (`reverse=True`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from linattn.ops.delta_rule.triton.index import chunk_coords
from linattn.ops.grid import cdiv, next_power_of_2

CHUNK = 64


@dataclass(frozen=True)
class ChunkLayout:
    """Where the chunks of a batch lie; built once per call by `chunk_layout`, read by every stage.

    A kernel over chunks runs one program per `(chunk, ...)`: without `cu_seqlens` there are `NT = ceil(T / BT)`
    chunks per batch row; with it (`B == 1`) `NT` is the total over the packed sequences and program `i` reads
    its sequence and its chunk within that sequence from `chunk_indices[i]`. Per-chunk tensors (the chunk-start
    states) are laid out `[B, NT, ...]` in both cases, so chunk `i` of batch row `b` is row `b * NT + i`.
    """

    B: int
    T: int
    N: int  # sequences: B, or len(cu_seqlens) - 1
    NT: int  # chunk rows per batch row
    BT: int
    bounds: tuple[int, ...]  # host copy of cu_seqlens, or (0, T)
    cu_seqlens: torch.Tensor | None  # int32 [N + 1]
    chunk_indices: torch.Tensor | None  # int32 [NT, 2]: (sequence, chunk within the sequence)
    chunk_offsets: torch.Tensor | None  # int32 [N + 1]: first chunk row of each sequence

    def sequences(self) -> list[tuple[int, int, int, int, int]]:
        """`(n, b, bos, eos, first_chunk)` of every sequence: state index, batch row, token span, chunk row."""
        if self.cu_seqlens is None:
            return [(b, b, 0, self.T, 0) for b in range(self.B)]
        starts = [0]
        for bos, eos in itertools.pairwise(self.bounds):
            starts.append(starts[-1] + cdiv(eos - bos, self.BT))
        return [(n, 0, self.bounds[n], self.bounds[n + 1], starts[n]) for n in range(self.N)]


def chunk_layout(B: int, T: int, cu_seqlens: torch.Tensor | None, device: torch.device, BT: int = CHUNK) -> ChunkLayout:
    """The chunk grid of a `[B, T, ...]` batch, or of the `N` sequences packed in it by `cu_seqlens` (`B == 1`).

    Reads `cu_seqlens` on the host once (one device sync) to size the grid.
    """
    if cu_seqlens is None:
        NT = cdiv(T, BT)
        return ChunkLayout(
            B=B, T=T, N=B, NT=NT, BT=BT, bounds=(0, T), cu_seqlens=None, chunk_indices=None, chunk_offsets=None
        )
    bounds = tuple(int(x) for x in cu_seqlens.tolist())
    rows, offsets = [], [0]
    for n, (bos, eos) in enumerate(itertools.pairwise(bounds)):
        count = cdiv(eos - bos, BT)
        rows += [(n, i) for i in range(count)]
        offsets.append(offsets[-1] + count)

    def as_int32(x: list) -> torch.Tensor:
        return torch.tensor(x, dtype=torch.int32, device=device)

    return ChunkLayout(
        B=B,
        T=T,
        N=len(bounds) - 1,
        NT=len(rows),
        BT=BT,
        bounds=bounds,
        cu_seqlens=as_int32(bounds),
        chunk_indices=as_int32(rows),
        chunk_offsets=as_int32(offsets),
    )


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
