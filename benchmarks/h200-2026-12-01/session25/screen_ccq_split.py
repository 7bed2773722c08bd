"""Scratch (not part of the library): CCQ's backward with the chunk's scores built once (`local_bwd` then, after the
state scan, `carry_bwd`: the library's) against twice (`old_local_bwd.py`: `rows_bwd` before the scan, `local_bwd`
after it, the library's kernels before this session), one process, one GPU.

    git show 1163c61:linattn/ops/ccq/triton/local_bwd.py > benchmarks/h200-2026-12-01/session25/old_local_bwd.py
    git apply benchmarks/h200-2026-12-01/session25/split.patch     # the one-build backward, as screened
    PYTHONPATH=. python benchmarks/h200-2026-12-01/session25/screen_ccq_split.py [--out DIR] [--K 32,64,128]

`ccq_query` alone (decayed, centred, bf16, B = 1, H = 16, unit keys) and CCQ on GDN (as `vla-speed`'s CCQ-GDN
contender), forward + backward, ms by `triton.testing.do_bench`, the two backwards alternated over three rounds
(`function.CCQTriton.backward` patched); GDN alone once; and the gradients' largest relative difference between them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from linattn.ops import ccq_query, delta_rule
from linattn.ops.ccq.triton import function
from linattn.ops.ccq.triton.state import state_bwd, state_fwd
from linattn.ops.delta_rule.triton.precision import grad_precision

_spec = importlib.util.spec_from_file_location("old_local_bwd", Path(__file__).with_name("old_local_bwd.py"))
old = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(old)


def old_backward(ctx, dy, dCt, dmt, dZt):
    """The backward before this session (training calls only: no initial or final state)."""
    q, k, lam, g = ctx.saved_tensors[:4]
    kept = ctx.saved_tensors[7:]  # the forward's chunk-start states (None where not kept)
    layout = ctx.layout
    dy = dy.to(q.dtype).contiguous()
    precision = grad_precision((q, k, dy), final_state_grad=False)
    h = tuple(kept) if kept[0] is not None else state_fwd(k, g, None, False, layout, precision)[0]
    rows, dlam = old.rows_bwd(q, k, lam, g, h, dy, ctx.centered, layout, precision)
    dh, _ = state_bwd(q, dy, g, rows, None, False, layout, precision)
    dq, dk, dg = old.local_bwd(q, k, g, h, dh, dy, rows, layout, precision)
    return dq, dk, dlam, dg, None, None, None, None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="8192,16384,65536")
    parser.add_argument("--K", default="32,64,128")
    args = parser.parse_args()
    H = 16
    new_backward = function.CCQTriton.backward
    backwards = {"once": new_backward, "twice": staticmethod(old_backward)}
    results = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("| K | T | call | round | scores once ms | twice ms | once / twice |\n|---:|---:|---|---:|---:|---:|---:|")
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

            grads = {}
            for name, bwd in backwards.items():
                function.CCQTriton.backward = bwd
                for x in params:
                    x.grad = None
                ccq().backward(dy)
                grads[name] = [x.grad.double() for x in (q, k, lam, g)]
            diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(grads["once"], grads["twice"]))
            print(f"# K = {K}, T = {T}: gradients' largest relative difference {diff:.2e}", flush=True)
            calls = {"ccq fwd+bwd": lambda: ccq().backward(dy), "ccq-gdn fwd+bwd": lambda: gdn(ccq()).backward(dy)}
            for call, fn in calls.items():
                for r in range(3):
                    ms = {}
                    for name, bwd in backwards.items():
                        function.CCQTriton.backward = bwd
                        ms[name] = do_bench(fn, warmup=5, rep=100, grad_to_none=params)
                    results.append({"K": K, "T": T, "call": call, "round": r, "ms": ms, "grad_diff": diff})
                    print(f"| {K} | {T} | {call} | {r} | {ms['once']:.3f} | {ms['twice']:.3f} | "
                          f"{ms['once'] / ms['twice']:.3f} |", flush=True)  # fmt: skip
            function.CCQTriton.backward = new_backward
            ms = do_bench(lambda: gdn(q).backward(dy), warmup=5, rep=100, grad_to_none=params)
            results.append({"K": K, "T": T, "call": "gdn fwd+bwd", "ms": ms})
            print(f"| {K} | {T} | gdn fwd+bwd | 0 | {ms:.3f} | | |", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-ccq-split.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
