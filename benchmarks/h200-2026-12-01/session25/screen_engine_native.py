"""Scratch (not part of the library): the delta-rule engine's and CCQ's raw products (`K Wᵀ`, `Q Wᵀ`, `Q Kᵀ`) of
16-bit inputs on the 16-bit tensor cores as loaded (`"native"`, `engine_native.patch`) against one tf32 pass on
float32 copies (`precision.raw_precision`), one process, one GPU.

    git apply benchmarks/h200-2026-12-01/session25/engine_native.patch   # on 181da4d
    PYTHONPATH=. python benchmarks/h200-2026-12-01/session25/screen_engine_native.py [--out DIR]

GDN and CCQ-GDN forward + backward (bf16, B = 1, H = 16, unit keys), ms by `triton.testing.do_bench`, the two
alternated over two rounds; the outputs' and gradients' largest relative difference.
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
from linattn.ops.ccq.triton import local_bwd as ccq_local
from linattn.ops.ccq.triton import output as ccq_output
from linattn.ops.delta_rule.triton import local_bwd, output, precision, state_bwd, wy

MODULES = (wy, output, state_bwd, local_bwd, ccq_output, ccq_local)
SETTINGS = {"native": precision.raw_operands, "tf32": lambda device, *dtypes: precision.raw_precision(*dtypes)}


def use(name: str) -> None:
    for m in MODULES:
        m.raw_operands = SETTINGS[name]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--cases", default="128:16384,128:65536,32:65536")
    args = parser.parse_args()
    H = 16
    results = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("| K | T | call | round | native ms | tf32 ms | native / tf32 |\n|---:|---:|---|---:|---:|---:|---:|")
    for case in args.cases.split(","):
        K, T = map(int, case.split(":"))
        gen = torch.Generator(device="cuda").manual_seed(0)

        def rand(*shape):
            return torch.randn(*shape, device="cuda", generator=gen).bfloat16().requires_grad_()

        q, v = rand(1, T, H, K), rand(1, T, H, K)
        k = F.normalize(torch.randn(1, T, H, K, device="cuda", generator=gen), dim=-1).bfloat16().requires_grad_()
        g = (-0.1 * torch.rand(1, T, H, device="cuda", generator=gen)).requires_grad_()
        beta = torch.rand(1, T, H, device="cuda", generator=gen).requires_grad_()
        dy = torch.randn(1, T, H, K, device="cuda", generator=gen).bfloat16()
        params = [q, k, v, g, beta]

        def gdn(x):
            return delta_rule(x, k, v, beta=beta, g=g, backend="triton")[0]

        def ccq():
            return ccq_query(q, k, beta, g=g, normalize_keys=False, backend="triton")[0]

        outs = {}
        for name in SETTINGS:
            use(name)
            for x in params:
                x.grad = None
            o = gdn(ccq())
            o.backward(dy)
            outs[name] = [o.double()] + [x.grad.double() for x in params]
        diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(outs["native"], outs["tf32"]))
        print(f"# K = {K}, T = {T}: output's and gradients' largest relative difference {diff:.2e}", flush=True)
        calls = {"gdn fwd+bwd": lambda: gdn(q).backward(dy), "ccq-gdn fwd+bwd": lambda: gdn(ccq()).backward(dy)}
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
    (args.out / "screen-engine-native.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
