"""Scratch (not part of the library): CCQ's row-wise per-chunk kernels (the output kernel and `rows_bwd`) with half a
chunk's rows a program or a whole chunk, one process, one GPU.

    git apply benchmarks/h200-2026-12-01/session31/rows.patch
    PYTHONPATH=. python benchmarks/h200-2026-12-01/session31/screen_rows.py [--out DIR] [--K 32,64,128]

Why: at K = 32 those kernels hold 255 registers a thread (two programs an SM, 12% occupancy) and wait on their
loads (Nsight Compute, session 25); their `[64, 64]` float32 score tiles are most of it. `rows.patch` (session 30)
lets each program take `BR` of a chunk's 64 rows (`output.row_block`): `[BR, 64]` tiles against the chunk's start
state and keys, which the chunk's other half reads too (from L2). Issue 5's goal 3 misses at K = 32 by about 0.13 ms
at 64K (CCQ-GDN's forward + backward 1.31 – 1.32× GDN), and the two kernels take 0.37 + 0.58 ms of CCQ's ~1.9.
Offline (sm_90, Triton 3.6, `scripts/compile_kernels.py`, the bf16 training launch at K = 32), registers / spill
bytes / SASS instructions a program: the output kernel whole on 2 warps (the library) 255 / 152 / 3,848, on 4 warps
218 / 0 / 2,016; half rows on 2 warps 203 / 0 / 2,272, on 4 warps 168 / 0 / 1,744. `rows_bwd` whole on 4 warps
255 / 120 / 2,544; half rows on 4 warps 254 / 24 / 2,792 (so about 2.2× the instructions a chunk: likely slower).

Settings `(OUTPUT_SPLIT_MAX_K, ROWS_SPLIT_MAX_K, OUTPUT_WARPS)`, the first the library's kernels (`screen_ccq.py`
drives): `ccq_query` forward, its forward + backward, CCQ on GDN forward + backward; and the gradients' largest
relative difference from the library's (the same sums, split over programs: 0 in the interpreter).
"""

from __future__ import annotations

from screen_ccq import ccq_calls, screen

from linattn.ops.ccq.triton import output

SETTINGS = ((0, 0, 2), (32, 0, 2), (32, 0, 4), (32, 32, 2), (128, 0, 2))
KNOBS = ("OUTPUT_SPLIT_MAX_K", "ROWS_SPLIT_MAX_K", "OUTPUT_WARPS")


def use(setting: tuple[int, int, int]) -> None:
    for name, value in zip(KNOBS, setting):
        setattr(output, name, value)


if __name__ == "__main__":
    screen("screen-rows", SETTINGS, use, ccq_calls, K="32,64,128")
