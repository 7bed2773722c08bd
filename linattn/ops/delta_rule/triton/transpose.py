"""Each chunk's rows transposed, `[B, T, H, K]` -> `[B, NT, H, K, BT]`: for a pass that contracts over tokens.

The sequential passes multiply by a chunk's rows transposed at every step: the state backward's walk by `K̃_cᵀ`
(`K̃_cᵀ dU_c`), the state pass by `W_cᵀ` (`W_cᵀ U_c`), contractions over the chunk's tokens. The tensor cores take
float32 (tf32) operands only with the contracted dimension contiguous in shared memory, so with the rows stored
token by token (`[B, T, H, K]`) and fed from the load straight into the product, Triton copies the `[BT, K]` tile
in element by element, 4 bytes at a time, transposing on the way (64 copies per thread and step at K = 128). This
parallel kernel writes each chunk's rows transposed once, contiguous along the tokens, so that the pass reads them
in 16-byte pieces straight into the layout its product wants (the state pass's `W`; the backward's `K̃ᵀ` is written
in this layout by `recompute.py`, which computes `K̃`). At 64K tokens (bf16, H = 16, K = V = 128) it takes a quarter
off GDN's state backward (`python -m linattn.bench stages`) and two thirds off VLA's forward state pass, whose `α̂`
is float32 (`python -m linattn.bench profile --contenders "VLA triton"`).
Rows that are scaled or converted between the load and the product (a decay, 16-bit inputs) go through registers
anyway and are not copied. Rows past a sequence's end are zeros.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.utils.grid import cdiv, next_power_of_2
from linattn.ops.utils.index import chunk_coords
from linattn.ops.utils.layout import ChunkLayout


def chunk_transpose_ref(x: torch.Tensor, layout: ChunkLayout) -> torch.Tensor:
    """`x: [B, T, H, K]` -> `[B, NT, H, K, BT]`, chunk row `c` holding `x_cᵀ` (zeros past the sequence's end)."""
    B, _, H, K = x.shape
    out = x.new_zeros(B, layout.NT, H, K, layout.BT)
    for _, b, bos, eos, first in layout.sequences():
        for i, start in enumerate(range(bos, eos, layout.BT)):
            c = slice(start, min(start + layout.BT, eos))
            out[b, first + i, :, :, : c.stop - c.start] = x[b, c].permute(1, 2, 0)
    return out


@triton.jit
def load_chunk_transposed(x_t, row, o_k, m_k, o_i, K: tl.constexpr, BT: tl.constexpr):
    """`[BK, BT]` tile of `chunk_transpose`'s output at `row` (`(chunk row) · H + head`), float32 as stored: masked by
    its rows only (the columns past a sequence's end hold zeros), so that the copy goes in 16-byte pieces."""
    return tl.load(x_t + row * K * BT + o_k[:, None] * BT + o_i[None, :], mask=m_k[:, None], other=0)


@triton.jit(do_not_specialize=["T"])
def chunk_transpose_kernel(
    x,
    y,
    cu_seqlens,
    chunk_indices,
    T,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    IS_VARLEN: tl.constexpr,
):
    """One program per (key block, chunk, batch row · head)."""
    i_k, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    i_t, i_tg, bos, T = chunk_coords(i_t, i_b, T, cu_seqlens, chunk_indices, BT, IS_VARLEN)
    o_i = tl.arange(0, BT)
    o_k = i_k * BK + tl.arange(0, BK)
    m_t = o_i < T - i_t * BT
    m_k = o_k < K
    # [BT, BK] rows of the chunk, this head (0 past the sequence's end)
    b_x = tl.load(x + ((bos + i_t * BT) * H + i_h) * K + o_i[:, None] * (H * K) + o_k[None, :],
                  mask=m_t[:, None] & m_k[None, :], other=0)  # fmt: skip
    # [BK, BT] into the chunk's row, contiguous along the tokens
    tl.store(y + (i_tg * H + i_h) * K * BT + o_k[:, None] * BT + o_i[None, :], tl.trans(b_x), mask=m_k[:, None])


def chunk_transpose(x: torch.Tensor, layout: ChunkLayout) -> torch.Tensor:
    """`x: [B, T, H, K]` (contiguous) -> `[B, NT, H, K, BT]` in `x`'s dtype, as `chunk_transpose_ref`."""
    B, T, H, K = x.shape
    y = torch.empty(B, layout.NT, H, K, layout.BT, dtype=x.dtype, device=x.device)
    BK = min(64, max(16, next_power_of_2(K)))
    chunk_transpose_kernel[(cdiv(K, BK), layout.NT, B * H)](
        x, y, layout.cu_seqlens, layout.chunk_indices, T,
        H=H, K=K, BT=layout.BT, BK=BK, IS_VARLEN=layout.cu_seqlens is not None,
    )  # fmt: skip
    return y
