"""Scratch (not part of the library): CCQ's two per-chunk backward kernels (`rows_bwd`, `local_bwd`) with one program a
chunk (the library's) against programs that loop over chunks, their loop pipelined or not (`persistent.patch`:
`local_bwd.PROGRAMS_PER_SM`, `local_bwd.PIPELINE`), one process, one GPU.

    git apply benchmarks/h200-2026-12-01/session25/persistent.patch
    PYTHONPATH=. python benchmarks/h200-2026-12-01/session25/screen_ccq_persistent.py [--out DIR]

`ccq_query` alone (decayed, centred, bf16, B = 1, H = 16, unit keys) and CCQ on GDN, forward + backward, ms by
`triton.testing.do_bench`, the settings alternated over two rounds; the gradients' largest difference from the
library's setting.
"""

from __future__ import annotations

import argparse
import json
import os
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from linattn.ops import ccq_query, delta_rule
from linattn.ops.ccq.triton import local_bwd

SETTINGS = [(None, 1), (2, 1), (2, 2), (4, 2), (2, 3), (8, 2)]  # (programs an SM, pipeline stages)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="16384,65536")
    parser.add_argument("--K", default="32,128")
    args = parser.parse_args()
    H = 16
    results = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("| K | T | call | round | " + " | ".join(f"{p} a SM, {s} st." for p, s in SETTINGS) + " |", flush=True)
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
            params = [q, k, v, lam, g]

            def ccq():
                return ccq_query(q, k, lam, g=g, normalize_keys=False, backend="triton")[0]

            def gdn(x):
                return delta_rule(x, k, v, beta=beta, g=g, backend="triton")[0]

            grads, ok = {}, []
            for setting in SETTINGS:
                local_bwd.PROGRAMS_PER_SM, local_bwd.PIPELINE = setting
                for x in params:
                    x.grad = None
                try:
                    ccq().backward(dy)
                except Exception:  # a setting Triton cannot build is reported and skipped
                    print(f"# {setting}: {traceback.format_exc(limit=1)}", flush=True)
                    continue
                ok.append(setting)
                grads[setting] = [x.grad.double() for x in (q, k, lam, g)]
            base = grads[SETTINGS[0]]
            diff = {str(s): max((a - b).abs().max().item() for a, b in zip(grads[s], base)) for s in ok}
            print(f"# K = {K}, T = {T}: gradients' largest difference from the library's setting: {diff}", flush=True)
            calls = {"ccq fwd+bwd": lambda: ccq().backward(dy), "ccq-gdn fwd+bwd": lambda: gdn(ccq()).backward(dy)}
            for call, fn in calls.items():
                for r in range(2):
                    ms = {}
                    for setting in ok:
                        local_bwd.PROGRAMS_PER_SM, local_bwd.PIPELINE = setting
                        ms[setting] = do_bench(fn, warmup=5, rep=100, grad_to_none=params)
                    results.append({"K": K, "T": T, "call": call, "round": r, "ms": {str(s): m for s, m in ms.items()},
                                    "grad_diff": diff})  # fmt: skip
                    cells = " | ".join(f"{ms[s]:.3f}" if s in ms else "—" for s in SETTINGS)
                    print(f"| {K} | {T} | {call} | {r} | {cells} |", flush=True)
            local_bwd.PROGRAMS_PER_SM, local_bwd.PIPELINE = SETTINGS[0]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-ccq-persistent.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
