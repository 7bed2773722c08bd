"""Scratch (not part of the library): CCQ's forward keeping its chunk-start states for the backward at every head
dim (`function.KEEP_STATES_MAX_K` raised from 32 to 256) against the library's recompute above K = 32, one process,
one GPU.

    PYTHONPATH=. python benchmarks/h200-2026-12-01/session26/screen_ccq_keep.py [--out DIR]

Why: above K = 32 the backward recomputes the states (B1: the sums and their scan, about 1.3 ms of CCQ-GDN's 25.0 at
64K, K = 128, session 22's profile), and at K = 128 CCQ's state traffic alone (about 14 GB a training step in float32
at 64K, H = 16: the terms written, scanned, read, in both directions) is 3.5 ms of the 4.6 that issue 5's goal 3
leaves CCQ beside our GDN. Keeping them costs `4 (K² + K + 1) / 64` bytes a token and head (1 KiB at K = 128: 1 GiB
at 64K, H = 16). CCQ alone and CCQ on GDN (as `vla-speed`'s CCQ-GDN: decayed, centred, bf16, B = 1, H = 16, unit
keys), forward + backward, `do_bench` ms, the two settings alternated over two rounds; each setting's peak memory
over the call; the gradients' largest relative difference (the same precision either way: expected 0).
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
from linattn.ops.ccq.triton import function

SETTINGS = {"recompute": 32, "keep": 256}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="16384,65536")
    parser.add_argument("--K", default="64,128")
    args = parser.parse_args()
    H = 16
    results = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("| K | T | call | round | keep ms | recompute ms | keep / recompute | peak GiB keep / recompute |")
    print("|---:|---:|---|---:|---:|---:|---:|---|")
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
            params = [q, k, v, lam, g]

            def ccq():
                return ccq_query(q, k, lam, g=g, normalize_keys=False, backend="triton")[0]

            def gdn(x):
                return delta_rule(x, k, v, beta=beta, g=g, backend="triton")[0]

            calls = {"ccq fwd+bwd": lambda: ccq().backward(dy), "ccq-gdn fwd+bwd": lambda: gdn(ccq()).backward(dy)}
            grads, peaks = {}, {}
            for name, limit in SETTINGS.items():
                function.KEEP_STATES_MAX_K = limit
                for x in params:
                    x.grad = None
                ccq().backward(dy)
                grads[name] = [x.grad.double() for x in (q, k, lam, g)]
                for call, fn in calls.items():
                    for x in params:
                        x.grad = None
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                    fn()
                    torch.cuda.synchronize()
                    peaks[name, call] = (torch.cuda.max_memory_allocated() - base) / 2**30
            diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(grads["keep"], grads["recompute"]))
            print(f"# K = {K}, T = {T}: the gradients' largest relative difference {diff:.2e}", flush=True)
            for call, fn in calls.items():
                for r in range(2):
                    ms = {}
                    for name, limit in SETTINGS.items():
                        function.KEEP_STATES_MAX_K = limit
                        ms[name] = do_bench(fn, warmup=5, rep=100, grad_to_none=params)
                    peak = {name: peaks[name, call] for name in SETTINGS}
                    results.append({"K": K, "T": T, "call": call, "round": r, "ms": ms, "peak_gib": peak, "diff": diff})
                    print(f"| {K} | {T} | {call} | {r} | {ms['keep']:.3f} | {ms['recompute']:.3f} | "
                          f"{ms['keep'] / ms['recompute']:.3f} | {peak['keep']:.2f} / {peak['recompute']:.2f} |",
                          flush=True)  # fmt: skip
            function.KEEP_STATES_MAX_K = SETTINGS["recompute"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-ccq-keep.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
