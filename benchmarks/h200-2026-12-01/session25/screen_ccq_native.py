"""Scratch (not part of the library): CCQ's raw score products (`Q Kᵀ`, `dY Kᵀ` in `output.chunk_scores`) on the
bfloat16 tensor cores as loaded (`"native"`) against one tf32 pass on float32 copies (the library's before this
session), one process, one GPU.

    git apply benchmarks/h200-2026-12-01/session25/native.patch
    PYTHONPATH=. python benchmarks/h200-2026-12-01/session25/screen_ccq_native.py [--out DIR]

`ccq_query` alone (decayed, centred, bf16, B = 1, H = 16, unit keys) and CCQ on GDN, ms by
`triton.testing.do_bench`, the two alternated over two rounds; the gradients' and outputs' largest relative difference.
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
from linattn.ops.ccq.triton import local_bwd, output
from linattn.ops.delta_rule.triton.precision import raw_precision

SETTINGS = {"native": output.score_precision, "tf32": raw_precision}


def use(name: str) -> None:
    output.score_precision = local_bwd.score_precision = SETTINGS[name]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="16384,65536")
    parser.add_argument("--K", default="32,128")
    args = parser.parse_args()
    H = 16
    results = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("| K | T | call | round | native ms | tf32 ms | native / tf32 |\n|---:|---:|---|---:|---:|---:|---:|")
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

            outs = {}
            for name in SETTINGS:
                use(name)
                for x in params:
                    x.grad = None
                y = ccq()
                y.backward(dy)
                outs[name] = [y.double()] + [x.grad.double() for x in (q, k, lam, g)]
            diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(outs["native"], outs["tf32"]))
            print(f"# K = {K}, T = {T}: output's and gradients' largest relative difference {diff:.2e}", flush=True)
            calls = {
                "ccq fwd": ccq,
                "ccq fwd+bwd": lambda: ccq().backward(dy),
                "ccq-gdn fwd+bwd": lambda: gdn(ccq()).backward(dy),
            }
            for call, fn in calls.items():
                for r in range(2):
                    ms = {}
                    for name in SETTINGS:
                        use(name)
                        ms[name] = do_bench(fn, warmup=5, rep=100, grad_to_none=params)
                    results.append({"K": K, "T": T, "call": call, "round": r, "ms": ms, "diff": diff})
                    print(f"| {K} | {T} | {call} | {r} | {ms['native']:.3f} | {ms['tf32']:.3f} | "
                          f"{ms['native'] / ms['tf32']:.3f} |", flush=True)  # fmt: skip
            use("native")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-ccq-native.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
