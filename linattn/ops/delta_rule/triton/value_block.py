"""How many of the state's value columns each program of a state walk owns (`state.py`, `state_bwd.py`).

A walk's programs run over (value block, sequence · head), each carrying a `[K, BV]` tile of the state through its
sequence's chunks in order, one program an SM (their pipelined operands fill its shared memory). A chunk step is
bound by the latency of its two dependent products, not by their size, so a wider block costs a step far less than
its width (`STEP_COST`: 1.25× at twice the columns, 1.94× at four times) while it divides the programs, and with
them the `K̃` and `w` tiles that every value block of a head reads again: where the narrowest blocks need several
waves of programs to cover the grid (a full GPU: many sequences or heads), fewer, wider ones finish sooner. The
walk's time is about

    waves(BV) · chunks · step(BV),     waves(BV) = ⌈sequence-heads · ⌈V / BV⌉ / SMs⌉,

and `value_block` takes the width that makes it least (the narrowest among equals). A single sequence-head or a few
(`B = 1`) fill at most one wave at any width, so they keep the narrowest, as the segments (`segments.py`) do.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from linattn.ops.utils.grid import cdiv, next_power_of_2

# a chunk step's time at each width over its time at 16, for the forward walk and the backward's: one wave at every
# width at B = 1, H = 16, K = V = 128, so the walks' times compare their steps (`python -m linattn.bench stages
# --lengths 65536 --value-block W`)
STEP_COST = {16: 1.0, 32: 1.25, 64: 1.94}
STEP_COST_BWD = {16: 1.0, 32: 1.09}
# the largest `[K, BV]` float32 tile a program carries (64 registers a thread at 4 warps: 64 columns at K = 128, 32
# at 256); the backward's walk keeps two more of its tiles live (`E_c`, read a step ahead), so half that (32 columns
# at K = 128, 16 at 256)
MAX_TILE = 8192
MAX_TILE_BWD = 4096
# the most bytes a wide launch's pipelined operands may take in shared memory (all its stages): those of the forward
# walk at BV = 64 on bfloat16 inputs with float32 `K̃` (192 KB), the most measured to fit Hopper's 227 KB beside the
# kernel's other buffers. VLA's float32 `K̃` and `α̂` take 240 KB at 64 (Triton refused the launch) and 216 KB
# at 32, so its walk keeps 16
MAX_PIPELINED = 3 * 64 * (128 * (4 + 2) + 64 * 4)
BLOCK_V = 16  # the narrowest value block, and the only one off CUDA
# a width every walk takes (or the widest allowed below it) instead of `value_block`'s choice: `bench stages
# --value-block` sets it (None: chosen)
FORCED: int | None = None


def value_block(
    sequence_heads: int,
    K: int,
    V: int,
    device: torch.device,
    pipelined: Callable[[int], int],
    *,
    wide: bool,
    backward: bool = False,
) -> int:
    """The value-block width of a walk over `sequence_heads` sequence-heads of `[K, V]` states on `device`:
    16 off CUDA or without `wide` (launches with no registers to spare: three-pass `tf32x3` products, whose wider
    tiles have not been measured); else, of the widths of `STEP_COST` (`STEP_COST_BWD` for the `backward` walk) that
    keep its tile within `MAX_TILE`, its `pipelined(BV)` bytes of operands within `MAX_PIPELINED` and are no wider
    than the value dim's power of two, the one that makes the least `waves · step`. `FORCED`, where set, overrides
    all but those limits."""
    costs = STEP_COST_BWD if backward else STEP_COST
    max_tile = MAX_TILE_BWD if backward else MAX_TILE
    BK = max(16, next_power_of_2(K))
    fits = [w for w in costs if w == BLOCK_V or (BK * w <= max_tile and w // 2 < V and pipelined(w) <= MAX_PIPELINED)]
    if FORCED is not None:
        return max(w for w in fits if w <= max(FORCED, BLOCK_V))
    if device.type != "cuda" or not wide:
        return BLOCK_V
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return min(fits, key=lambda w: (cdiv(sequence_heads * cdiv(V, w), sms) * costs[w], w))
