"""Scratch (not part of the library): CCQ's per-chunk kernels rewritten to hold fewer `[64, 64]` float32 tiles, with
those tiles on the 16-bit tensor cores or not, and ptxas's register cap (`maxnreg`) on each, against the library's;
one process, one GPU.

    rm -rf .variants/regs && mkdir -p .variants/regs && git archive HEAD linattn | tar -x -C .variants/regs
    git apply --directory=.variants/regs benchmarks/h200-2026-12-02/session32/regs.patch
    PYTHONPATH=.:benchmarks/h200-2026-12-01/session31 python benchmarks/h200-2026-12-02/session32/screen_regs.py

Why: at K = 32 the output kernel, `rows_bwd` and `local_bwd` hold 255 registers a thread (12% occupancy, waiting on
their loads: session 25's Nsight Compute) and take ~1.65 of CCQ's ~1.9 ms at 64K, where issue 5's goal 3 misses by
~0.13 ms. `regs.patch` (session 31):
- builds `W = (Q Kᵀ − ρ 1ᵀ) ⊙ D̃` and `P' = (s 1ᵀ ⊙ F + dr 1ᵀ) ⊙ D̃` without the tile `A = Q Kᵀ ⊙ D̃`, and `dG`'s
  `M = W ⊙ (s 1ᵀ ⊙ F + dr 1ᵀ) + diag(ρ dr + dz) D̃` from them (the same sums); `rows_bwd` forms `F = dY Kᵀ` after
  the row scalars that need only `Q Kᵀ`, so the two tiles are not live together;
- `SCORES_16`: in a bfloat16 call, multiplies `W` (forward) and `P'`, `W` (`local_bwd`) with the keys, queries and
  `diag(s) dY` on the 16-bit tensor cores, those tiles rounded to bfloat16, as fla does with its chunks' score tiles.
  DESIGN §4 holds: the one-pass training call (T = 1000 and 1500, K = 32 and 64, three seeds each; K = 128, T =
  1000, two seeds; the H200's arithmetic emulated in the interpreter, `precision_regs.py`) errs 0.99 – 1.08× the
  naive bfloat16 recurrence (`dk` the largest; 0.99 – 1.04× with `--off`; 2-core AMD EPYC, 2026-12-02);
- `OUTPUT_MAXNREG`, `ROWS_MAXNREG`, `LOCAL_MAXNREG`: a register cap per launch (None: none).
Offline (sm_90, Triton 3.6, 2026-12-02: `PYTHONPATH=DIR python scripts/compile_kernels.py --only ccq_
--record-python .venv/bin/python` from a Python with `triton==3.6.0`, DIR `.` for the library, `.variants/regs`, or a
copy of it with `SCORES_16 = False` in both modules; the bf16 training launches), registers / spill bytes / SASS
instructions at K = 32: output 255 / 140 / 3,688 (library) → 255 / 16 /
3,656 (rewrite) → 255 / 16 / 3,560 (`SCORES_16`); `rows_bwd` 255 / 120 / 2,504 → 255 / 0 / 2,432 (no 16-bit tile);
`local_bwd` 255 / 4 / 2,328 → 255 / 0 / 2,192 → 226 / 0 / 1,928. At K = 128 (no decay): output 4,160 → 3,688 SASS
with `SCORES_16`, `local_bwd` 2,384 → 2,040 (40 B of spills → 0, 96 → 72 KB of shared memory). A cap of 168
registers would let three four-warp programs share an SM in place of two, at the price of spills. The patch's
modules are loaded beside the library's, and each setting points `ccq/triton/function.py` at one pair of
launchers.

Settings: `library`, or `(OUTPUT_MAXNREG, ROWS_MAXNREG, LOCAL_MAXNREG, SCORES_16)` of the patched kernels.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from screen_ccq import ccq_calls, screen

from linattn.ops.ccq.triton import function, local_bwd, output

VARIANT = Path(".variants/regs/linattn/ops/ccq/triton")
SETTINGS = (
    "library",
    (None, None, None, False),
    (None, None, None, True),
    (None, None, 168, True),
    (None, 168, 168, True),
    (168, 168, 168, True),
    (None, 128, 128, True),
)


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"regs_{name}", VARIANT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


regs_output, regs_local_bwd = load("output"), load("local_bwd")


def use(setting) -> None:
    fwd, bwd = (output, local_bwd) if setting == "library" else (regs_output, regs_local_bwd)
    function.output_fwd, function.rows_bwd, function.local_bwd = fwd.output_fwd, bwd.rows_bwd, bwd.local_bwd
    if setting != "library":
        regs_output.OUTPUT_MAXNREG, regs_local_bwd.ROWS_MAXNREG, regs_local_bwd.LOCAL_MAXNREG, scores_16 = setting
        regs_output.SCORES_16 = regs_local_bwd.SCORES_16 = scores_16


if __name__ == "__main__":
    screen("screen-regs", SETTINGS, use, ccq_calls, K="32,64,128")
