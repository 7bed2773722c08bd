"""Scratch: the VLA gate's d×d group inverses on the GPU, three ways: host (launch) time, GPU time, error vs float64."""
import json, sys, time
import torch
from linattn.ops.vla.chunk import spd_inverse
from linattn.ops.vla.cholesky import triton_spd_inverse
def cur(M): return spd_inverse(M)
def chol_inv(M):
    L, _ = torch.linalg.cholesky_ex(M); return torch.cholesky_inverse(L)
def inv_ex(M): return torch.linalg.inv_ex(M)[0]
rows = []
for d in (32, 64, 128):
    for N in (8, 128):
        torch.manual_seed(0)
        u = torch.randn(1, 16, N, 512, d, device="cuda") / d**0.5
        M = 0.1 * torch.eye(d, device="cuda") + (u.mT @ u).cumsum(2)
        ref = torch.linalg.inv(M.double())
        for name, f in (("cholesky+solve_triangular+matmul", cur), ("cholesky_ex+cholesky_inverse", chol_inv), ("inv_ex", inv_ex), ("triton", triton_spd_inverse)):
            for _ in range(3): f(M)
            torch.cuda.synchronize()
            n = 50
            t0 = time.perf_counter()
            for _ in range(n): f(M)
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            e = ((f(M).double() - ref).norm() / ref.norm()).item()
            r = dict(d=d, N=N, way=name, host_ms=(t1 - t0) / n * 1e3, total_ms=(t2 - t0) / n * 1e3, rel_err=e)
            rows.append(r); print(r, flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
