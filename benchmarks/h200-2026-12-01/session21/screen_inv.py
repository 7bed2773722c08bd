"""Session 21 scratch: SPD inverses of the VLA gate's group starts at d = 128 (float32), and where VLA's forward at
T = 4K, K = 128 spends host time. Prints a table, writes JSON to argv[1]. DEV=cpu with TRITON_INTERPRET=1: dry run."""
import json
import os
import sys
import time

import torch
import triton

from linattn.ops.vla.cholesky import spd_inverse_kernel
from linattn.ops.vla.chunk import spd_inverse


def blocked(M, block, warps):
    """The kernel on `block`-wide blocks and `warps` warps a program (as `triton_spd_inverse` launches it)."""
    D = M.shape[-1]
    A = torch.empty_like(M)
    BB = min(block, max(16, triton.next_power_of_2(D)))
    NB = triton.cdiv(D, BB)
    W = torch.empty(M.numel() // (D * D), NB * BB, NB * BB, dtype=M.dtype, device=M.device)
    spd_inverse_kernel[(W.shape[0],)](M, A, W, D=D, BB=BB, NB=NB, num_warps=warps)
    return A


DEV = os.environ.get("DEV", "cuda")
D = int(os.environ.get("D", "128"))
COUNTS = [int(c) for c in os.environ.get("COUNTS", "144,2064").split(",")]
rows = []


def bench(fn):
    if DEV != "cuda":
        fn()
        return float("nan"), float("nan")
    from triton.testing import do_bench

    ms = do_bench(fn, return_mode="median")
    # host time per call: enqueue behind a long sleep so the queue never drains
    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))
    t0 = time.perf_counter()
    for _ in range(20):
        fn()
    host = (time.perf_counter() - t0) / 20 * 1e3
    torch.cuda.synchronize()
    return ms, host


torch.manual_seed(0)
for n in COUNTS:
    U = torch.randn(n, 512 * 4, D, device=DEV) / D**0.5  # like the gate's penalty sums: λ0 I + Σ u uᵀ
    M = U.mT @ U / 4 + 0.1 * torch.eye(D, device=DEV)
    ref = torch.linalg.inv(M.double())
    variants = {"cusolver spd_inverse": spd_inverse}
    for bb in (16, 32):
        for nw in (1, 2, 4):
            variants[f"triton blocked {bb} {nw}w"] = lambda M, bb=bb, nw=nw: blocked(M, bb, nw)
    for name, fn in variants.items():
        try:
            A = fn(M)
            err = ((A.double() - ref).norm() / ref.norm()).item()
            ms, host = bench(lambda: fn(M))
        except Exception as e:  # a variant that fails to compile or run is a result too
            err, ms, host = float("nan"), float("nan"), float("nan")
            print(name, "failed:", repr(e)[:300])
        rows.append({"what": "inverse", "variant": name, "D": D, "count": n, "ms": ms, "host_ms": host, "err": err})
        print(f"inverse D={D} n={n:5d} {name:24s} {ms:8.4f} ms  host {host:7.4f} ms  err {err:.2e}", flush=True)

if DEV == "cuda":
    from triton.testing import do_bench

    from linattn.experiments.vla_speed import CONTENDERS, SpeedConfig, inputs

    by_name = {c.name: c for c in CONTENDERS}
    from linattn.bench.timing import forward_backward

    for K, T in ((32, 4096), (128, 4096), (64, 65536), (128, 65536)):
        x = inputs(SpeedConfig(Ts=(T,), head_dims=(K,), H=16, dtype="bfloat16"), T, K, DEV)
        fn = torch.no_grad()(lambda: by_name["VLA triton"].run(x))
        ms, host = bench(fn)
        rows.append({"what": "vla fwd", "K": K, "T": T, "ms": ms, "host_ms": host})
        print(f"VLA triton fwd T={T} K={K}: {ms:.4f} ms, host {host:.4f} ms", flush=True)
        if T > 4096:
            step = forward_backward(lambda: by_name["VLA triton"].run(x), list(x.values()))
            ms = do_bench(step, return_mode="median")
            rows.append({"what": "vla fwdbwd", "K": K, "T": T, "ms": ms})
            print(f"VLA triton fwd+bwd T={T} K={K}: {ms:.4f} ms", flush=True)

with open(sys.argv[1] if len(sys.argv) > 1 else "/dev/null", "w") as f:
    json.dump(rows, f, indent=1)
