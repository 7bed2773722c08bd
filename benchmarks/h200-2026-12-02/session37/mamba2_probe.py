"""Scratch (not part of the library): Mamba-2 on `zoology-mqar --quick` (d 64, lr 3e-3) with one part changed.

    PYTHONPATH=. python benchmarks/h200-2026-12-02/session37/mamba2_probe.py VARIANT [--out DIR]

Why: on the H200 Mamba-2 learned almost nothing in `zoology-mqar` (test accuracy ≤ 0.071 at every width) where the
same layer reached 0.995 in `kla-mqar`. VARIANT, each trained as the quick run is (`run_one`, one thread):
- `default`: the layer as it is (`A ~ U(1, 16)`, `Δ ~ logU[1e-3, 0.1]`);
- `A-small`: `A = 0.1` in every head (a slower decay);
- `dt-large`: `Δ ~ logU[0.05, 0.5]` (larger writes, a faster decay);
- `both`: the two above;
- `unit-BC`: `B` and `C` scaled to unit norm after their convolution, as GDN's keys and queries.
Prints the test `acc_example_mean`.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from linattn.experiments.runner import run_one
from linattn.experiments.zoology import plan
from linattn.layers import gated_deltanet, mamba2

VARIANTS = ("default", "A-small", "dt-large", "both", "unit-BC")


def patch(variant: str) -> None:
    """Changes the layer's classes in this process for `variant`."""
    decay_init, projections = gated_deltanet.MambaDecay.__init__, mamba2.ConvProjections.forward

    def init(self, d_model, n_heads, *, dt_min=1e-3, dt_max=0.1):
        if variant in ("dt-large", "both"):
            dt_min, dt_max = 0.05, 0.5
        decay_init(self, d_model, n_heads, dt_min=dt_min, dt_max=dt_max)
        if variant in ("A-small", "both"):
            self.A_log.data.fill_(math.log(0.1))

    def forward(self, x, state, cu_seqlens):
        h, new = projections(self, x, state, cu_seqlens)
        if "B" in h:  # Mamba-2's projections (x, B, C), not another layer's
            h = {**h, "B": F.normalize(h["B"], dim=-1), "C": F.normalize(h["C"], dim=-1)}
        return h, new

    gated_deltanet.MambaDecay.__init__ = init
    if variant == "unit-BC":
        mamba2.ConvProjections.forward = forward


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variant", choices=VARIANTS)
    parser.add_argument("--out", type=Path, default=Path("/tmp/mamba2-probe"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    patch(args.variant)
    spec = next(s for s in plan("fair", True, ("mamba2",)) if s.x == 64)
    start = time.time()
    record = run_one(spec, args.out / args.variant, progress=False)
    print(
        f"{args.variant}: test acc_example_mean {record['test']['acc_example_mean']:.3f} ({time.time() - start:.0f} s)"
    )


if __name__ == "__main__":
    main()
