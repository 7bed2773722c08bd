"""Scratch (not part of the library): launch settings of VLA's gate-backward kernels (`vla/penalty_grads.py`: the
per-chunk pair sums, the reverse scan, the per-chunk `∂L/∂u`), one process, one GPU.

    PYTHONPATH=. python benchmarks/h200-2026-12-01/session26/screen_penalty.py [--out DIR]

Why: at 64K tokens, H = 16, d = 128 the two kernels took 2.13 + 3.44 ms of `vla`'s 42.5 ms forward + backward
(session 22's `bench profile`), several times what their bytes ask (the sums' 1 GiB written, scanned and read). Offline
(sm_90, Triton 3.6) the one-pass `∂L/∂u` launch at d = 128 asks 139 KB of shared memory (its two-step key loop
pipelined three stages deep), so one 8-warp program holds an SM; every program of a chunk (d / 32 of them) loads the
chunk's whole rows of `a`, `α` and forms the same `[64, 64]` scores.

Each setting runs the library's three launches with its own column block `BV`, warps and pipeline stages (and the
`∂L/∂u` kernel's key block `BK`), on bfloat16 `u` with the one-pass products of a training call; `do_bench` ms of
the three launches and of each kernel alone, two rounds alternated; the largest relative difference of `∂L/∂u`,
`∂L/∂M_0` from the library's launch.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

from linattn.ops.delta_rule.triton.cumsum import chunk_layout
from linattn.ops.delta_rule.triton.scan import chunk_scan
from linattn.ops.vla import penalty_grads as pg

# (name, pair sums {BV, num_warps, num_stages}, ∂L/∂u {BV, BK, num_warps, num_stages}); None: the library's
SETTINGS = [
    ("library", None, None),
    ("dU 1 stage", None, {"num_stages": 1}),
    ("dU 2 stages", None, {"num_stages": 2}),
    ("dU 4 warps", None, {"num_warps": 4}),
    ("dU 4 warps, 1 stage", None, {"num_warps": 4, "num_stages": 1}),
    ("dU BK = d", None, {"BK": 128}),
    ("BV 64", {"BV": 64}, {"BV": 64}),
    ("BV 64, dU 1 stage", {"BV": 64}, {"BV": 64, "num_stages": 1}),
    ("BV 128", {"BV": 128}, {"BV": 128}),
    ("BV 128, dU 1 stage", {"BV": 128}, {"BV": 128, "num_stages": 1}),
    ("sums 4 warps", {"num_warps": 4}, None),
]


def launcher(pair: dict | None, pen: dict | None):
    """`pg.triton_penalty_grads` (no `F_T`, one-pass products) with these launch settings; returns `(run, stages)`:
    `run(u, a, α̂, n) -> (du, dM0)`, and `stages(u, a, α̂, n)`, three closures timing each launch of the last slice."""

    def settings(D):
        base = {"BV": pg.BV, "num_warps": 4 if D <= 64 else 8}
        p = {**base, **(pair or {})}
        q = {**base, "BK": min(64, max(16, triton.next_power_of_2(D))), **(pen or {})}
        return p, q

    def slice_calls(u, a, alpha_hat, n, c0, c1, carry, NT, du):
        B, T, H, D = u.shape
        p, q = settings(D)
        BK = max(16, triton.next_power_of_2(D))
        S = torch.empty(B, c1 - c0, H, D, D, dtype=torch.float32, device=u.device)
        common = {"H": H, "D": D, "BT": pg.BT, "PRECISION": "tf32"}
        pair_grid = (triton.cdiv(D, p["BV"]), c1 - c0, B * H)
        pen_grid = (triton.cdiv(D, q["BV"]), c1 - c0, B * H)

        def sums():
            pg.vla_pair_sums_kernel[pair_grid](a, alpha_hat, n, S, T, c0, BK=BK, **common, **p)

        def scan():
            start = None if c1 == NT else carry
            layout = chunk_layout(B, (c1 - c0) * pg.BT, None, u.device, BT=pg.BT)
            chunk_scan(S, None, start, carry, layout, reverse=True)

        def dU():
            pg.vla_penalty_grad_kernel[pen_grid](u, a, alpha_hat, n, S, None, du, T, c0, HAS_F=False, **common, **q)

        return sums, scan, dU

    def slices(u):
        T, D = u.shape[1], u.shape[-1]
        NT = triton.cdiv(T, pg.BT)
        per_slice = triton.cdiv(NT, triton.cdiv(D, pg.BT))
        return NT, [(max(0, c1 - per_slice), c1) for c1 in range(NT, 0, -per_slice)]

    def run(u, a, alpha_hat, n):
        B, _, H, D = u.shape
        du = torch.empty_like(a)
        carry = torch.empty(B, H, D, D, dtype=torch.float32, device=u.device)
        NT, cuts = slices(u)
        for c0, c1 in cuts:
            for call in slice_calls(u, a, alpha_hat, n, c0, c1, carry, NT, du):
                call()
        return du, -carry / 2

    def stages(u, a, alpha_hat, n):
        B, _, H, D = u.shape
        du = torch.empty_like(a)
        carry = torch.zeros(B, H, D, D, dtype=torch.float32, device=u.device)
        NT, cuts = slices(u)
        c0, c1 = cuts[-1]
        return slice_calls(u, a, alpha_hat, n, c0, c1, carry, NT, du), len(cuts)

    return run, stages


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="16384,65536")
    parser.add_argument("--K", default="32,64,128")
    args = parser.parse_args()
    H = 16
    results = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    print("| d | T | setting | round | all ms | sums ms | scan ms | dU ms (a slice of n) | du / dM0 rel. diff |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---|")
    for D in map(int, args.K.split(",")):
        for T in map(int, args.lengths.split(",")):
            gen = torch.Generator(device="cuda").manual_seed(0)
            shape = (1, T, H, D)
            u = (torch.randn(*shape, device="cuda", generator=gen) / D**0.5).bfloat16()
            a = torch.randn(*shape, device="cuda", generator=gen)
            alpha = torch.randn(*shape, device="cuda", generator=gen)
            alpha_hat, n = F.normalize(alpha, dim=-1), alpha.norm(dim=-1, keepdim=True)
            ref = launcher(None, None)[0](u, a, alpha_hat, n)
            for rnd in range(2):
                for name, pair, pen in SETTINGS:
                    if max((pair or {}).get("BV", 0), (pen or {}).get("BV", 0), (pen or {}).get("BK", 0)) > max(D, 32):
                        continue
                    run, stages = launcher(pair, pen)
                    try:
                        got = run(u, a, alpha_hat, n)
                        diff = [((x - y).norm() / y.norm()).item() for x, y in zip(got, ref)]
                        ms = do_bench(lambda: run(u, a, alpha_hat, n))
                        (sums, scan, dU), n_slices = stages(u, a, alpha_hat, n)
                        parts = [do_bench(f) for f in (sums, scan, dU)]
                    except Exception as e:  # a setting the compiler or the GPU refuses: say so, go on
                        print(f"| {D} | {T} | {name} | {rnd} | failed: {type(e).__name__}: {str(e)[:80]} |", flush=True)
                        continue
                    row = {"d": D, "T": T, "setting": name, "round": rnd, "ms": ms, "sums_ms": parts[0],
                           "scan_ms": parts[1], "dU_ms": parts[2], "slices": n_slices, "du_diff": diff[0],
                           "dM0_diff": diff[1]}  # fmt: skip
                    results.append(row)
                    cells = [f"{x:.3f}" for x in (ms, *parts)]
                    print(f"| {D} | {T} | {name} | {rnd} | {' | '.join(cells)} (1 of {n_slices}) | "
                          f"{diff[0]:.1e} / {diff[1]:.1e} |", flush=True)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-penalty.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
