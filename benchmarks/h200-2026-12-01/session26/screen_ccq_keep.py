"""Scratch (not part of the library): CCQ's forward keeping its chunk-start states for the backward at every head
dim (`function.KEEP_STATES_MAX_K` raised from 32 to 256) against the library's recompute above K = 32, one process,
one GPU.

    PYTHONPATH=. python benchmarks/h200-2026-12-01/session26/screen_ccq_keep.py [--out DIR]

Why: above K = 32 the backward recomputes the states (B1: the sums and their scan, about 1.3 ms of CCQ-GDN's 25.0 at
64K, K = 128, session 22's profile), and at K = 128 CCQ's state traffic alone (about 14 GB a training step in float32
at 64K, H = 16: the terms written, scanned, read, in both directions) is 3.5 ms of the 4.6 that issue 5's goal 3
leaves CCQ beside our GDN. Keeping them costs `4 (K² + K + 1) / 64` bytes a token and head (1 KiB at K = 128: 1 GiB
at 64K, H = 16). CCQ on GDN with `vla-speed`'s own contender and inputs (bf16, B = 1, H = 16), forward + backward,
`do_bench` ms, the two settings alternated over two rounds; each setting's peak memory over the call; the gradients'
largest relative difference (the same precision either way: expected 0).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
from triton.testing import do_bench

from linattn.experiments import vla_speed
from linattn.ops.ccq.triton import function

SETTINGS = {"recompute": 32, "keep": 256}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="16384,65536")
    parser.add_argument("--K", default="64,128")
    args = parser.parse_args()
    config = vla_speed.PRESETS["cuda", False]
    ccq_gdn = next(c.run for c in vla_speed.CONTENDERS if c.name == vla_speed.CCQ_GDN)
    results = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("| K | T | round | keep ms | recompute ms | keep / recompute | peak GiB keep / recompute |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for K in map(int, args.K.split(",")):
        for T in map(int, args.lengths.split(",")):
            x = vla_speed.inputs(config, T, K, "cuda")
            params = list(x.values())
            dy = torch.randn_like(x["v"])

            def step():
                ccq_gdn(x).backward(dy)

            grads, peaks = {}, {}
            for name, limit in SETTINGS.items():
                function.KEEP_STATES_MAX_K = limit
                for p in params:
                    p.grad = None
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                step()
                torch.cuda.synchronize()
                peaks[name] = (torch.cuda.max_memory_allocated() - base) / 2**30
                grads[name] = [p.grad.double() for p in params if p.grad is not None]
            diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(grads["keep"], grads["recompute"]))
            print(f"# K = {K}, T = {T}: the gradients' largest relative difference {diff:.2e}", flush=True)
            for r in range(2):
                ms = {}
                for name, limit in SETTINGS.items():
                    function.KEEP_STATES_MAX_K = limit
                    ms[name] = do_bench(step, warmup=5, rep=100, grad_to_none=params)
                results.append({"K": K, "T": T, "round": r, "ms": ms, "peak_gib": peaks, "diff": diff})
                ratio = ms["keep"] / ms["recompute"]
                print(f"| {K} | {T} | {r} | {ms['keep']:.3f} | {ms['recompute']:.3f} | {ratio:.3f} "
                      f"| {peaks['keep']:.2f} / {peaks['recompute']:.2f} |", flush=True)  # fmt: skip
            function.KEEP_STATES_MAX_K = SETTINGS["recompute"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-ccq-keep.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
