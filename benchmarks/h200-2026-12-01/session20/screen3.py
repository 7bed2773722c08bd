"""Session 20 scratch (screen3, for the next session): the output stage's one-pass launch on 64-column blocks, the
local backward with four stages. Derived from screen2: (1) the local backward's launch shapes, (2) the backward's recomputed state pass (B1) run in
segments from checkpointed chunk-start states, as a varlen call, with fewer pipeline stages. GDN config, bf16, B=1,
H=16, K=V=128. Prints a table, writes JSON to argv[1]."""
import json
import os
import sys

import torch
import triton

from linattn.bench.stages import inputs
from linattn.bench.timing import median_ms
from linattn.ops.delta_rule.triton import local_bwd as lbm
from linattn.ops.delta_rule.triton import state as stm
from linattn.ops.delta_rule.triton.cumsum import chunk_cumsum, chunk_layout
from linattn.ops.delta_rule.triton.precision import grad_precision, raw_precision
from linattn.ops.delta_rule.triton.recompute import wy_apply
from linattn.ops.delta_rule.triton.state_bwd import state_bwd
from linattn.ops.delta_rule.triton.wy import wy_fwd

rows = []


def local_launch(q, k, v, beta, G, h, dh, U, dvt, do, scale, layout, prec, BK, BV, nw, ns):
    B, T, H, K = q.shape
    V = v.shape[-1]
    dq, dk, dv, dw, dbeta, dG = lbm.local_bwd_outputs(q, k, v, None, beta, G)
    lbm.local_bwd_kernel[(layout.NT, B * H)](
        q, k, v, k, beta, G, h, dh, U, dvt, do, None, dq, dk, dv, dw, dbeta, dG,
        layout.cu_seqlens, layout.chunk_indices, scale, T,
        H=H, K=K, V=V, BT=layout.BT, BK=BK, BV=BV, ERASE=True, USE_BETA=True, USE_G=True, KACZMARZ=False,
        W_IS_K=True, IS_VARLEN=False, RAW=raw_precision(q.dtype, k.dtype), PRECISION=prec,
        num_warps=nw, num_stages=ns)
    return dq, dk, dv, dbeta, dG


def state_launch(k_tilde, u_tilde, w, G, h0, layout, prec, ns, nw=4):
    B, T, H, K = w.shape
    V = u_tilde.shape[-1]
    h = torch.empty(B, layout.NT, H, K, V, dtype=torch.float32, device=w.device)
    U = torch.empty_like(u_tilde)
    stm.state_fwd_kernel[(triton.cdiv(V, 16), layout.N * H)](
        k_tilde, u_tilde, w, G, h, U, h0, None, layout.cu_seqlens, layout.chunk_offsets, T,
        H=H, K=K, V=V, BT=layout.BT, BK=128, BV=16, ERASE=True, USE_G=True, USE_H0=h0 is not None,
        STORE_HT=False, IS_VARLEN=layout.cu_seqlens is not None, PRECISION=prec, W_T=False,
        num_warps=nw, num_stages=ns)
    return h, U


DEV = os.environ.get("DEV", "cuda")
HEADS = int(os.environ.get("HEADS", "16"))
for T in [int(t) for t in os.environ.get("TS", "8192,65536").split(",")]:
    x = inputs(1, T, HEADS, 128, torch.bfloat16, DEV)
    q, k, v, beta, g, do = (x[n] for n in ("q", "k", "v", "beta", "g", "do"))
    scale = 128**-0.5
    layout = chunk_layout(1, T, None, q.device)
    G = chunk_cumsum(g, layout)
    bwd = grad_precision((q, k, v, do), final_state_grad=False)
    T_inv, u_tilde, k_tilde, _ = wy_fwd(k, v, k, beta, G, layout, precision=bwd)
    h, U, _ = stm.state_fwd(k_tilde, u_tilde, k, G, None, False, layout, bwd)
    k_tilde_t = wy_apply(k, v, beta, G, T_inv, layout, precision=bwd)[2]
    dh, dvt, _ = state_bwd(q, k, G, T_inv, k_tilde_t, do, None, scale, False, layout, bwd)
    ref = local_launch(q, k, v, beta, G, h, dh, U, dvt, do, scale, layout, bwd, 64, 32, 8, 3)
    from linattn.ops.delta_rule.triton import output as om

    def out_launch(BK, BV, nw):
        o = torch.empty_like(v)
        om.output_fwd_kernel[(triton.cdiv(128, BV), layout.NT, 16)](
            q, k, G, h, U, o, None, None, scale, T, H=16, K=128, V=128, BT=64, BK=BK, BV=BV, USE_G=True,
            IS_VARLEN=False, RAW="tf32", PRECISION="tf32", num_warps=nw, num_stages=3)
        return o

    o_ref = out_launch(32, 32, 2).float()
    for BK, BV, nw in [(32, 32, 2), (32, 64, 2), (32, 64, 4), (64, 64, 2), (32, 32, 2)]:
        o2 = out_launch(BK, BV, nw).float()
        err = ((o2 - o_ref).norm() / o_ref.norm()).item()
        ms = median_ms(lambda: out_launch(BK, BV, nw), DEV)
        rows.append({"T": T, "what": f"output_fwd one pass BK={BK} BV={BV} warps={nw}", "ms": ms, "err": err})
        print(rows[-1], flush=True)
    for BK, BV, nw, ns in [(64, 32, 8, 3), (64, 32, 8, 4), (64, 32, 8, 3), (64, 32, 8, 4)]:
        try:
            out = local_launch(q, k, v, beta, G, h, dh, U, dvt, do, scale, layout, bwd, BK, BV, nw, ns)
            err = max(((a.float() - b.float()).norm() / b.float().norm()).item() for a, b in zip(out, ref))
            ms = median_ms(lambda: local_launch(q, k, v, beta, G, h, dh, U, dvt, do, scale, layout, bwd, BK, BV, nw, ns), DEV)
        except Exception as e:  # noqa: BLE001
            err, ms = float("nan"), float("nan")
            print("fail", BK, BV, nw, ns, repr(e)[:200])
        rows.append({"T": T, "what": f"local_bwd BK={BK} BV={BV} warps={nw} stages={ns}", "ms": ms, "err": err})
        print(rows[-1], flush=True)
    # B1 in segments
    NT = layout.NT
    base = None
    for S in ((1, 2, 4, 8, 16) if os.environ.get('B1') else ()):
        for ns in (3, 2, 1):
            if S == 1:
                lay, h0 = layout, None
            else:
                step = NT // S
                bounds = torch.arange(0, S + 1, device=q.device, dtype=torch.int32) * (step * 64)
                lay = chunk_layout(1, T, bounds, q.device)
                h0 = h[0, ::step].contiguous()
            try:
                hs, Us = state_launch(k_tilde, u_tilde, k, G, h0, lay, bwd, ns)
                same = bool(torch.equal(hs, h) and torch.equal(Us, U))
                err = ((hs - h).norm() / h.norm()).item()
                ms = median_ms(lambda: state_launch(k_tilde, u_tilde, k, G, h0, lay, bwd, ns), DEV)
            except Exception as e:  # noqa: BLE001
                same, err, ms = False, float("nan"), float("nan")
                print("fail", S, ns, repr(e)[:200])
            rows.append({"T": T, "what": f"B1 segments={S} stages={ns}", "ms": ms, "err": err, "same": same})
            print(rows[-1], flush=True)
    del x, h, U, dh, dvt, T_inv, u_tilde, k_tilde, k_tilde_t, ref
    torch.cuda.empty_cache()

print("| T | what | ms | rel. diff |")
print("|---:|---|---:|---:|")
for r in rows:
    print(f"| {r['T']} | {r['what']} | {r['ms']:.3f} | {r['err']:.1e}{' same bits' if r.get('same') else ''} |")
json.dump(rows, open(sys.argv[1], "w"), indent=1)
