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

For each setting `(CB, BE)`: `state_fwd` alone (the sums and the scan), `ccq_query` forward + backward (decayed,
centred, bf16, B = 1, H = 16, unit keys, as `vla-speed`'s CCQ-GDN) and CCQ on GDN forward + backward, ms by
`triton.testing.do_bench`, two rounds, settings alternated within a round; and the gradients' largest relative
difference from the library's setting (the scan's sums are reordered, not changed).
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
from linattn.ops.ccq.triton import state
from linattn.ops.delta_rule.triton.cumsum import chunk_layout

SETTINGS = [(16, 256), (32, 256), (64, 256), (16, 64), (32, 64), (64, 64), (32, 128)]  # (CB, BE); first: library


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="16384,65536")
    parser.add_argument("--K", default="32,128")
    args = parser.parse_args()
    H, library = 16, (state.SCAN_CB, state.SCAN_BE)
    assert library == SETTINGS[0], f"the library's setting is {library}, the screen's first {SETTINGS[0]}"
    results = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("| K | T | call | round | " + " | ".join(f"CB {cb}, BE {be}" for cb, be in SETTINGS) + " |", flush=True)
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
            layout = chunk_layout(1, T, None, q.device)

            def ccq():
                return ccq_query(q, k, lam, g=g, normalize_keys=False, backend="triton")[0]

            def gdn(x):
                return delta_rule(x, k, v, beta=beta, g=g, backend="triton")[0]

            calls = {
                "state_fwd": lambda: state.state_fwd(k.detach(), g.detach(), None, False, layout, "tf32"),
                "ccq fwd+bwd": lambda: ccq().backward(dy),
                "ccq-gdn fwd+bwd": lambda: gdn(ccq()).backward(dy),
            }
            grads = {}
            for s in SETTINGS:
                state.SCAN_CB, state.SCAN_BE = s
                for x in (q, k, lam, g):
                    x.grad = None
                ccq().backward(dy)
                grads[s] = [x.grad.double() for x in (q, k, lam, g)]
            state.SCAN_CB, state.SCAN_BE = library
            diff = {
                f"{s}": max(((a - b).norm() / b.norm()).item() for a, b in zip(grads[s], grads[library])) for s in grads
            }
            print(f"# K = {K}, T = {T}: gradients' largest relative difference from {library}: {diff}", flush=True)
            for name, fn in calls.items():
                for r in range(2):
                    ms = {}
                    for s in SETTINGS:
                        state.SCAN_CB, state.SCAN_BE = s
                        ms[s] = do_bench(fn, grad_to_none=[q, k, v, lam, g], return_mode="median")
                    state.SCAN_CB, state.SCAN_BE = library
                    print(f"| {K} | {T} | {name} | {r} | " + " | ".join(f"{ms[s]:.3f}" for s in SETTINGS) + " |",
                          flush=True)  # fmt: skip
                    results.append({"K": K, "T": T, "call": name, "round": r, "ms": {f"{s}": ms[s] for s in SETTINGS}})
            results.append({"K": K, "T": T, "grad_diff": diff})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-scan.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
