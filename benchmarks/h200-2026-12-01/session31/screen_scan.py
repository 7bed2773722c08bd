"""Scratch (not part of the library): the chunk scan's step (`SCAN_CB` chunks a step, `SCAN_BE` state entries a
program) for CCQ's running sums, one process, one GPU.

    PYTHONPATH=. python benchmarks/h200-2026-12-01/session31/screen_scan.py [--out DIR] [--K 32,128]

Why: at K = 32 a scan is latency-bound, not byte-bound. On the H200 at 64K (session 22's `bench profile`) each of
CCQ's two scans took 0.083 ms for 2 × 69 MB (1.7 TB/s), where at K = 128 one moves 2.2 GB at 3.7 TB/s. A program
walks its sequence's 1,024 chunks in 64 steps of 16, each waiting on the step before it through the carried state,
and at K = 32 there are only 5 programs a head (80 in all). Issue 5's goal 3 misses at K = 32 by CCQ-GDN's
forward + backward, 1.31 – 1.32× GDN from 16K against 1.30× (session 30's `vla-speed`: about 0.13 ms at 64K of
CCQ's ~2.0); the two scans are 0.17 ms of it. More chunks a step (fewer sequential steps) or fewer entries a
program (more programs) could cut that; at K = 128 neither should matter (the memory's pace).

For each setting `(CB, BE)` (`screen_ccq.py` drives): `state_fwd` alone (the sums and the scan), `ccq_query` forward
+ backward and CCQ on GDN forward + backward; and the gradients' largest relative difference from the library's
setting (the scan's sums are reordered, not changed).
"""

from __future__ import annotations

from screen_ccq import ccq_calls, screen

from linattn.ops.ccq.triton import state
from linattn.ops.delta_rule.triton.cumsum import chunk_layout

SETTINGS = [(16, 256), (32, 256), (64, 256), (16, 64), (32, 64), (64, 64), (32, 128)]  # (CB, BE); first: library


def use(setting: tuple[int, int]) -> None:
    state.SCAN_CB, state.SCAN_BE = setting


def calls(c) -> dict:
    layout = chunk_layout(1, c.q.shape[1], None, c.q.device)
    scan = {"state_fwd": lambda: state.state_fwd(c.k.detach(), c.g.detach(), None, False, layout, "tf32")}
    return scan | {name: fn for name, fn in ccq_calls(c).items() if name != "ccq fwd"}


if __name__ == "__main__":
    assert (state.SCAN_CB, state.SCAN_BE) == SETTINGS[0], "the screen's first setting must be the library's"
    screen("screen-scan", SETTINGS, use, calls, K="32,128")
