"""Scratch (not part of the library): the driver that `screen_rows.py` and `screen_scan.py` share. One GPU, one
process: CCQ as `vla-speed`'s CCQ-GDN contender calls it (decayed, centred, bf16, B = 1, H = 16, unit keys, `λ` = GDN's
`β`), under each of a list of settings of module-level knobs, the first the library's.

Per (K, T): the gradients' largest relative difference from the first setting's, then each call's
`triton.testing.do_bench` median in two rounds, the settings alternated within a round; a markdown table on stdout
and the rows as JSON in `OUT/NAME.json`.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from linattn.ops import ccq_query, delta_rule


def ccq_case(K: int, T: int, H: int = 16) -> SimpleNamespace:
    """Inputs drawn on the GPU from seed 0, with `ccq()` (q') and `gdn(x)` (GDN reading with `x`)."""
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, device="cuda", generator=gen).bfloat16().requires_grad_()

    c = SimpleNamespace(q=rand(1, T, H, K), v=rand(1, T, H, K))
    c.k = F.normalize(torch.randn(1, T, H, K, device="cuda", generator=gen), dim=-1).bfloat16().requires_grad_()
    c.g = (-0.1 * torch.rand(1, T, H, device="cuda", generator=gen)).requires_grad_()
    c.lam = torch.rand(1, T, H, device="cuda", generator=gen).requires_grad_()
    c.dy = torch.randn(1, T, H, K, device="cuda", generator=gen).bfloat16()
    c.ccq = lambda: ccq_query(c.q, c.k, c.lam, g=c.g, normalize_keys=False, backend="triton")[0]
    c.gdn = lambda x: delta_rule(x, c.k, c.v, beta=c.lam, g=c.g, backend="triton")[0]
    c.leaves = [c.q, c.k, c.v, c.lam, c.g]
    return c


def ccq_calls(c: SimpleNamespace) -> dict:
    """The timed calls of the screens that change CCQ's kernels: `ccq_query` forward, its forward + backward, and CCQ
    on GDN forward + backward."""
    return {
        "ccq fwd": c.ccq,
        "ccq fwd+bwd": lambda: c.ccq().backward(c.dy),
        "ccq-gdn fwd+bwd": lambda: c.gdn(c.ccq()).backward(c.dy),
    }


def screen(name: str, settings: Sequence, use: Callable, calls: Callable[[SimpleNamespace], dict], K: str,
           lengths: str = "16384,65536") -> None:  # fmt: skip
    """`use(s)` applies setting `s`; `calls(case)` names the timed calls. `--K`, `--lengths`, `--out` override."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default=lengths)
    parser.add_argument("--K", default=K)
    args = parser.parse_args()
    library, results = settings[0], []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("| K | T | call | round | " + " | ".join(f"{s}" for s in settings) + " |", flush=True)
    print("|---:|---:|---|---:|" + "---:|" * len(settings), flush=True)
    for K in map(int, args.K.split(",")):
        for T in map(int, args.lengths.split(",")):
            case = ccq_case(K, T)
            grads = {}
            for s in settings:
                use(s)
                for x in case.leaves:
                    x.grad = None
                case.ccq().backward(case.dy)
                grads[s] = [x.grad.double() for x in (case.q, case.k, case.lam, case.g)]
            use(library)
            diff = {f"{s}": max(((a - b).norm() / b.norm()).item() for a, b in zip(grads[s], grads[library]))
                    for s in settings}  # fmt: skip
            print(f"# K = {K}, T = {T}: gradients' largest relative difference from {library}: {diff}", flush=True)
            for call, fn in calls(case).items():
                for r in range(2):
                    ms = {}
                    for s in settings:
                        use(s)
                        ms[f"{s}"] = do_bench(fn, grad_to_none=case.leaves, return_mode="median")
                    use(library)
                    print(f"| {K} | {T} | {call} | {r} | " + " | ".join(f"{t:.3f}" for t in ms.values()) + " |",
                          flush=True)  # fmt: skip
                    results.append({"K": K, "T": T, "call": call, "round": r, "ms": ms})
            results.append({"K": K, "T": T, "grad_diff": diff})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=1))
