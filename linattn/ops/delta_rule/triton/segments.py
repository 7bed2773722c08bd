"""The state pass in segments that run in parallel (intra-card context parallelism), for grids that leave SMs idle.

Chunk `c`'s hand-over (`state.py`) is affine in the state: `h_{c+1} = M_c h_c + W̃_cᵀ Ũ_c` with the `K × K`
transition `M_c = Γ_C I − W̃_cᵀ K̃_c` (`Γ_C I` alone without the erase term). Cut a sequence into segments of whole
chunks; over segment `s` the chunks compose to `h_end = P_s h_start + E_s`, `P_s = Π_c M_c` and `E_s` the segment's
end state from zero. So the pass runs in three steps:

    A  every segment at once, from zero: `E_s` (its `V` columns), and `P_s` (the same walk on `K` identity columns
       with `Ũ = 0`)                                                                          [S, H, K, V + K]
    B  along each sequence's segments: `h_start(s + 1) = P_s h_start(s) + E_s` from the initial state    (PyTorch)
    C  every segment at once again, from its `h_start`: the chunk states and pseudo-values as the one-pass walk

A and C each walk `T / S` chunks, in `S` times the programs. They do `2V + K` columns of work where one pass does
`V`, so segments can pay only where the one pass's programs leave most SMs idle. The passes take one segment (the
one pass) unless the caller names more: on an H100 at B = 1, T = 32K (`python -m linattn.bench stages --lengths
32768 --heads H --segments S`), segments lose to it at H ≥ 4 and at best tie it at H ≤ 2 (four segments), because
what the shorter walks save, step B's few PyTorch launches a segment and the host's work a call spend again. B as
one kernel (a program walking each sequence's segments) is what would let them pay.

The state backward (`state_bwd.py`) walks from the last chunk: `dh_c = M_cᵀ dh_{c+1} + (E_c − K̃_cᵀ dU^loc_c)`, affine
in the end state's gradient with the transposed transitions, so the same three steps run with the segments taken
from each sequence's end (`Segments.reverse`): A gives each segment's `dh` at its start from zero at its end and
its `Π M_cᵀ`, B carries the gradient from the final state's back, C walks each segment from its end's gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from linattn.ops.utils.grid import cdiv
from linattn.ops.utils.layout import ChunkLayout


@dataclass(frozen=True)
class Segments:
    """Segments of whole chunks of a `ChunkLayout`'s sequences, laid out as packed sequences for the state kernel.

    `cu: [S + 1]` int32 token offsets in the flattened `[B·T]` row, `chunk_offsets: [S]` int32 the chunk row (of
    `h: [B·NT, ...]`) of each segment's first chunk; `order[j]` / `reverse[j]`: `(segments, sequences)` long index
    tensors of every sequence's `j`-th segment from its start / from its end, for step B."""

    cu: torch.Tensor
    chunk_offsets: torch.Tensor
    order: list[tuple[torch.Tensor, torch.Tensor]]
    reverse: list[tuple[torch.Tensor, torch.Tensor]]

    @property
    def count(self) -> int:
        return self.chunk_offsets.numel()


def split(layout: ChunkLayout, per_sequence: int, device: torch.device) -> Segments:
    """Each sequence of `layout` in `per_sequence` segments of near-equal chunk counts (fewer where it has fewer
    chunks). The sequences tile the flattened row, so the segments' starts and the row's end are their offsets."""
    starts, offsets, order, reverse = [], [], [], []
    for n, b, bos, eos, first in layout.sequences():
        chunks = cdiv(eos - bos, layout.BT)
        m = max(1, min(per_sequence, chunks))
        for j in range(m):
            c0 = chunks * j // m
            for lists, rank in ((order, j), (reverse, m - 1 - j)):
                while len(lists) <= rank:
                    lists.append(([], []))
                lists[rank][0].append(len(offsets))
                lists[rank][1].append(n)
            starts.append(b * layout.T + bos + c0 * layout.BT)
            offsets.append(b * layout.NT + first + c0)
    # every index in one host-to-device copy (a copy per small tensor would cost more than a segment's walk), from
    # pinned memory without blocking: a copy from pageable memory waits for the GPU's queue to drain
    flat = [*starts, layout.B * layout.T, *offsets]
    sizes = [len(starts) + 1, len(offsets)]
    for lists in (order, reverse):
        for pair in lists:
            flat += pair[0] + pair[1]
            sizes += [len(pair[0]), len(pair[1])]
    host = torch.tensor(flat, dtype=torch.long)
    pieces = (host.pin_memory() if device.type == "cuda" else host).to(device, non_blocking=True).split(sizes)
    indices = [tuple(pieces[i : i + 2]) for i in range(2, len(pieces), 2)]
    return Segments(pieces[0].int(), pieces[1].int(), indices[: len(order)], indices[len(order) :])


def combine(
    P: torch.Tensor,
    E: torch.Tensor,
    initial_state: torch.Tensor | None,
    order: list[tuple[torch.Tensor, torch.Tensor]],
    N: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step B: `P: [S, H, K, K]`, `E: [S, H, K, V]` (step A's, float32) and the initial state `[N, H, K, V]` (or 0)
    -> every segment's start state `[S, H, K, V]` and every sequence's final state `[N, H, K, V]`, float32, taking
    the segments in `order` (`Segments.order`; the backward's walk, whose state is a gradient carried from the
    end, `Segments.reverse`). The products in float64: they are small, and a float32 matmul would follow the
    process's TF32 setting."""
    _, H, K, V = E.shape
    h = torch.zeros(N, H, K, V, dtype=torch.float64, device=E.device)
    if initial_state is not None:
        h.copy_(initial_state)
    starts = torch.empty_like(E)
    for seg, seq in order:  # every sequence's j-th segment at once
        starts[seg] = h[seq].float()
        h[seq] = torch.matmul(P[seg].double(), h[seq]) + E[seg]
    return starts, h.float()


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
    starts, end = combine(P, E, start, seg.reverse if reverse else seg.order, layout.N)
    walk(seg.cu, seg.chunk_offsets, seg.count, V, starts, None, store_chunks=True)
    return end


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
