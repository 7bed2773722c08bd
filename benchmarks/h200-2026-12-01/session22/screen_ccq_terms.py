"""Scratch (not part of the library): CCQ's backward with the state terms formed by the rows kernel
(`state.TERMS_IN_ROWS_MAX_K = 32`, the library's choice) against their own launch (0), one process, one GPU.

    PYTHONPATH=. python benchmarks/h200-2026-12-01/session22/screen_ccq_terms.py [--out DIR]

`ccq_query` alone (decayed, centred, bf16, B = 1, H = 16, unit keys) and CCQ on GDN (`ccq_query` then `delta_rule`
on the same keys, `λ` = `β`, as `vla-speed`'s CCQ-GDN contender), forward + backward, ms by
`triton.testing.do_bench`, the two settings alternated over three rounds; and the gradients' relative difference
between them. Then `ccq_query` alone with the scan over chunks (`state.SCAN_CB`, `state.SCAN_BE`) on other chunks a
step and entries a program.
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
from linattn.ops.ccq.triton import function, state


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="16384,65536")
    parser.add_argument("--K", type=int, default=32)
    args = parser.parse_args()
    K, H = args.K, 16
    rows = []
    scan_setting = state.SCAN_CB, state.SCAN_BE
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, K = V = {K}", flush=True)
    print("| T | call | round | terms in rows ms | own launch ms | ratio |\n|---:|---|---:|---:|---:|---:|")
    for T in map(int, args.lengths.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(0)

        def rand(*shape, scale=1.0):
            return (scale * torch.randn(*shape, device="cuda", generator=gen)).bfloat16().requires_grad_()

        q, v = rand(1, T, H, K), rand(1, T, H, K)
        k = F.normalize(torch.randn(1, T, H, K, device="cuda", generator=gen), dim=-1).bfloat16().requires_grad_()
        g = (-0.1 * torch.rand(1, T, H, device="cuda", generator=gen)).requires_grad_()
        lam = beta = torch.rand(1, T, H, device="cuda", generator=gen).requires_grad_()
        dy = torch.randn(1, T, H, K, device="cuda", generator=gen).bfloat16()

        # as `vla-speed`'s CCQ-GDN: unit keys shared with GDN, λ = GDN's β
        def ccq_alone():
            y, _ = ccq_query(q, k, lam, g=g, normalize_keys=False, backend="triton")
            y.backward(dy)

        def ccq_gdn():
            y, _ = ccq_query(q, k, lam, g=g, normalize_keys=False, backend="triton")
            o, _ = delta_rule(y, k, v, beta=beta, g=g, backend="triton")
            o.backward(dy)

        grads = {}
        for setting in (32, 0):
            function.TERMS_IN_ROWS_MAX_K = setting
            for x in (q, k, lam, g):
                x.grad = None
            ccq_alone()
            grads[setting] = [x.grad.double() for x in (q, k, lam, g)]
        diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(grads[32], grads[0]))
        print(f"# T = {T}: gradients' largest relative difference between the settings {diff:.1e}", flush=True)
        for call, fn in (("ccq", ccq_alone), ("ccq-gdn", ccq_gdn)):
            for r in range(3):
                ms = {}
                for setting in (32, 0):
                    function.TERMS_IN_ROWS_MAX_K = setting
                    ms[setting] = do_bench(fn, warmup=5, rep=100, grad_to_none=[q, k, v, lam, g])
                rows.append({"T": T, "call": call, "round": r, "rows_ms": ms[32], "own_ms": ms[0], "grad_diff": diff})
                print(f"| {T} | {call} | {r} | {ms[32]:.3f} | {ms[0]:.3f} | {ms[32] / ms[0]:.3f} |", flush=True)
        function.TERMS_IN_ROWS_MAX_K = 32
        # the scan over chunks (`ccq_scan_kernel`, two launches a training step): chunks a step, entries a program
        for cb, be in ((16, 256), (32, 256), (64, 256), (16, 128), (32, 128)):
            state.SCAN_CB, state.SCAN_BE = cb, be
            ms = do_bench(ccq_alone, warmup=5, rep=100, grad_to_none=[q, k, lam, g])
            rows.append({"T": T, "call": "ccq", "scan_cb": cb, "scan_be": be, "ms": ms})
            print(f"# T = {T}: ccq forward + backward with the scan on {cb} chunks a step, {be} entries a program: "
                  f"{ms:.3f} ms", flush=True)  # fmt: skip
        state.SCAN_CB, state.SCAN_BE = scan_setting
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-ccq-terms.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
