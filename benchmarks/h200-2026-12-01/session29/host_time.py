"""Scratch (not part of the library): the host's own time of a GDN and a CCQ-GDN call, every Triton launch stubbed.

    python benchmarks/h200-2026-12-01/session29/host_time.py [--T 64] [--calls 1000]

(from the repository root, in the project's venv; CPU only.) Issue 5's goal 3 at 8K, K = 32, is the host's time
(`vla-speed` on the H200: CCQ-GDN's forward + backward 2.08 ms of wall against 1.01 of GPU time). Here the launches do
nothing, so what is left is the library's Python wrappers, autograd and allocations: the minimum over `--calls`
calls of the forward and of the forward + backward (bf16, B = 1, H = 16, K = 32), with the launches counted. Also
the cost of one call of `triton.cdiv` from Python against `linattn.ops.grid.cdiv`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import time
import timeit

os.environ["TRITON_INTERPRET"] = "1"  # the triton backends accept CPU tensors; no kernel runs below

import torch
import torch.nn.functional as F
import triton

from linattn.ops import ccq_query, delta_rule
from linattn.ops.grid import cdiv

LAUNCHES = [0]


class Stub:
    """`kernel[grid](...)` that only counts."""

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            LAUNCHES[0] += 1

        return launch


def stub_kernels() -> None:
    for name in ("linattn.ops.ccq.triton", "linattn.ops.delta_rule.triton", "linattn.ops.unit_rows"):
        package = importlib.import_module(name)
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{name}.{info.name}")
            for attr, obj in list(vars(module).items()):
                if attr.endswith("_kernel") and hasattr(obj, "fn"):
                    setattr(module, attr, Stub())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--T", type=int, default=64)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    stub_kernels()
    gen = torch.Generator().manual_seed(0)
    shape = (1, args.T, 16, 32)
    q = torch.randn(*shape, generator=gen).bfloat16().requires_grad_()
    k = F.normalize(torch.randn(*shape, generator=gen), dim=-1).bfloat16().requires_grad_()
    v = torch.randn(*shape, generator=gen).bfloat16().requires_grad_()
    beta = torch.rand(*shape[:3], generator=gen).requires_grad_()
    g = (-0.1 * torch.rand(*shape[:3], generator=gen)).requires_grad_()
    dy = torch.randn(*shape, generator=gen).bfloat16()

    def gdn(query):
        return delta_rule(query, k, v, beta=beta, g=g, backend="triton")[0]

    def ccq_gdn():
        return gdn(ccq_query(q, k, beta, g=g, normalize_keys=False, backend="triton")[0])

    def fwd_bwd(fn):
        def step():
            for x in (q, k, v, beta, g):
                x.grad = None
            fn().backward(dy)

        return step

    print(f"# host time, launches stubbed: bf16, T = {args.T}, H = 16, K = 32, min of {args.calls} calls")
    for name, fn in (("GDN", lambda: gdn(q)), ("CCQ-GDN", ccq_gdn)):
        for label, call in (("forward", fn), ("forward + backward", fwd_bwd(fn))):
            call()
            LAUNCHES[0], times = 0, []
            for _ in range(args.calls):
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
            print(f"{name} {label}: {1e3 * min(times):.3f} ms, {LAUNCHES[0] / args.calls:.0f} launches")
    n = 100_000
    ours = timeit.timeit(lambda: cdiv(1000, 64), number=n) / n * 1e6
    theirs = timeit.timeit(lambda: triton.cdiv(1000, 64), number=n) / n * 1e6
    print(f"one call: triton.cdiv {theirs:.2f} µs (Triton {triton.__version__}), grid.cdiv {ours:.2f} µs")


if __name__ == "__main__":
    main()
