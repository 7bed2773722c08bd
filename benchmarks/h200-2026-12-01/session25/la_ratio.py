"""Scratch (not part of the library): what a linear attention of width K costs beside a delta rule, in fla and in
ours, at K = V = 128 (bf16, B = 1, H = 16): CCQ's covariance read is a decayed linear attention whose values are the
keys, so issue 5's goal 3 (CCQ-GDN ≤ 1.3× GDN) asks the read to cost ≤ 0.3× a GDN.

    PYTHONPATH=.:/tmp/site python benchmarks/h200-2026-12-01/session25/la_ratio.py [--out DIR]

Forward and forward + backward, ms by `triton.testing.do_bench`; a call fla refuses is reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from linattn.ops import ccq_query, delta_rule, gated_linear_attention


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="16384,65536")
    args = parser.parse_args()
    from fla.ops.delta_rule import chunk_delta_rule
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    from fla.ops.simple_gla import chunk_simple_gla

    H, K = 16, 128
    results = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, K = V = {K}, bf16, B = 1, H = {H}", flush=True)
    print("| T | contender | fwd ms | fwd+bwd ms |\n|---:|---|---:|---:|", flush=True)
    for T in map(int, args.lengths.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(0)

        def rand(*shape):
            return torch.randn(*shape, device="cuda", generator=gen).bfloat16().requires_grad_()

        q, v = rand(1, T, H, K), rand(1, T, H, K)
        k = F.normalize(torch.randn(1, T, H, K, device="cuda", generator=gen), dim=-1).bfloat16().requires_grad_()
        g = (-0.1 * torch.rand(1, T, H, device="cuda", generator=gen)).requires_grad_()
        beta = torch.rand(1, T, H, device="cuda", generator=gen).requires_grad_()
        params = [q, k, v, g, beta]
        dy = torch.randn(1, T, H, K, device="cuda", generator=gen).bfloat16()
        contenders = {
            "fla simple GLA (scalar decay)": lambda: chunk_simple_gla(q, k, v, g=g)[0],
            "fla linear attention (no decay)": lambda: chunk_simple_gla(q, k, v)[0],
            "fla DeltaNet": lambda: chunk_delta_rule(q, k, v, beta)[0],
            "fla GDN": lambda: chunk_gated_delta_rule(q, k, v, g, beta)[0],
            "ours GDN": lambda: delta_rule(q, k, v, beta=beta, g=g, backend="triton")[0],
            "ours linear attention (scalar decay)": lambda: gated_linear_attention(q, k, v, g, backend="triton")[0],
            "ours CCQ read (values = keys)": lambda: ccq_query(q, k, beta, g=g, normalize_keys=False)[0],
        }
        for name, fn in contenders.items():
            row = {"T": T, "contender": name}
            for mode in ("fwd", "fwd+bwd"):
                call = fn if mode == "fwd" else (lambda fn=fn: fn().backward(dy))
                try:
                    row[mode] = do_bench(call, warmup=5, rep=100, grad_to_none=params)
                except Exception as e:  # fla refuses some backward passes on this Triton
                    row[mode] = f"refused: {str(e).splitlines()[0][:90]}"
            results.append(row)
            cells = " | ".join(f"{x:.3f}" if isinstance(x, float) else x for x in (row["fwd"], row["fwd+bwd"]))
            print(f"| {T} | {name} | {cells} |", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "la-ratio.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
