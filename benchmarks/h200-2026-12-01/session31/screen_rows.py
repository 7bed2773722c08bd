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

Settings `(OUTPUT_SPLIT_MAX_K, ROWS_SPLIT_MAX_K, OUTPUT_WARPS)`, the first the library's kernels: `ccq_query`
forward, its forward + backward (decayed, centred, bf16, B = 1, H = 16, unit keys, as `vla-speed`'s CCQ-GDN), CCQ on
GDN forward + backward, ms by `triton.testing.do_bench`, two rounds, settings alternated within a round; and the
gradients' largest relative difference from the library's (the same sums, split over programs: 0 in the interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from linattn.ops import ccq_query, delta_rule
from linattn.ops.ccq.triton import output

SETTINGS = ((0, 0, 2), (32, 0, 2), (32, 0, 4), (32, 32, 2), (128, 0, 2))
KNOBS = ("OUTPUT_SPLIT_MAX_K", "ROWS_SPLIT_MAX_K", "OUTPUT_WARPS")


def use(setting: tuple[int, int, int]) -> None:
    for name, value in zip(KNOBS, setting):
        setattr(output, name, value)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="16384,65536")
    parser.add_argument("--K", default="32,64,128")
    args = parser.parse_args()
    H, library = 16, SETTINGS[0]
    results = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("| K | T | call | round | " + " | ".join(f"{s}" for s in SETTINGS) + " |", flush=True)
    print("|---:|---:|---|---:|" + "---:|" * len(SETTINGS), flush=True)
    for K in map(int, args.K.split(",")):
        for T in map(int, args.lengths.split(",")):
            gen = torch.Generator(device="cuda").manual_seed(0)

            def rand(*shape):
                return torch.randn(*shape, device="cuda", generator=gen).bfloat16().requires_grad_()

            q, v = rand(1, T, H, K), rand(1, T, H, K)
            k = F.normalize(torch.randn(1, T, H, K, device="cuda", generator=gen), dim=-1).bfloat16().requires_grad_()
            g = (-0.1 * torch.rand(1, T, H, device="cuda", generator=gen)).requires_grad_()
            lam = beta = torch.rand(1, T, H, device="cuda", generator=gen).requires_grad_()
            dy = torch.randn(1, T, H, K, device="cuda", generator=gen).bfloat16()

            def ccq():
                return ccq_query(q, k, lam, g=g, normalize_keys=False, backend="triton")[0]

            def gdn(x):
                return delta_rule(x, k, v, beta=beta, g=g, backend="triton")[0]

            calls = {
                "ccq fwd": lambda: ccq(),
                "ccq fwd+bwd": lambda: ccq().backward(dy),
                "ccq-gdn fwd+bwd": lambda: gdn(ccq()).backward(dy),
            }
            grads = {}
            for s in SETTINGS:
                use(s)
                for x in (q, k, lam, g):
                    x.grad = None
                ccq().backward(dy)
                grads[s] = [x.grad.double() for x in (q, k, lam, g)]
            use(library)
            diff = {
                f"{s}": max(((a - b).norm() / b.norm()).item() for a, b in zip(grads[s], grads[library])) for s in grads
            }
            print(f"# K = {K}, T = {T}: gradients' largest relative difference from {library}: {diff}", flush=True)
            for name, fn in calls.items():
                for r in range(2):
                    ms = {}
                    for s in SETTINGS:
                        use(s)
                        ms[s] = do_bench(fn, grad_to_none=[q, k, v, lam, g], return_mode="median")
                    use(library)
                    print(f"| {K} | {T} | {name} | {r} | " + " | ".join(f"{ms[s]:.3f}" for s in SETTINGS) + " |",
                          flush=True)  # fmt: skip
                    results.append({"K": K, "T": T, "call": name, "round": r, "ms": {f"{s}": ms[s] for s in SETTINGS}})
            results.append({"K": K, "T": T, "grad_diff": diff})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-rows.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
