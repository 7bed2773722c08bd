"""Scratch (not part of the library): how many `zoology-mqar` training steps one GPU gives per second, with `--jobs`
runs at once as `linattn run --jobs` trains them (spawned processes, each with its share of the CPU's threads).

    PYTHONPATH=. python benchmarks/h200-2026-12-02/session36/concurrency_probe.py --jobs 12 --tag no-mps

Why: sessions 35 and 36 trained `zoology-mqar` 12 runs at a time, each at 117 – 222 ms a step (32K tokens, d 64 –
512), while a step of such a model is many small kernels. Without CUDA MPS the GPU runs one process's kernels at a time;
if that is what bounds the calls, MPS (`scripts/cuda_mps.sh`) would fit more runs in a device minute.

Each process trains its own copy of one run's spec (`--mixer`, `--width`, lr 1e-3) with the library's `train()` and
`--loss` (`supervised`: the runs' loss since 56346c0, the head at the targets only; `all`: the head everywhere;
`packed`: the rows packed into one with `cu_seqlens`): 10
steps of warm-up (the kernels compile), then `--steps` timed ones, no evals, no checkpoints. One JSON line per probe
is appended to `$OUT/concurrency-probe.jsonl`; the table line is printed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from dataclasses import replace
from pathlib import Path

import torch

from linattn.experiments.zoology import plan
from linattn.models import DecoderLM
from linattn.tasks import IGNORE, generate
from linattn.train import supervised_cross_entropy, token_cross_entropy, train


def packed_cross_entropy(model: torch.nn.Module, batch) -> torch.Tensor:
    """`supervised_cross_entropy` on the rows packed into one (`Batch.packed`, `cu_seqlens`): one forward pass without
    the padding, where `supervised_cross_entropy` makes one per length (added in session 37)."""
    inputs, targets, cu_seqlens = batch.packed()
    supervised = targets != IGNORE  # [1, N]
    logits, _ = model(inputs, cu_seqlens=cu_seqlens, logits_at=supervised)  # [n, V]
    return torch.nn.functional.cross_entropy(logits.float(), targets[supervised])


# the head at the targets (today: a mixture's rows one length at a time), everywhere, or at the targets of the rows
# packed into one
LOSSES = {"supervised": supervised_cross_entropy, "all": token_cross_entropy, "packed": packed_cross_entropy}


def _timed(mixer: str, width: int, loss: str, steps: int, threads: int, device: str, barrier, results) -> None:
    """Puts the seconds of `steps` training steps of the run's model, after 10 untimed ones (all processes start
    timing together) on `results`."""
    torch.set_num_threads(threads)
    spec = next(s for s in plan("fair", False, (mixer,)) if s.x == width and s.train.lr == 1e-3)

    def run(n: int) -> float:
        config = replace(
            spec.train, steps=n, warmup_steps=1, eval_every=0, checkpoint_every=0, early_stop_metric=None, patience=0
        )
        torch.manual_seed(0)
        model = DecoderLM(spec.model)
        start = time.perf_counter()
        train(model, config, lambda step, gen: generate(spec.task, spec.train.batch_size, gen), None, None,
              device=device, progress=False, loss_fn=LOSSES[loss])  # fmt: skip
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    run(10)
    barrier.wait()
    results.put(run(steps))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--mixer", default="gated_deltanet")
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--loss", choices=sorted(LOSSES), default="supervised")
    parser.add_argument("--tag", default="")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = parser.parse_args()
    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(args.jobs), context.Queue()
    work = (args.mixer, args.width, args.loss, args.steps, threads, args.device, barrier, results)
    start = time.perf_counter()
    processes = [context.Process(target=_timed, args=work) for _ in range(args.jobs)]
    for p in processes:
        p.start()
    seconds = [results.get() for _ in processes]
    for p in processes:
        p.join()
    wall = time.perf_counter() - start
    per_step_ms = [1e3 * s / args.steps for s in seconds]
    row = {
        "tag": args.tag,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else args.device,
        "mixer": args.mixer,
        "width": args.width,
        "loss": args.loss,
        "jobs": args.jobs,
        "steps": args.steps,
        "ms_per_step": per_step_ms,
        "steps_per_s_all": sum(1e3 / ms for ms in per_step_ms),
        "wall_s": wall,
    }
    spread = f"{min(per_step_ms):.1f} – {max(per_step_ms):.1f}"
    print(f"| {args.tag} | {args.mixer} d {args.width} | {args.loss} | {args.jobs} | {spread}"
          f" | {row['steps_per_s_all']:.1f} | {wall:.0f} |", flush=True)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "concurrency-probe.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
