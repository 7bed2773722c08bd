"""Scratch (not part of the library): CCQ's kernels on chunks of 32 or 64 (the library's) tokens, one process,
one GPU.

    git apply benchmarks/h200-2026-12-01/session25/chunk.patch     # the `function.chunk_tokens` hook patched below
    PYTHONPATH=. python benchmarks/h200-2026-12-01/session25/screen_ccq_chunk.py [--out DIR] [--K 32,64,128]

`ccq_query` alone (decayed, centred, bf16, B = 1, H = 16, unit keys) and CCQ on GDN (`ccq_query` then `delta_rule`
on the same keys, `λ` = `β`, as `vla-speed`'s CCQ-GDN contender) and GDN alone, forward and forward + backward,
ms by `triton.testing.do_bench`, the chunk lengths alternated over two rounds (`function.chunk_tokens` patched);
and the gradients' largest relative difference from the 64-token chunks'.
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

CHUNKS = {32: (32, 64), 64: (32, 64), 128: (32, 64)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="8192,16384,65536")
    parser.add_argument("--K", default="32,64,128")
    args = parser.parse_args()
    H = 16
    results = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("| K | T | call | round | " + " | ".join(f"BT={bt} ms" for bt in (32, 64)) + " |", flush=True)
    print("|---:|---:|---|---:|---:|---:|", flush=True)
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

            calls = {
                "ccq fwd": lambda: ccq(),
                "ccq fwd+bwd": lambda: ccq().backward(dy),
                "ccq-gdn fwd": lambda: gdn(ccq()),
                "ccq-gdn fwd+bwd": lambda: gdn(ccq()).backward(dy),
                "gdn fwd": lambda: gdn(q),
                "gdn fwd+bwd": lambda: gdn(q).backward(dy),
            }
            grads = {}
            for bt in CHUNKS[K]:
                function.chunk_tokens = lambda K, bt=bt: bt
                for x in params:
                    x.grad = None
                ccq().backward(dy)
                grads[bt] = [x.grad.double() for x in (q, k, lam, g)]
            diff = {bt: max(((a - b).norm() / b.norm()).item() for a, b in zip(grads[bt], grads[64])) for bt in grads}
            print(f"# K = {K}, T = {T}: gradients' largest relative difference from BT = 64: {diff}", flush=True)
            for name, fn in calls.items():
                for r in range(1 if name.startswith("gdn") else 2):
                    ms = {}
                    for bt in (64,) if name.startswith("gdn") else CHUNKS[K]:
                        function.chunk_tokens = lambda K, bt=bt: bt
                        ms[bt] = do_bench(fn, warmup=5, rep=100, grad_to_none=params)
                    results.append({"K": K, "T": T, "call": name, "round": r, "ms": ms, "grad_diff": diff})
                    cells = " | ".join(f"{ms[bt]:.3f}" if bt in ms else "" for bt in (32, 64))
                    print(f"| {K} | {T} | {name} | {r} | {cells} |", flush=True)
            function.chunk_tokens = lambda K: 64
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-ccq-chunk.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
