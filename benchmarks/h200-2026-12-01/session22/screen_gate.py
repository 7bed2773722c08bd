"""Scratch (not part of the library): the gate kernel's column-walk variants (`gate_variants.py`) beside the
library's `gate_apply_kernel`, one process, one GPU.

    PYTHONPATH=. python benchmarks/h200-2026-12-01/session22/screen_gate.py [--out DIR]

For each head dim (`--dims`, default 128) and length (bf16 `u`, B = 1, H = 16, the groups' first `A` as `vla`
forms them), the forward's call (`unit`: normalised rows and norms) and the backward's (plain rows): ms by
`triton.testing.do_bench`, and each variant's relative error against the library kernel; also the library kernel
keeping every chunk's `L⁻¹` in the forward and reading it in the backward (the factors depend on `U` and `A` only,
so the backward's call may read them whatever its `X`). Prints a table; writes `screen-gate.json` under `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).parent))
from gate_variants import ahead_apply, columns_apply, halves_apply

from linattn.ops.vla.cholesky import triton_spd_inverse
from linattn.ops.vla.chunk import group_inverses
from linattn.ops.vla.group_penalties import triton_group_penalties
from linattn.ops.vla.triton import triton_apply, triton_grouping


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--dims", default="128")
    parser.add_argument("--lengths", default="4096,65536")
    args = parser.parse_args()
    factors = {}  # the forward's kept L⁻¹ per (d, T), which the backward's call reads
    variants = {
        "library": lambda X, U, A, g, unit: triton_apply(X, U, A, g, unit)[:2],
        # the forward keeping every chunk's L⁻¹, the backward reading them (`triton_apply`'s `keep`, `factors`)
        "library-kept-Linv": lambda X, U, A, g, unit: (
            triton_apply(X, U, A, g, True, keep=True)[:2] if unit
            else triton_apply(X, U, A, g, False, factors=factors[X.shape])[:2]
        ),
        "columns-8w": lambda X, U, A, g, unit: columns_apply(X, U, A, g, unit, warps=8),
        "columns-4w": lambda X, U, A, g, unit: columns_apply(X, U, A, g, unit, warps=4),
        # the backward's call reading the library forward's L⁻¹ (the forward's call as columns-8w)
        "columns-8w-read-Linv": lambda X, U, A, g, unit: columns_apply(
            X, U, A, g, unit, warps=8, factors=None if unit else factors[X.shape]
        ),
        "merged-8w": lambda X, U, A, g, unit: columns_apply(X, U, A, g, unit, merge=True, warps=8),
        # the walk on columns with A in two column halves (less of A split at once)
        "halves-8w": lambda X, U, A, g, unit: halves_apply(X, U, A, g, unit, warps=8 if X.shape[-1] > 64 else 4),
        # the library's row walk, the next chunk's Z a step ahead; the library's warps (8 at d = 128, 4 at 64)
        "ahead": lambda X, U, A, g, unit: ahead_apply(X, U, A, g, unit, warps=8 if X.shape[-1] > 64 else 4),
    }
    rows = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("| d | T | call | variant | ms | rel err rows | rel err norms |\n|---:|---:|---|---|---:|---:|---:|")
    for D in map(int, args.dims.split(",")):
        for T in map(int, args.lengths.split(",")):
            gen = torch.Generator(device="cuda").manual_seed(0)
            X = F.normalize(torch.randn(1, T, 16, D, device="cuda", generator=gen), dim=-1)
            U = (F.normalize(torch.randn(1, T, 16, D, device="cuda", generator=gen), dim=-1) / D**0.5).bfloat16()
            g = triton_grouping(T)
            A, _ = group_inverses(U, 0.1, g.L, triton_spd_inverse, triton_group_penalties)
            factors[X.shape] = triton_apply(X, U, A, g, True, keep=True)[2]
            for unit in (True, False):
                ref = None
                for name, fn in variants.items():
                    try:
                        Y, n = fn(X, U, A, g, unit)
                        torch.cuda.synchronize()
                        ms = do_bench(lambda fn=fn: fn(X, U, A, g, unit), warmup=5, rep=50)
                    except Exception as error:  # a variant that does not build or run is reported, not fatal
                        print(f"| {D} | {T} | {'fwd' if unit else 'bwd'} | {name} | FAIL {type(error).__name__}: "
                              f"{str(error)[:200]} | | |", flush=True)  # fmt: skip
                        continue
                    ref = ref or (Y, n)
                    e_y = rel(Y, ref[0])
                    e_n = rel(n, ref[1]) if unit else float("nan")
                    rows.append({"d": D, "T": T, "call": "fwd" if unit else "bwd", "variant": name, "ms": ms,
                                 "rel_rows": e_y, "rel_norms": e_n})  # fmt: skip
                    print(f"| {D} | {T} | {'fwd' if unit else 'bwd'} | {name} | {ms:.3f} | {e_y:.1e} | {e_n:.1e} |",
                          flush=True)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-gate.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
