"""Scratch (not part of the library): one op's Triton kernels under other launch settings, one kernel at a time, each
kernel's own device time in a bf16 forward + backward, against the library's settings; one process, one GPU.
`--op ccq`: `ccq_query` decayed and centred, the training call (no states); `--op vla`: `vla(q, k, v, u,
backend="triton")` on `vla-speed`'s inputs (positive `q, k`, `u` unit over √K); `--op gdn`: `delta_rule` with `β` and
`g` (Gated DeltaNet, `vla-speed`'s GDN: unit keys), the engine VLA and KLA run on too. The kernels are screened in the
order of their time under the library's settings, those that do not run skipped.

    PYTHONPATH=. python benchmarks/h200-2026-12-02/session34/screen_launch.py --op ccq|vla|gdn [--head-dims 32,128]
        [--kernels a,b --tag -a]

A setting that faults (session 35: the delta rule's `state_fwd_kernel` at 8 warps, an illegal memory access) leaves the
process's CUDA context unusable, so every later row fails too: session35/call.sh screens one kernel a process.

Why: session 34's screen of GLA's kernels (session33/screen_gla_launch.py) found the `dq, dk` kernel twice as fast
with 2 warps and 2 stages as with the 8 warps it took. CCQ-GDN takes 1.6× GDN's time at K = 128 where goal 3 of issue 5
allows 1.3×; its kernels' warps were set by hand (the sums kernels by `bench profile`, the others not screened). VLA at
K = 128 takes 2.7× GDN's time where goal 1 allows 2×; its gate kernel's warps were screened (scratch
`gate_warps.py`, 2026-11-30), its stages and the penalty gradients' settings not. Same method as the GLA screen:
`JITFunction.run` takes the setting for one kernel by name; the leaves' gradients are compared with those under the
library's settings (a setting reorders a tile's sums, not the arithmetic). The delta-rule engine's backward kernel
took 8 warps for the reason GLA's `dq, dk` kernel did (4 spilled, offline), which the GLA screen found twice as slow
as 2 warps with 2 stages.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from triton.runtime.jit import JITFunction

from linattn.ops import ccq_query, delta_rule, vla

KERNELS = {
    "ccq": (
        "ccq_sums_fwd_kernel",
        "ccq_scan_kernel",
        "ccq_output_fwd_kernel",
        "ccq_sums_bwd_kernel",
        "ccq_rows_bwd_kernel",
        "ccq_local_bwd_kernel",
    ),
    "vla": (
        "group_grams_kernel",
        "spd_inverse_kernel",
        "gate_apply_kernel",
        "vla_pair_sums_kernel",
        "vla_penalty_grad_kernel",
    ),
    "gdn": (
        "local_bwd_kernel",
        "state_bwd_kernel",
        "state_bwd_dv_kernel",
        "state_bwd_local_kernel",
        "state_fwd_kernel",
        "output_fwd_kernel",
        "wy_fwd_kernel",
        "wy_apply_kernel",
        "chunk_scan_kernel",
        "chunk_transpose_kernel",
        "chunk_cumsum_kernel",
    ),
}

OVERRIDE: dict[str, dict] = {}  # kernel name -> launch options replacing its own
_run = JITFunction.run


def _run_with_override(self, *args, **kwargs):
    kwargs.update(OVERRIDE.get(self.fn.__name__, {}))
    return _run(self, *args, **kwargs)


JITFunction.run = _run_with_override


def case(op: str, T: int, K: int, H: int = 16):
    gen = torch.Generator(device="cuda").manual_seed(0)

    def randn(*size):
        return torch.randn(*size, device="cuda", generator=gen)

    do = randn(1, T, H, K).bfloat16()
    if op == "ccq":
        q, k = (randn(1, T, H, K).bfloat16().requires_grad_() for _ in range(2))
        lam = torch.rand(1, T, H, device="cuda", generator=gen).requires_grad_()
        g = (F.logsigmoid(randn(1, T, H)) / 16).requires_grad_()
        leaves = [q, k, lam, g]

        def forward():
            return ccq_query(q, k, lam, g=g, backend="triton")[0]
    elif op == "vla":
        q, k = ((F.elu(randn(1, T, H, K)) + 1).bfloat16().requires_grad_() for _ in range(2))
        v = randn(1, T, H, K).bfloat16().requires_grad_()
        u = (F.normalize(randn(1, T, H, K), dim=-1) / K**0.5).bfloat16().requires_grad_()
        leaves = [q, k, v, u]

        def forward():
            return vla(q, k, v, u, backend="triton")[0]
    else:
        q = (F.elu(randn(1, T, H, K)) + 1).bfloat16().requires_grad_()
        k = F.normalize(F.elu(randn(1, T, H, K)) + 1, dim=-1).bfloat16().requires_grad_()
        v = randn(1, T, H, K).bfloat16().requires_grad_()
        beta = torch.rand(1, T, H, device="cuda", generator=gen).requires_grad_()
        g = (-0.1 * torch.rand(1, T, H, device="cuda", generator=gen)).requires_grad_()
        leaves = [q, k, v, beta, g]

        def forward():
            return delta_rule(q, k, v, beta=beta, g=g, backend="triton")[0]

    def step():
        for x in leaves:
            x.grad = None
        forward().backward(do)
        return [x.grad.double() for x in leaves]

    return step


def kernel_ms(step, repeat: int = 10) -> dict[str, float]:
    """Each kernel's device time per forward + backward, ms."""
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeat):
            step()
        torch.cuda.synchronize()
    ms: dict[str, float] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            ms[e.name] = ms.get(e.name, 0.0) + e.self_device_time_total / repeat / 1e3
    return ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--op", choices=sorted(KERNELS), required=True)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--head-dims", default="32,128")
    parser.add_argument("--length", type=int, default=65536)
    parser.add_argument("--warps", default="2,4,8")
    parser.add_argument("--stages", default="1,2,3")
    parser.add_argument("--budget-s", type=float, default=400.0, help="stop screening after this long")
    parser.add_argument("--tag", default="", help="appended to the JSON file's name")
    parser.add_argument("--kernels", help="screen only these (comma-separated; default: all of the op's)")
    args = parser.parse_args()
    launch = [(w, s) for w in map(int, args.warps.split(",")) for s in map(int, args.stages.split(","))]
    start = time.monotonic()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    rows = []
    args.out.mkdir(parents=True, exist_ok=True)
    T = args.length
    for K in map(int, args.head_dims.split(",")):
        OVERRIDE.clear()
        step = case(args.op, T, K)
        ref = step()
        base = kernel_ms(step)
        print(f"\n## K = {K}, T = {T}: the library's settings, ms per forward + backward "
              f"(all kernels {sum(base.values()):.3f})")  # fmt: skip
        for name in KERNELS[args.op]:
            print(f"- {name}: {base.get(name, 0.0):.3f}", flush=True)
        rows.append({"K": K, "T": T, "setting": "library", "ms": base})
        print("\n| K | kernel | num_warps | num_stages | kernel ms | library's | all kernels ms | grad diff |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|", flush=True)
        chosen = args.kernels.split(",") if args.kernels else KERNELS[args.op]
        for name in sorted((n for n in chosen if base.get(n)), key=lambda n: -base[n]):
            if time.monotonic() - start > args.budget_s:
                print(f"| {K} | {name} | | | out of time | | | |", flush=True)
                continue
            for w, s in launch:
                OVERRIDE.clear()
                OVERRIDE[name] = {"num_warps": w, "num_stages": s}
                try:
                    diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(step(), ref))
                    ms = kernel_ms(step)
                except Exception as e:  # a setting that does not compile (shared memory) is a row, not the end
                    print(f"| {K} | {name} | {w} | {s} | failed: {type(e).__name__}: {str(e)[:80]} | | | |", flush=True)
                    continue
                print(f"| {K} | {name} | {w} | {s} | {ms.get(name, 0.0):.3f} | {base.get(name, 0.0):.3f} | "
                      f"{sum(ms.values()):.3f} | {diff:.1e} |", flush=True)  # fmt: skip
                rows.append({"K": K, "T": T, "setting": {name: [w, s]}, "ms": ms, "grad_diff": diff})
            (args.out / f"screen-{args.op}-launch{args.tag}.json").write_text(json.dumps(rows, indent=1))
    OVERRIDE.clear()


if __name__ == "__main__":
    main()
