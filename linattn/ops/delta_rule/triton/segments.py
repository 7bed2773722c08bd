"""The state pass in segments that run in parallel (intra-card context parallelism), for grids that leave SMs idle.

Chunk `c`'s hand-over (`state.py`) is affine in the state: `h_{c+1} = M_c h_c + W̃_cᵀ Ũ_c` with the `K × K`
transition `M_c = Γ_C I − W̃_cᵀ K̃_c` (`Γ_C I` alone without the erase term). Cut a sequence into segments of whole
chunks; over segment `s` the chunks compose to `h_end = P_s h_start + E_s`, `P_s = Π_c M_c` and `E_s` the segment's
end state from zero. So the pass runs in three steps:

    A  every segment at once, from zero: `E_s` (its `V` columns), and `P_s` (the same walk on `K` identity columns
       with `Ũ = 0`)                                                                          [S, H, K, V + K]
    B  along each sequence's segments: `h_start(s + 1) = P_s h_start(s) + E_s` from the initial state (one launch)
    C  every segment at once again, from its `h_start`: the chunk states and pseudo-values as the one-pass walk

A and C each walk `T / S` chunks, in `S` times the programs. They do `2V + K` columns of work where one pass does
`V`, so segments pay only where the one pass's programs leave most SMs idle: `segment_count` chooses them from the
sequence-heads, the shortest sequence and the SM count. On an H100 at K = V = 128 (`python -m linattn.bench stages
--lengths 65536 --heads H --segments S`) the walks were fastest with as many segments as fill the SMs once with
the one pass's programs (16 at one sequence-head, 8 at two, 4 at four), and lost to the one pass from eight
sequence-heads on, where fewer than four segments fit.

The state backward (`state_bwd.py`) walks from the last chunk: `dh_c = M_cᵀ dh_{c+1} + (E_c − K̃_cᵀ dU^loc_c)`, affine
in the end state's gradient with the transposed transitions, so the same three steps run with the segments taken
from each sequence's end (`combine(reverse=True)`): A gives each segment's `dh` at its start from zero at its end and
its `Π M_cᵀ`, B carries the gradient from the final state's back, C walks each segment from its end's gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from linattn.ops.utils.grid import cdiv, next_power_of_2
from linattn.ops.utils.index import state_tile
from linattn.ops.utils.layout import ChunkLayout

MAX_SEGMENTS = 16  # a sequence's segments at most: step B's sequential steps grow with them
MIN_CHUNKS = 96  # a segment's chunks at least (6,144 tokens): below, their host work outweighed the shorter walks
MIN_GAIN = 4  # segments a sequence needs before they pay: A and C do 2V + K columns where the one pass does V
# a count every chosen walk takes instead of `segment_count`'s: `bench stages --segments` sets it to time a count end
# to end (None: chosen)
FORCED: int | None = None


@dataclass(frozen=True)
class Segments:
    """Segments of whole chunks of a `ChunkLayout`'s sequences, laid out as packed sequences for the state kernel.

    `cu: [S + 1]` int32 token offsets in the flattened `[B·T]` row, `chunk_offsets: [S]` int32 the chunk row (of
    `h: [B·NT, ...]`) of each segment's first chunk, `first: [N + 1]` int32 the first segment of each sequence (a
    sequence's segments are consecutive, in order), for step B."""

    cu: torch.Tensor
    chunk_offsets: torch.Tensor
    first: torch.Tensor

    @property
    def count(self) -> int:
        return self.chunk_offsets.numel()


def split(layout: ChunkLayout, per_sequence: int, device: torch.device) -> Segments:
    """Each sequence of `layout` in `per_sequence` segments of near-equal chunk counts (fewer where it has fewer
    chunks). The sequences tile the flattened row, so the segments' starts and the row's end are their offsets."""
    starts, offsets, first = [], [], [0]
    for _, b, bos, eos, chunk in layout.sequences():
        chunks = cdiv(eos - bos, layout.BT)
        m = max(1, min(per_sequence, chunks))
        for j in range(m):
            c0 = chunks * j // m
            starts.append(b * layout.T + bos + c0 * layout.BT)
            offsets.append(b * layout.NT + chunk + c0)
        first.append(len(offsets))
    # every index in one host-to-device copy (a copy per small tensor would cost more than a segment's walk), from
    # pinned memory without blocking: a copy from pageable memory waits for the GPU's queue to drain
    host = torch.tensor([*starts, layout.B * layout.T, *offsets, *first], dtype=torch.int32)
    cu, chunk_offsets, first_segment = (
        (host.pin_memory() if device.type == "cuda" else host)
        .to(device, non_blocking=True)
        .split([len(starts) + 1, len(offsets), len(first)])
    )
    return Segments(cu, chunk_offsets, first_segment)


@triton.jit
def combine_kernel(
    P,
    E,
    h0,
    starts,
    ht,
    first,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BC: tl.constexpr,
    BV: tl.constexpr,
    USE_H0: tl.constexpr,
    REVERSE: tl.constexpr,
):
    """One program per (value block, sequence · head) walks the sequence's segments (from its last with `REVERSE`):
    each segment's start state is stored, then `h ← P_s h + E_s`. `P_s h` is summed over `BC`-row blocks of `h`
    read back from the start just stored (a `[BK, BK]` transition would not fit in registers at `K = 256`), in
    true float32 (`ieee`: the composed transitions carry no tf32 rounding)."""
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_n, i_h = i_nh // H, i_nh % H
    s0 = tl.load(first + i_n)
    count = tl.load(first + i_n + 1) - s0

    o_c = tl.arange(0, BC)
    o_k, o_v, m_k, m_v, m_h, o_h = state_tile(0, i_v, K, V, BK, BV)

    # [BK, BV] state tile, float32
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_H0:
        b_h += tl.load(h0 + i_nh.to(tl.int64) * K * V + o_h, mask=m_h, other=0).to(tl.float32)
    for j in range(0, count):
        if REVERSE:
            i_s = s0 + count - 1 - j
        else:
            i_s = s0 + j
        p_start = starts + (i_s * H + i_h).to(tl.int64) * K * V
        tl.store(p_start + o_h, b_h, mask=m_h)
        tl.debug_barrier()  # the start just stored is read back, by other threads, as P_s's operand
        b_h = tl.load(E + (i_s * H + i_h).to(tl.int64) * K * V + o_h, mask=m_h, other=0)
        p_P = P + (i_s * H + i_h).to(tl.int64) * K * K
        for c0 in range(0, BK, BC):
            m_c = c0 + o_c < K
            # [BK, BC] columns c0 … of P_s, [BC, BV] rows c0 … of the start state
            b_p = tl.load(p_P + o_k[:, None] * K + (c0 + o_c)[None, :], mask=m_k[:, None] & m_c[None, :], other=0)
            b_s = tl.load(p_start + (c0 + o_c)[:, None] * V + o_v[None, :], mask=m_c[:, None] & m_v[None, :], other=0)
            b_h += tl.dot(b_p, b_s, input_precision="ieee")
    tl.store(ht + i_nh.to(tl.int64) * K * V + o_h, b_h, mask=m_h)


def combine(
    P: torch.Tensor, E: torch.Tensor, initial_state: torch.Tensor | None, first: torch.Tensor, reverse: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step B: `P: [S, H, K, K]`, `E: [S, H, K, V]` (step A's, float32) and the initial state `[N, H, K, V]` (or 0)
    -> every segment's start state `[S, H, K, V]` and every sequence's final state `[N, H, K, V]`, float32, taking
    each sequence's segments (`Segments.first`) from its first, or (`reverse`: the backward's walk, whose state is a
    gradient carried from the end) from its last. One launch (`combine_kernel`)."""
    _, H, K, V = E.shape
    N = first.numel() - 1
    starts = torch.empty_like(E)
    end = torch.empty(N, H, K, V, dtype=torch.float32, device=E.device)
    BK = max(16, next_power_of_2(K))
    BV = 16
    combine_kernel[(cdiv(V, BV), N * H)](
        P, E, initial_state, starts, end, first, H=H, K=K, V=V, BK=BK, BC=min(32, BK), BV=BV,
        USE_H0=initial_state is not None, REVERSE=reverse, num_warps=4,
    )  # fmt: skip
    return starts, end


def segmented_walk(
    walk: Callable[..., None], layout: ChunkLayout, count: int, start: torch.Tensor | None, *, H: int, K: int, V: int,
    device: torch.device, reverse: bool = False,
) -> torch.Tensor:  # fmt: skip
    """Steps A – C with `walk(cu, chunk_offsets, N, columns, start, end, store_chunks=, transition=)` (one launch of a
    state kernel over packed sequences, from `start` or 0, the end states into `end`) on `count` segments a
    sequence, from each sequence's `start` state `[N, H, K, V]` (or 0); `reverse`: a walk from each sequence's end
    (the state backward's). Returns each sequence's state where the walk ends, `[N, H, K, V]` float32."""
    seg = split(layout, count, device)
    # A: each segment from zero, where it ends, and (on K identity columns, no input) its transition
    E = torch.empty(seg.count, H, K, V, dtype=torch.float32, device=device)
    P = torch.empty(seg.count, H, K, K, dtype=torch.float32, device=device)
    walk(seg.cu, seg.chunk_offsets, seg.count, V, None, E, store_chunks=False)
    with side_stream(device):  # the two walks of A are independent: at once, each on few SMs
        walk(seg.cu, seg.chunk_offsets, seg.count, K, None, P, store_chunks=False, transition=True)
    # B, then C: each segment again from its combined start, storing what the one pass stores
    starts, end = combine(P, E, start, seg.first, reverse)
    walk(seg.cu, seg.chunk_offsets, seg.count, V, starts, None, store_chunks=True)
    return end


def segment_count(layout: ChunkLayout, programs: int, device: torch.device) -> int:
    """Segments a sequence for a state walk whose one pass runs `programs` programs: 1 (the one pass) off CUDA, or
    where those programs already fill a quarter of the SMs; else as many as fill the SMs once, within
    `MAX_SEGMENTS` and `MIN_CHUNKS` chunks of the shortest sequence, or 1 if that leaves fewer than `MIN_GAIN`
    (`FORCED` instead, where set)."""
    if FORCED is not None:
        return FORCED
    if device.type != "cuda":
        return 1
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    if programs * MIN_GAIN > sms:  # the usual training shape, decided before a look at each sequence
        return 1
    shortest = min(cdiv(eos - bos, layout.BT) for _, _, bos, eos, _ in layout.sequences())
    count = min(MAX_SEGMENTS, sms // programs, shortest // MIN_CHUNKS)
    return count if count >= MIN_GAIN else 1


@contextmanager
def side_stream(device: torch.device):
    """Work queued inside runs beside the current stream's (CUDA; elsewhere in order), joined on exit."""
    if device.type != "cuda":
        yield
        return
    main, side = torch.cuda.current_stream(device), torch.cuda.Stream(device)
    side.wait_stream(main)
    with torch.cuda.stream(side):
        yield
    main.wait_stream(side)
