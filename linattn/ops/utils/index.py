"""Where a program's chunk or sequence lies in the `[B, T, H, ...]` layout, packed (`cu_seqlens`) or not, and its tile
of a `[K, V]` state.

Shared by every chunked kernel: packed batches give each chunk a row `(sequence, chunk within it)` of
`chunk_indices` and each sequence the row of its first chunk in `chunk_offsets` (see `layout.chunk_layout`).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT: tl.constexpr, IS_VARLEN: tl.constexpr):
    """Program chunk `i_t` of batch row `i_b` -> `(chunk within its sequence, global chunk row, first token of the
    sequence, sequence length)`. The global row indexes per-chunk buffers such as the states `h [B·NT or NT, ...]`."""
    if IS_VARLEN:
        i_tg = i_t.to(tl.int64)  # packed: the program's chunk index already is its row
        i_n = tl.load(chunk_indices + i_t * 2)
        i_t = tl.load(chunk_indices + i_t * 2 + 1)
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        T = tl.load(cu_seqlens + i_n + 1).to(tl.int64) - bos
    else:
        i_tg = i_b.to(tl.int64) * tl.cdiv(T, BT) + i_t
        bos = i_b.to(tl.int64) * T
    return i_t, i_tg, bos, T


@triton.jit
def sequence_coords(i_n, T, cu_seqlens, chunk_offsets, BT: tl.constexpr, IS_VARLEN: tl.constexpr):
    """Sequence `i_n` -> `(first token, length, number of chunks, row of its first chunk)`."""
    if IS_VARLEN:
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        T = tl.load(cu_seqlens + i_n + 1).to(tl.int64) - bos
        NT = tl.cdiv(T, BT)
        boh = tl.load(chunk_offsets + i_n).to(tl.int64)
    else:
        bos = i_n.to(tl.int64) * T
        NT = tl.cdiv(T, BT)
        boh = i_n.to(tl.int64) * NT
    return bos, T, NT, boh


@triton.jit
def state_tile(i_k, i_v, K, V, BK: tl.constexpr, BV: tl.constexpr):
    """Key block `i_k` and value block `i_v` of a `[K, V]` state -> `(o_k [BK], o_v [BV], m_k, m_v, m_h [BK, BV],
    o_h [BK, BV])`: the rows and columns, their masks, the tile's mask and its offsets inside one state."""
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    return o_k, o_v, m_k, m_v, m_k[:, None] & m_v[None, :], o_k[:, None] * V + o_v[None, :]
