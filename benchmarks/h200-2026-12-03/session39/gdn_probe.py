"""Scratch (not part of the library): Gated DeltaNet on `zoology-mqar --quick` (d 64, lr 3e-3) with one part changed.

    PYTHONPATH=. python benchmarks/h200-2026-12-03/session39/gdn_probe.py VARIANT [--out DIR]

Why: on the H200 every mixer of `zoology-mqar` with an output gate (GDN, KLA, CCQ-GDN, GLA, Mamba-2) ended its lr
3e-3 runs at d ≥ 128 near a training loss of ln 4096 (the values' chance), where DeltaNet, which differs from GDN by
its decay and its output gate only, did its best at that rate.
VARIANT, each trained as the quick run is (`run_one`, one thread):
- `default`: GDN as it is;
- `no-decay`: `g = 0` (GDN's layer without its decay);
- `no-gate`: the output gate `SiLU(W_g x)` replaced by 1;
- `neither`: both of the above (DeltaNet's mixing, GDN's parameters otherwise);
- `A-small`: `A = 0.1` in every head (the decay starts slow: `exp(−0.1 Δ)` a token);
- `deltanet`: DeltaNet's layer, for reference.
Prints the test `acc_example_mean`, and where the layer has its output gate, its mean |SiLU(W_g x)| on a batch
of the test mix, per layer, at initialisation and after training (`gates`).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch

from linattn.experiments.runner import eval_set, run_one
from linattn.experiments.zoology import plan
from linattn.layers import gated_deltanet
from linattn.models import DecoderLM
from linattn.train.checkpoint import CHECKPOINT_NAME, load_checkpoint

VARIANTS = ("default", "no-decay", "no-gate", "neither", "A-small", "deltanet")


def patch(variant: str) -> None:
    """Changes GDN's classes in this process for `variant`."""
    decay_init, decay_forward = gated_deltanet.MambaDecay.__init__, gated_deltanet.MambaDecay.forward

    def init(self, d_model, n_heads, **options):
        decay_init(self, d_model, n_heads, **options)
        if variant == "A-small":
            self.A_log.data.fill_(math.log(0.1))

    def forward(self, x):
        g = decay_forward(self, x)
        return g * 0 if variant in ("no-decay", "neither") else g

    gated_deltanet.MambaDecay.__init__ = init
    gated_deltanet.MambaDecay.forward = forward
    if variant in ("no-gate", "neither"):
        gated_deltanet.F = NoGate()  # this module's one SiLU is its output gate's (the convolutions' are elsewhere)


class NoGate:
    """`torch.nn.functional` with `silu(x) = 1`."""

    def __getattr__(self, name):
        return getattr(torch.nn.functional, name)

    @staticmethod
    def silu(x):
        return torch.ones_like(x)


def gates(model: torch.nn.Module, inputs: torch.Tensor) -> list[float]:
    """Mean |SiLU(W_g x)| of each GDN layer's output gate on `inputs`."""
    means = []
    hooks = [
        m.g_proj.register_forward_hook(lambda _m, _x, y: means.append(float(torch.nn.functional.silu(y).abs().mean())))
        for m in model.modules()
        if isinstance(m, gated_deltanet.GatedDeltaNet)
    ]
    with torch.no_grad():
        model(inputs)
    for h in hooks:
        h.remove()
    return means


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variant", choices=VARIANTS)
    parser.add_argument("--out", type=Path, default=Path("/tmp/gdn-probe"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    patch(args.variant)
    mixer = "deltanet" if args.variant == "deltanet" else "gated_deltanet"
    spec = next(s for s in plan("fair", True, (mixer,)) if s.x == 64)
    start = time.time()
    record = run_one(spec, args.out / args.variant, progress=False)
    print(
        f"{args.variant}: test acc_example_mean {record['test']['acc_example_mean']:.3f} ({time.time() - start:.0f} s)"
    )
    if args.variant in ("default", "no-decay", "A-small"):
        inputs = eval_set(spec, spec.train.seed, spec.test_task)[0].inputs
        torch.manual_seed(spec.training.seed)
        model = DecoderLM(spec.model)
        at_init = gates(model, inputs)
        model.load_state_dict(load_checkpoint(args.out / args.variant / CHECKPOINT_NAME)["model"])
        trained = gates(model, inputs)
        print(f"  mean |SiLU(W_g x)| by layer: at init {at_init}, trained {trained}")


if __name__ == "__main__":
    main()
