"""Scratch (not part of the library): session 37's CPU timings of a mixture's rows without their padding.

    PYTHONPATH=. python benchmarks/h200-2026-12-02/session37/cpu_timings.py

Each line times forward + backward, the median of `--repeats` after one untimed call, two ways side by side:
- a `zoology-mqar` training step (GDN, d 128, 32 rows of Zoology's mix): the loss on the padded rows
  (`logits_at` alone) against `supervised_cross_entropy` (one pass per length), with both losses;
- on a packed row of Zoology's lengths (64, 128 and 256 tokens, as a training batch draws them):
  `ShortConv` one sequence at a time against one convolution; GDN's and VLA's `chunk` backends through
  `varlen.per_sequence` against `varlen.per_length`.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from linattn.bench.environment import describe
from linattn.experiments.zoology import plan
from linattn.layers.short_conv import ShortConv
from linattn.models import DecoderLM
from linattn.ops import delta_rule
from linattn.ops.delta_rule import api as delta_rule_api
from linattn.ops.varlen import per_length, per_sequence
from linattn.ops.vla import api as vla_api
from linattn.tasks import generate
from linattn.train import supervised_cross_entropy


def median_s(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def packed_row(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])


def zoology_step(repeats: int) -> str:
    spec = next(s for s in plan("fair", False, ("gated_deltanet",)) if s.x == 128 and s.train.lr == 1e-3)
    torch.manual_seed(0)
    model = DecoderLM(spec.model)
    batch = generate(spec.task, 32, torch.Generator().manual_seed(0))

    def padded(model, batch):
        supervised = batch.supervised
        return F.cross_entropy(model(batch.inputs, logits_at=supervised)[0].float(), batch.targets[supervised])

    cells = []
    for loss_fn in (padded, supervised_cross_entropy):
        losses = []

        def step(loss_fn=loss_fn, losses=losses):
            model.zero_grad()
            loss = loss_fn(model, batch)
            loss.backward()
            losses.append(loss.item())

        cells.append(f"{median_s(step, repeats):.3f} s (loss {losses[-1]:.6f})")
    return f"| zoology-mqar step, GDN d 128, 32 rows | padded: {cells[0]} | by length: {cells[1]} |"


def short_conv(lengths: list[int], repeats: int) -> str:
    torch.manual_seed(0)
    conv = ShortConv(128, 4)
    cu = packed_row(lengths)
    x = torch.randn(1, int(cu[-1]), 128, requires_grad=True)

    def alone():
        pieces = [conv._one(x[:, a:b], None)[0] for a, b in zip(cu[:-1].tolist(), cu[1:].tolist())]
        torch.cat(pieces, dim=1).sum().backward()

    def packed():
        conv(x, None, cu)[0].sum().backward()

    a, b = median_s(alone, repeats), median_s(packed, repeats)
    return f"| ShortConv, D 128, {len(lengths)} sequences | one at a time: {a:.3f} s | one convolution: {b:.3f} s |"


def with_split(module, name: str, split, fn):
    """`fn()` with `module.<name>` (the split an op's api uses) set to `split`."""
    kept = getattr(module, name)
    setattr(module, name, split)
    try:
        return fn()
    finally:
        setattr(module, name, kept)


def gdn_chunk(lengths: list[int], repeats: int) -> str:
    torch.manual_seed(0)
    cu = packed_row(lengths)
    T, H, K = int(cu[-1]), 2, 64
    q, v = (torch.randn(1, T, H, K, requires_grad=True) for _ in range(2))
    k = F.normalize(torch.randn(1, T, H, K), dim=-1).requires_grad_()
    beta, g = torch.rand(1, T, H).requires_grad_(), (-0.1 * torch.rand(1, T, H)).requires_grad_()

    def run():
        delta_rule(q, k, v, beta=beta, g=g, cu_seqlens=cu, backend="chunk")[0].sum().backward()

    a, b = (
        with_split(delta_rule_api, "per_length", s, lambda: median_s(run, repeats)) for s in (per_sequence, per_length)
    )
    return f"| GDN `chunk`, H 2, K 64, {len(lengths)} sequences | per_sequence: {a:.3f} s | per_length: {b:.3f} s |"


def vla_chunk(lengths: list[int], repeats: int) -> str:
    torch.manual_seed(0)
    cu = packed_row(lengths)
    T, H, K = int(cu[-1]), 2, 64
    q, k, v = (torch.randn(1, T, H, K, requires_grad=True) for _ in range(3))
    u = (torch.randn(1, T, H, K) / K).requires_grad_()

    def run():
        vla_api.vla(q, k, v, u, cu_seqlens=cu, backend="chunk")[0].sum().backward()

    splits = (lambda name, rho: per_sequence, vla_api.split_packed)
    a, b = (with_split(vla_api, "split_packed", s, lambda: median_s(run, repeats)) for s in splits)
    return f"| VLA `chunk`, H 2, K 64, {len(lengths)} sequences | per_sequence: {a:.3f} s | per_length: {b:.3f} s |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(2)
    rows = [64] * 72 + [128] * 14 + [256] * 42  # a 128-row batch of Zoology's mix, by its weights
    print(describe("cpu"))
    print("| what | one way | the other |\n|---|---|---|")
    print(zoology_step(args.repeats), flush=True)
    print(short_conv(rows, args.repeats), flush=True)
    print(gdn_chunk(rows, args.repeats), flush=True)
    print(vla_chunk(rows[::2], args.repeats), flush=True)


if __name__ == "__main__":
    main()
