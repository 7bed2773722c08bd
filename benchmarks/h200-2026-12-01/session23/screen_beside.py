"""Scratch (not part of the library): the delta rule's backward with B1 (the states' recompute) beside B2 (the state
backward) on a second stream, against the two in turn (`backward._runs_beside` forced off), one process, one GPU.

    git apply benchmarks/h200-2026-12-01/session23/beside.patch   # the change screened (not kept)
    PYTHONPATH=. python benchmarks/h200-2026-12-01/session23/screen_beside.py [--out DIR]

Forward + backward ms by `linattn.bench.timing.median_ms` (bf16, B = 1, H = 16), the two settings alternated over
two rounds, of GDN (unit keys, β, g), linear attention and VLA (`vla-speed`'s inputs), with SDPA's beside them; and
whether the gradients of the two settings are the same bits.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F

from linattn.bench.timing import forward_backward, median_ms
from linattn.ops import delta_rule, linear_attention, softmax_attention, vla
from linattn.ops.delta_rule.triton import backward


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="8192,16384")
    parser.add_argument("--K", default="128,32")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    H, dev, library = 16, args.device, backward._runs_beside
    rows = []
    print(f"# {torch.cuda.get_device_name() if dev == 'cuda' else dev}, torch {torch.__version__}", flush=True)
    print("| op | K | T | round | beside ms | in turn ms | ratio | SDPA ms | same bits |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|", flush=True)
    for K in map(int, args.K.split(",")):
        for T in map(int, args.lengths.split(",")):
            gen = torch.Generator(device=dev).manual_seed(0)

            def rand(*shape, scale=1.0):
                return (scale * torch.randn(*shape, device=dev, generator=gen)).bfloat16().requires_grad_()

            q, k, v = rand(1, T, H, K), rand(1, T, H, K), rand(1, T, H, K)
            ku = F.normalize(torch.randn(1, T, H, K, device=dev, generator=gen), dim=-1).bfloat16().requires_grad_()
            u = (F.normalize(torch.randn(1, T, H, K, device=dev, generator=gen), dim=-1) / K**0.5).bfloat16()
            u.requires_grad_()
            beta = torch.rand(1, T, H, device=dev, generator=gen).requires_grad_()
            g = (-0.1 * torch.rand(1, T, H, device=dev, generator=gen)).requires_grad_()
            calls = {
                "gdn": (lambda: delta_rule(q, ku, v, beta=beta, g=g, backend="triton")[0], [q, ku, v, beta, g]),
                "linear": (lambda: linear_attention(q, k, v, backend="triton")[0], [q, k, v]),
                "vla": (lambda: vla(q, k, v, u, backend="triton")[0], [q, k, v, u]),
            }
            sdpa = median_ms(forward_backward(lambda: softmax_attention(q, k, v)[0], [q, k, v]), dev)
            for name, (fn, leaves) in calls.items():
                step = forward_backward(fn, leaves)
                grads = {}
                for setting in ("beside", "in turn"):
                    backward._runs_beside = library if setting == "beside" else (lambda x: False)
                    step()
                    grads[setting] = [x.grad.clone() for x in leaves]
                same = all(torch.equal(a, b) for a, b in zip(grads["beside"], grads["in turn"]))
                for r in range(args.rounds):
                    ms = {}
                    for setting in ("beside", "in turn"):
                        backward._runs_beside = library if setting == "beside" else (lambda x: False)
                        ms[setting] = median_ms(step, dev)
                    row = dict(op=name, K=K, T=T, round=r, beside_ms=ms["beside"], in_turn_ms=ms["in turn"],
                               sdpa_ms=sdpa, same_bits=same)  # fmt: skip
                    rows.append(row)
                    print(f"| {name} | {K} | {T} | {r} | {ms['beside']:.3f} | {ms['in turn']:.3f} | "
                          f"{ms['beside'] / ms['in turn']:.3f} | {sdpa:.3f} | {same} |", flush=True)  # fmt: skip
                backward._runs_beside = library
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-beside.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
