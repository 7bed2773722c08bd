"""Scratch (not part of the library): Gated DeltaNet on `zoology-mqar --quick` (d 64, lr 3e-3) with one part changed.

    PYTHONPATH=. python benchmarks/h200-2026-12-03/session39/gdn_probe.py VARIANT [--seeds N] [--out DIR]

Why: on the H200 every mixer of `zoology-mqar` with an output gate (GDN, KLA, CCQ-GDN, GLA, Mamba-2) ended its lr
3e-3 runs at d ≥ 128 near a training loss of ln 4096 (the values' chance), where DeltaNet, which differs from GDN by
its decay and its output gate only, did its best at that rate.
VARIANT, each trained as the quick run is (`run_one`, one thread):
- `default`: GDN as it is;
- `no-decay`: `g = 0` (GDN's layer without its decay);
- `no-gate`: without the output gate `SiLU(W_g x)` (`output_gate=False`, mixer `gated_deltanet-no_gate`);
- `neither`: both of the above (DeltaNet's mixing, GDN's parameters otherwise);
- `A-small`: `A = 0.1` in every head (the decay starts slow: `exp(−0.1 Δ)` a token);
- `deltanet`: DeltaNet's layer, for reference.
Prints the test `acc_example_mean` (the seeds' mean, then each), and where the layer has its output gate, seed 0's
mean |SiLU(W_g x)| on a batch of the test mix, per layer, at initialisation and after training (`gates`).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace
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
    parser.add_argument("--seeds", type=int, default=1, help="replicates (initial weights and batches), 0, 1, …")
    parser.add_argument("--out", type=Path, default=Path("/tmp/gdn-probe"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    patch(args.variant)
    mixer = {"deltanet": "deltanet", "no-gate": "gated_deltanet-no_gate", "neither": "gated_deltanet-no_gate"}.get(
        args.variant, "gated_deltanet"
    )
    spec = next(s for s in plan("fair", True, (mixer,)) if s.x == 64)
    start, scores = time.time(), []
    for replicate in range(args.seeds):
        record = run_one(replace(spec, replicate=replicate), args.out / args.variant / str(replicate), progress=False)
        scores.append(record["test"]["acc_example_mean"])
    print(
        f"{args.variant}: test acc_example_mean {sum(scores) / len(scores):.3f} (seeds: "
        f"{', '.join(f'{a:.3f}' for a in scores)}; {time.time() - start:.0f} s)"
    )
    if args.variant in ("default", "no-decay", "A-small"):
        inputs = eval_set(spec, spec.train.seed, spec.test_task)[0].inputs
        torch.manual_seed(spec.training.seed)
        model = DecoderLM(spec.model)
        at_init = gates(model, inputs)
        model.load_state_dict(load_checkpoint(args.out / args.variant / "0" / CHECKPOINT_NAME)["model"])
        trained = gates(model, inputs)
        print(f"  seed 0's mean |SiLU(W_g x)| by layer: at init {at_init}, trained {trained}")


if __name__ == "__main__":
    main()
