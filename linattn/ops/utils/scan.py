"""A scan over chunks of per-chunk rows: each chunk's term replaced, in place, by the running sum entering it.

For the chunks `c` of one sequence (in order, or from the last with `REVERSE`) with terms `d_c` and log-decays
`l_c` (0 without decay), from `x_in` (or 0):

    row c  ←  x_c,        x_{c+1} = exp(l_c) x_c + d_c,        x_0 = x_in

and the state after the last chunk is the final one. Recurrences of this shape (a state multiplied only by a scalar
per chunk, each chunk adding a term that does not depend on it) need no sequential chain of matrix products:
the terms are formed per chunk in parallel by the op's own kernel, and this scan carries them, elementwise in the
entries. A step takes `CB` chunks: with `L_j = l_1 + … + l_j` over the step, the state after chunk `j` is
`exp(L_j) x_in + Σ_{i ≤ j} exp(L_j − L_i) d_i`, one `[CB, CB] @ [CB, BE]` product of float32 FMAs (`ieee`).

Used by CCQ's running sums (`ccq/triton/state.py`, three buffers in one launch) and VLA's gate backward
(`vla/triton/penalty_grads.py`, the reverse sums of `Σ (a αᵀ + α aᵀ)`, through `chunk_scan`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from linattn.ops.utils.grid import cdiv
from linattn.ops.utils.index import sequence_coords
from linattn.ops.utils.layout import ChunkLayout

SCAN_CB = 16  # chunks per step
SCAN_BE = 256  # entries per program


@triton.jit
def scan_rows(x, x0, xt, log_decay, i_nh, i_h, boh, NT, o_e, m_e, H: tl.constexpr, E: tl.constexpr,
              CB: tl.constexpr, USE_G: tl.constexpr, USE_X0: tl.constexpr, STORE_XT: tl.constexpr,
              REVERSE: tl.constexpr):  # fmt: skip
    """Entries `o_e` (`[BE]`, mask `m_e`) of one sequence-head's rows `x [rows, H, E]` (float32, or bfloat16 rows
    summed in float32: the running state never passes through the rows' dtype), chunks `boh … boh + NT − 1`:
    each row's term is replaced by the running state that enters its chunk, from `x0 [N·H, E]` (or 0); the state
    after the last chunk goes to `xt` when `STORE_XT`. `REVERSE` walks the chunks from the last.

    A step of `CB` chunks `j` (in walk order) with terms `d_j`, log-decays `l_j` and `L_j = l_1 + … + l_j` leaves
    the state `x_j = exp(L_j) x_in + Σ_{i ≤ j} exp(L_j − L_i) d_i` after chunk `j`: one `[CB, CB] @ [CB, BE]`
    product (float32 FMAs, `ieee`)."""
    o_j = tl.arange(0, CB)
    # [CB, CB] the steps' lower triangle (i ≤ j)
    m_L = o_j[:, None] >= o_j[None, :]
    if USE_X0:
        b_x = tl.load(x0 + i_nh.to(tl.int64) * E + o_e, mask=m_e, other=0).to(tl.float32)
    else:
        b_x = tl.zeros_like(o_e).to(tl.float32)
    for i_c in range(0, NT, CB):
        # [CB] the step's chunks in walk order, and the rows of the chunks after them
        i_j = i_c + o_j
        m_j = i_j < NT
        if REVERSE:
            i_first = (boh + NT - 1 - i_c) * H + i_h
            i_row = i_first - o_j * H
            i_next = i_row - H
        else:
            i_first = (boh + i_c) * H + i_h
            i_row = i_first + o_j * H
            i_next = i_row + H
        # [CB, BE] the chunks' terms; [CB] the cumulative log-decay over the step (0 past the end)
        b_d = tl.load(x + i_row[:, None] * E + o_e[None, :], mask=m_j[:, None] & m_e[None, :], other=0).to(tl.float32)
        if USE_G:
            b_L = tl.cumsum(tl.load(log_decay + i_row, mask=m_j, other=0), axis=0)
        else:
            b_L = tl.zeros([CB], dtype=tl.float32)
        # [CB, CB] exp(L_j − L_i) on i ≤ j (masked before exp: above the diagonal the difference is positive)
        b_P = tl.exp(tl.where(m_L, b_L[:, None] - b_L[None, :], float("-inf")))
        # [CB, CB] @ [CB, BE] -> [CB, BE] the state after each chunk
        b_E = tl.exp(b_L)[:, None] * b_x[None, :] + tl.dot(b_P, b_d, input_precision="ieee")
        # the state entering the step to its first chunk's row, the state after chunk j to chunk j + 1's
        tl.store(x + i_first * E + o_e, b_x.to(x.dtype.element_ty), mask=m_e)
        m_next = ((o_j + 1 < CB) & (i_j + 1 < NT))[:, None] & m_e[None, :]
        tl.store(x + i_next[:, None] * E + o_e[None, :], b_E.to(x.dtype.element_ty), mask=m_next)
        # the last row: past the sequence's end every term is 0 and every decay 1, so that is the state after it
        b_x = tl.sum(tl.where((o_j == CB - 1)[:, None], b_E, 0.0), axis=0)
    if STORE_XT:
        tl.store(xt + i_nh.to(tl.int64) * E + o_e, b_x, mask=m_e)


@triton.jit(do_not_specialize=["T"])
def chunk_scan_kernel(
    x,
    log_decay,
    x0,
    xt,
    cu_seqlens,
    chunk_offsets,
    T,
    H: tl.constexpr,
    E: tl.constexpr,
    BT: tl.constexpr,
    BE: tl.constexpr,
    CB: tl.constexpr,
    USE_G: tl.constexpr,
    USE_X0: tl.constexpr,
    STORE_XT: tl.constexpr,
    IS_VARLEN: tl.constexpr,
    REVERSE: tl.constexpr,
):
    """One program per (block of `BE` entries, sequence · head)."""
    i_e, i_nh = tl.program_id(0), tl.program_id(1)
    i_n, i_h = i_nh // H, i_nh % H
    _, _, NT, boh = sequence_coords(i_n, T, cu_seqlens, chunk_offsets, BT, IS_VARLEN)
    o_e = i_e * BE + tl.arange(0, BE)
    scan_rows(x, x0, xt, log_decay, i_nh, i_h, boh, NT, o_e, o_e < E, H, E, CB, USE_G, USE_X0, STORE_XT, REVERSE)


def chunk_scan(
    x: torch.Tensor,
    log_decay: torch.Tensor | None,
    start: torch.Tensor | None,
    end: torch.Tensor | None,
    layout: ChunkLayout,
    reverse: bool,
) -> None:
    """`x: [B, NT, H, ...]` float32 or bfloat16 (contiguous; one row of entries per chunk and head, each its chunk's
    term, summed in float32) is
    replaced in place by the states entering the chunks, from `start: [N, H, ...]` (or 0); the state after the
    last chunk goes to `end` (same shape as `start`) when given. `log_decay: [B, NT, H]` float32 or None (no decay);
    `reverse`: from each sequence's last chunk to its first."""
    H, E = x.shape[2], x[0, 0, 0].numel()
    grid = (cdiv(E, SCAN_BE), layout.N * H)
    chunk_scan_kernel[grid](
        x, log_decay, start, end, layout.cu_seqlens, layout.chunk_offsets, layout.T,
        H=H, E=E, BT=layout.BT, BE=SCAN_BE, CB=SCAN_CB,
        USE_G=log_decay is not None, USE_X0=start is not None, STORE_XT=end is not None,
        IS_VARLEN=layout.cu_seqlens is not None, REVERSE=reverse, num_warps=4,
    )  # fmt: skip
