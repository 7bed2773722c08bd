"""Scratch (not part of the library): VLA's Triton path with other group sizes of the gate (`triton.GROUP_TOKENS`,
tokens per `d × d` factorisation: one program walks a group's 16-token chunks in sequence), one process, one GPU.

    PYTHONPATH=. python benchmarks/h200-2026-12-01/session23/screen_groups.py [--out DIR]

`vla(..., backend="triton")` as `vla-speed` calls it (bf16, B = 1, H = 16, K = V), forward under `no_grad` and
forward + backward, ms by `linattn.bench.timing.median_ms`, the settings alternated over two rounds; the host's time
to issue one forward call (20 calls without a synchronisation, after a warm-up) beside it; and α̂'s largest
difference from the library setting's.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from linattn.bench.timing import forward_backward, median_ms
from linattn.ops import vla, vla_gate
from linattn.ops.vla import triton as vla_triton


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="2048,4096,8192,16384,65536")
    parser.add_argument("--K", default="32,128")
    parser.add_argument("--groups", default="128,256,512,1024")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    H, library = 16, vla_triton.GROUP_TOKENS
    groups = [int(g) for g in args.groups.split(",")]
    rows = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, library GROUP_TOKENS = {library}", flush=True)
    print("| K | T | tokens a group | round | fwd ms | fwd+bwd ms | host ms a fwd | α̂ diff |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    for K in map(int, args.K.split(",")):
        for T in map(int, args.lengths.split(",")):
            gen = torch.Generator(device="cuda").manual_seed(0)

            def rand(*shape):
                return torch.randn(*shape, device="cuda", generator=gen).bfloat16().requires_grad_()

            q, k, v = rand(1, T, H, K), rand(1, T, H, K), rand(1, T, H, K)
            u = (F.normalize(torch.randn(1, T, H, K, device="cuda", generator=gen), dim=-1) / K**0.5).bfloat16()
            u.requires_grad_()

            def fwd():
                return vla(q, k, v, u, backend="triton")[0]

            with torch.no_grad():
                vla_triton.GROUP_TOKENS = library
                ref = vla_gate(k, u, backend="triton")[0].float()
            for r in range(args.rounds):
                for g in groups:
                    vla_triton.GROUP_TOKENS = g
                    with torch.no_grad():
                        diff = (vla_gate(k, u, backend="triton")[0].float() - ref).abs().max().item()
                        fwd()
                        torch.cuda.synchronize()
                        t0 = time.perf_counter()
                        for _ in range(20):
                            fwd()
                        host = (time.perf_counter() - t0) / 20 * 1e3
                        torch.cuda.synchronize()
                    f = median_ms(torch.no_grad()(fwd), "cuda")
                    fb = median_ms(forward_backward(fwd, [q, k, v, u]), "cuda")
                    rows.append(dict(K=K, T=T, group=g, round=r, fwd_ms=f, fwdbwd_ms=fb, host_ms=host, diff=diff))
                    print(f"| {K} | {T} | {g} | {r} | {f:.3f} | {fb:.3f} | {host:.3f} | {diff:.1e} |", flush=True)
            vla_triton.GROUP_TOKENS = library
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-groups.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
