"""Scratch (session 18): VLA's gate backward `∂L/∂u, ∂L/∂M_0` alone (`triton_penalty_grads`), ms (do_bench), B = 1,
H = 16, float32 a / α̂, bf16 u, for launch settings given as module patches. argv: label, out json, then
NAME=VALUE patches of `linattn.ops.vla.penalty_grads` (ints)."""
import json, os, sys
import torch, triton
from linattn.ops.vla import penalty_grads as pg

patches = dict(x.split("=") for x in sys.argv[3:])
for k, v in patches.items():
    setattr(pg, k, int(v))
rows = []
for D in [int(x) for x in os.environ.get('DS', '32,64,128').split(',')]:
    for T in [int(x) for x in os.environ.get('TS', '16384,65536').split(',')]:
        torch.manual_seed(0)
        B, H = 1, 16
        u = torch.randn(B, T, H, D, device="cuda").bfloat16()
        a, al = (torch.randn(B, T, H, D, device="cuda") for _ in range(2))
        n = al.norm(dim=-1, keepdim=True)
        kw = {'precision': os.environ['PREC']} if 'PREC' in os.environ else {}
        fn = lambda: pg.triton_penalty_grads(u, a, al / n, n, None, **kw)
        ms = triton.testing.do_bench(fn, warmup=5, rep=100)
        torch.cuda.reset_peak_memory_stats()
        fn(); torch.cuda.synchronize()
        r = dict(D=D, T=T, ms=ms, prec=os.environ.get('PREC'), peak_gib=torch.cuda.max_memory_allocated() / 2**30, **patches)
        rows.append(r); print(sys.argv[1], r, flush=True)
        del u, a, al, n; torch.cuda.empty_cache()
json.dump(rows, open(sys.argv[2], "w"))
