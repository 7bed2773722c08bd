"""Scratch (session 18): the gate kernel's launch (warps) with `L⁻¹` by elimination, and `spd_inverse`'s kernel, timed
against the code they replace (`main`, run from the other tree). argv: label, out json."""
import json, os, sys
import torch, triton
from linattn.ops.vla import triton as vt
from linattn.ops.vla import cholesky as ch
from linattn.ops.vla.chunk import group_inverses, initial_penalty, spd_inverse

rows = []
dev = "cuda"
for D, warps_list in ((32, (1, 2, 4)), (64, (2, 4, 8)), (128, (8, 16))):
    for T in (4096, 65536):
        torch.manual_seed(0)
        B, H = 1, 16
        k = torch.nn.functional.normalize(torch.randn(B, T, H, D, device=dev), dim=-1)
        u = (torch.nn.functional.normalize(torch.randn(B, T, H, D, device=dev), dim=-1) / D**0.5).bfloat16()
        g = vt.triton_grouping(T)
        A_starts, _ = group_inverses(u, initial_penalty(k, None, 0.1), g.L, vt.triton_spd_inverse)
        SG = A_starts.stride(1) // (D * D)
        Y = torch.empty_like(k)
        grid = (A_starts.shape[2], B * H)
        for warps in warps_list:
            kw = dict(H=H, D=D, BD=D, C=g.C, R=g.R, UNIT=False, EPS_=1e-12, num_warps=warps)
            if "PRODUCT" in vt.gate_apply_kernel.arg_names:
                kw["PRODUCT"] = warps == 4
            f = lambda: vt.gate_apply_kernel[grid](k, u, A_starts, Y, None, T, SG, **kw)
            ms = triton.testing.do_bench(f, warmup=5, rep=200)
            r = dict(what="gate", D=D, T=T, warps=warps, ms=ms)
            rows.append(r); print(sys.argv[1], r, flush=True)
# spd_inverse: the Triton kernel at d <= 32 and cuSOLVER, 128 and 2048 matrices, errors against float64
for D in (16, 32):
    for n in (128, 2048):
        torch.manual_seed(0)
        X = torch.randn(n, 4 * D, D, device=dev, dtype=torch.float64) / D**0.5
        M = (X.transpose(1, 2) @ X + 0.1 * torch.eye(D, device=dev, dtype=torch.float64))
        ref = torch.linalg.inv(M)
        Mf = M.float()
        for name, fn in (("triton", ch.triton_spd_inverse), ("cusolver", spd_inverse)):
            A = fn(Mf)
            err = ((A.double() - ref).norm() / ref.norm()).item()
            ms = triton.testing.do_bench(lambda: fn(Mf), warmup=5, rep=100)
            r = dict(what="spd_inverse", D=D, n=n, impl=name, ms=ms, rel_err=err)
            rows.append(r); print(sys.argv[1], r, flush=True)
json.dump(rows, open(sys.argv[2], "w"), indent=1)
