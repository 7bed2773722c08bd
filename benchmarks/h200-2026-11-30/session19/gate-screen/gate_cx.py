"""Scratch (session 19): the gate kernel with 16- or 32-token chunks and its X-products in three tf32 passes or one,
one call, B = 1, H = 16, bf16 u; rows A_t k̂_t against the float64 chunk path at 4K. argv: out json."""
import json, sys
import torch, triton
from linattn.ops.vla import triton as vt
from linattn.ops.vla.chunk import Grouping, group_inverses, initial_penalty, torch_apply

rows = []
dev = "cuda"
for D in (32, 64, 128):
    for T in (4096, 65536):
        torch.manual_seed(0)
        B, H = 1, 16
        k = torch.nn.functional.normalize(torch.randn(B, T, H, D, device=dev), dim=-1)
        u = (torch.nn.functional.normalize(torch.randn(B, T, H, D, device=dev), dim=-1) / D**0.5).bfloat16()
        ref = None
        if T == 4096:
            g64 = Grouping(16, 32)
            A64, _ = group_inverses(u.double(), initial_penalty(k.double(), None, 0.1), g64.L)
            ref, _ = torch_apply(k.double(), u.double(), A64, g64)
        for C in (16, 32):
            g = Grouping(C, max(1, min(512 // C, triton.cdiv(T, C))))
            A_starts, _ = group_inverses(u, initial_penalty(k, None, 0.1), g.L, vt.triton_spd_inverse)
            SG = A_starts.stride(1) // (D * D)
            Y = torch.empty_like(k)
            grid = (A_starts.shape[2], B * H)
            warps = 1 if D <= 32 else 4 if D <= 64 else 8
            for xp in ("tf32x3", "tf32"):
                kw = dict(H=H, D=D, BD=D, C=C, R=g.R, UNIT=False, EPS_=1e-12, num_warps=warps, X_PRECISION=xp)
                f = lambda: vt.gate_apply_kernel[grid](k, u, A_starts, Y, None, T, SG, **kw)
                try:
                    f(); torch.cuda.synchronize()
                    ms = triton.testing.do_bench(f, warmup=5, rep=200)
                    err = None if ref is None else ((Y.double() - ref).norm() / ref.norm()).item()
                    r = dict(D=D, T=T, C=C, xprec=xp, warps=warps, ms=ms, rel_err=err)
                except Exception as e:  # a launch that does not fit
                    r = dict(D=D, T=T, C=C, xprec=xp, warps=warps, error=repr(e)[:300])
                rows.append(r); print(r, flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
