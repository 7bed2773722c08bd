"""Scratch (not part of the library): GLA's per-channel kernels with every product in one tf32 pass for 16-bit
inputs, against the library's three (`linear_attention/triton/function.PRECISION = "tf32x3"`), and beside fla's
`chunk_gla`. One GPU:

    PYTHONPATH=. python benchmarks/h200-2026-12-01/session28/screen_gla.py [--out DIR] [--jobs 15]

Why: on the H200 (session 28, `bench ops`, bf16, B = 1, H = 16, K = V = 128) our GLA took 9.25 ms forward and 41.4
forward + backward at 64K, 2.8× our GDN's fwd+bwd (14.8), at 1.6% of the tensor cores' rate (`fwd_mma_frac`). The
delta-rule engine takes one tf32 pass where a bfloat16 output is all there is to round to (its `precision.py`), and
GLA's bfloat16 cases in `verify` sit at 1.00× the naive recurrence's error, against the 2× allowed.

1. `verify`'s 16-bit GLA cases (bfloat16, float16: with and without states, packed) with `PRECISION` each setting:
   which quantities stay within 2× naive's error.
2. Forward and forward + backward ms, bf16, no final state (`bench ops`'s GLA call), each setting alternated over
   two rounds, and fla's `chunk_gla` on the same inputs (its first call autotunes: untimed warm-up).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import torch.nn.functional as F

from linattn.bench import verify
from linattn.bench.timing import forward_backward, median_ms
from linattn.ops import gated_linear_attention

SETTINGS = ("tf32x3", "tf32")


def _set_precision(precision: str) -> None:
    from linattn.ops.linear_attention.triton import function

    function.PRECISION = precision


def _check(case) -> dict:
    return verify.check(case, "triton", device="cuda")


def correctness(precision: str, jobs: int) -> list[dict]:
    cases = [c for c in verify.matrix() if c.op == "gla" and c.dtype != torch.float32]
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=spawn, initializer=_set_precision, initargs=(precision,)) as pool:
        return list(pool.map(_check, cases))


def _inputs(T: int, K: int, H: int = 16):
    def r():
        return torch.randn(1, T, H, K, device="cuda", dtype=torch.bfloat16).requires_grad_()

    q, k, v = r(), r(), r()
    g = (F.logsigmoid(torch.randn(1, T, H, K, device="cuda")) / 16).requires_grad_()
    return q, k, v, g


def timing(lengths: list[int], K: int) -> list[dict]:
    try:
        from fla.ops.gla import chunk_gla
    except ImportError:
        chunk_gla = None
    rows = []
    for T in lengths:
        q, k, v, g = _inputs(T, K)
        calls = {p: (lambda: gated_linear_attention(q, k, v, g, backend="triton")[0]) for p in SETTINGS}
        if chunk_gla is not None:
            calls["fla"] = lambda: chunk_gla(q, k, v, g)[0]
        for r in range(2):
            row = {"T": T, "K": K, "round": r}
            for name, fn in calls.items():
                if name in SETTINGS:
                    _set_precision(name)
                step = forward_backward(fn, [q, k, v, g])
                step()  # compiles (fla: autotunes) outside the timing
                row[name] = {"fwd": median_ms(fn, "cuda"), "fwdbwd": median_ms(step, "cuda")}
            _set_precision(SETTINGS[0])
            rows.append(row)
            cells = " | ".join(f"{row[n]['fwd']:.3f} / {row[n]['fwdbwd']:.3f}" for n in calls)
            print(f"| {T} | {K} | {r} | {cells} |", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--jobs", type=int, default=15)
    parser.add_argument("--lengths", default="4096,16384,65536")
    parser.add_argument("--K", type=int, default=128)
    args = parser.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    checks = {}
    for precision in SETTINGS:
        checks[precision] = correctness(precision, args.jobs)
        failed = [r for r in checks[precision] if not r["ok"]]
        print(f"## PRECISION = {precision}: {len(checks[precision]) - len(failed)} of {len(checks[precision])} pass")
        print(verify.table(failed) if failed else "", flush=True)
    print("| T | K | round | " + " | ".join(f"{n} fwd / fwd+bwd ms" for n in (*SETTINGS, "fla")) + " |")
    print("|---:|---:|---:|" + "---|" * (len(SETTINGS) + 1))
    times = timing([int(t) for t in args.lengths.split(",")], args.K)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-gla.json").write_text(json.dumps({"checks": checks, "times": times}, indent=1))


if __name__ == "__main__":
    main()
