"""Scratch (not part of the library): where a training step of the KLA experiments' model goes, host or GPU.

    PYTHONPATH=. python benchmarks/h200-2026-12-01/session29/profile_step.py [--device cuda] [--steps 40]

Why: on the H200 a `kla-mqar` run (d_model 256, 2 layers, T = 256) took 25 ms a step alone and 9 runs at once each
went at 40% of 3's speed (session 27): if a step is the host's (kernel launches, the CPU's MQAR batches), CUDA
graphs or batches made on the GPU would let one device call train more runs; if it is the GPU's, neither would.

For each mixer, the library's own `train()` on `kla-mqar`'s spec (no evals, no checkpoints): `--steps` updates after
10 of warm-up, under `torch.profiler`. Per step: the wall time, the GPU's kernel time (the sum over its kernels),
the kernel launches, and the time in the batch function (MQAR generation on the CPU and the copy to the device). The
wall time includes each `train()` call's setup (the model moved, the optimizer built), spread over the steps.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from linattn.experiments.kla_recall import mqar_plan
from linattn.models import DecoderLM
from linattn.tasks import generate
from linattn.train import train


def _kernel_events(prof) -> list:
    """The profiler's GPU kernel events (not memcpy or memset, nor the GPU-side copies of `record_function` ranges
    such as the optimizer's step, which torch's own device totals leave out too)."""
    kinds = (torch.autograd.DeviceType.CUDA,)
    return [e for e in prof.events() if e.device_type in kinds and not e.is_user_annotation
            and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]  # fmt: skip


def profile_mixer(mixer: str, device: str, steps: int) -> dict:
    spec = next(s for s in mqar_plan("paper", False, (mixer,)) if s.train.lr == 1e-3)
    data_s = [0.0]

    def batch(step: int, gen: torch.Generator):
        start = time.perf_counter()
        b = generate(spec.task, spec.train.batch_size, gen)
        data_s[0] += time.perf_counter() - start
        return b

    def run(n: int) -> float:
        config = replace(
            spec.train,
            steps=n,
            eval_every=0,
            checkpoint_every=0,
            warmup_steps=min(5, n - 1),
            early_stop_metric=None,
            patience=0,
        )
        torch.manual_seed(0)
        model = DecoderLM(spec.model)
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        train(model, config, batch, None, None, device=device, progress=False)
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    run(10)  # compiles the kernels
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    data_s[0] = 0.0
    with profile(activities=activities) as prof:
        profiled = run(steps)
    profiled_data = data_s[0]
    data_s[0] = 0.0
    wall = run(steps)  # without the profiler's own overhead
    kernels = _kernel_events(prof)
    gpu_us = sum(e.time_range.elapsed_us() for e in kernels)
    return {
        "mixer": mixer,
        "batch_size": spec.train.batch_size,
        "seq_len": spec.task.seq_len,
        "wall_ms_per_step": 1e3 * wall / steps,
        "profiled_wall_ms_per_step": 1e3 * profiled / steps,
        "gpu_kernel_ms_per_step": gpu_us / 1e3 / steps,
        "launches_per_step": len(kernels) / steps,
        "batch_fn_ms_per_step": 1e3 * profiled_data / steps,
        "batch_fn_ms_per_step_unprofiled": 1e3 * data_s[0] / steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--mixers", default="gated_deltanet,kla,mamba2")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = parser.parse_args()
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"# {name}, torch {torch.__version__}, kla-mqar's model, {args.steps} steps after 10 of warm-up")
    print("| mixer | wall ms/step | GPU kernel ms/step | launches/step | batch fn ms/step |")
    print("|---|---:|---:|---:|---:|", flush=True)
    rows = []
    for mixer in args.mixers.split(","):
        r = profile_mixer(mixer, args.device, args.steps)
        rows.append(r)
        print(f"| {mixer} | {r['wall_ms_per_step']:.2f} | {r['gpu_kernel_ms_per_step']:.2f} | "
              f"{r['launches_per_step']:.0f} | {r['batch_fn_ms_per_step_unprofiled']:.2f} |", flush=True)  # fmt: skip
        # after each mixer: a call's timeout keeps what finished
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "profile-step.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
