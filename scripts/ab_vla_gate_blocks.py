"""A/B of the VLA gate kernel's blocking on a GPU: tokens per chunk (`CHUNK`) and per group (`GROUP_TOKENS`) of
`linattn/ops/vla/triton.py`, timing `vla(backend="triton")` forward and forward + backward on `vla-speed`'s inputs
(bf16, B = 1, H = 16, K = V) with `triton.testing.do_bench` (median), every setting in one process.

    python scripts/ab_vla_gate_blocks.py OUT.json [--chunks 16,32] [--groups 512,1024] [--lengths 4096,16384,65536]

Its run on the H200 (2026-11-29): benchmarks/h200-2026-11-29/memory/ab-chunk-group.json.
"""

from __future__ import annotations

import argparse
import importlib
import json

import torch
from triton.testing import do_bench

from linattn.bench.timing import forward_backward
from linattn.experiments.vla_speed import SpeedConfig, _vla, inputs
from linattn.io import write_atomic


def ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="JSON file for the rows")
    parser.add_argument("--chunks", type=ints, default=[16, 32])
    parser.add_argument("--groups", type=ints, default=[512, 1024])
    parser.add_argument("--lengths", type=ints, default=[4096, 16384, 65536])
    parser.add_argument("--K", type=ints, default=[32, 128])
    args = parser.parse_args()
    gate = importlib.import_module("linattn.ops.vla.triton")  # `linattn.ops.vla` the attribute is the function
    rows = []
    for K in args.K:
        for T in args.lengths:
            x = inputs(SpeedConfig(Ts=(T,), head_dims=(K,), H=16, dtype="bfloat16"), T, K, "cuda")

            def fn():
                return _vla(x, "triton")

            step = forward_backward(fn, list(x.values()))
            for C in args.chunks:
                for G in args.groups:
                    gate.CHUNK, gate.GROUP_TOKENS = C, G
                    fwd = do_bench(torch.no_grad()(fn), return_mode="median")
                    rows.append(
                        {"K": K, "T": T, "C": C, "G": G, "fwd": fwd, "fwdbwd": do_bench(step, return_mode="median")}
                    )
                    print(rows[-1], flush=True)
    write_atomic(args.out, json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
