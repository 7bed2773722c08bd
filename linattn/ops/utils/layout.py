"""The chunk grid of a batch, shared by every chunked kernel: `chunk_layout` builds it once per call.

Chunks are `BT = 64` tokens long and never straddle a packed sequence: sequence `n` of a packed batch owns chunks
`chunk_offsets[n] … chunk_offsets[n+1] − 1`, its last chunk possibly short.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from linattn.ops.utils.grid import cdiv

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
