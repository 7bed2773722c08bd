"""GPU training-step benchmark: a small model's whole step in the trainer (draw the batch, forward, backward, clip,
AdamW update), eager and replayed from CUDA graphs (`train(cuda_graph=True)`, `linattn.train.graph`), alone and as
N processes training at once, which is how `linattn run --jobs N` shares one GPU.

The model and task: the VLA paper's TinyLM on MQAR (n = 24 pairs, 64 rows of 73 tokens), or with `--experiment
NAME` that experiment's first run of each mixer (its first protocol): its own model, task and batch size, so that
a step is timed as that experiment trains it, its batches drawn on the host included.

A model this small is bound by the host: its eager step launches many kernels that each take the GPU little time.
A graph launches them at once, so a process alone runs at the GPU's pace; N processes share the GPU by turns,
unless an MPS daemon (`nvidia-cuda-mps-control -d`) lets their kernels run side by side. The header says whether
one is there. The N processes start together but are not synchronised: their first windows, compiles and captures
included, are left out of each median.

Run on a CUDA machine: `python -m linattn.bench train-step [--mixers gated_deltanet,vla] [--experiment kla-stack]
[--processes 1,16] [--steps 300] [--json FILE]`. A process's step time is the median over the trainer's log windows
(25 steps each) after the first two, which hold the compiles, the autotuning and the captures.
"""

from __future__ import annotations

import itertools
import multiprocessing
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import torch

from linattn.experiments.mixers import MIXERS
from linattn.experiments.runner import threads_per_job
from linattn.models import DecoderLM, ModelConfig, preset
from linattn.tasks import VLAMQARConfig, generate
from linattn.train import TrainConfig, supervised_cross_entropy, train

N_PAIRS, ROWS = 24, 64
LOG_EVERY = 25
MODES = {"eager": False, "graph": True}  # mode -> cuda_graph


@dataclass(frozen=True)
class Setup:
    """What one process trains: a model, its task and the rows of a batch."""

    mixer: str
    model: ModelConfig
    task: object
    rows: int


def setups(mixers: list[str], experiment: str | None) -> list[Setup]:
    """Each mixer's `Setup`: the TinyLM on MQAR, or `experiment`'s first run of that mixer."""
    unknown = [m for m in mixers if m not in MIXERS]
    if unknown:
        raise ValueError(f"--mixers: unknown {unknown}; expected names of {sorted(MIXERS)}")
    if experiment is None:
        return [
            Setup(m, preset("vla-tinylm", mixer=MIXERS[m].layer, mixer_options=MIXERS[m].options, max_seq_len=128),
                  VLAMQARConfig(n_pairs=N_PAIRS), ROWS)
            for m in mixers
        ]  # fmt: skip
    from linattn.experiments.registry import EXPERIMENTS

    if experiment not in EXPERIMENTS:
        raise ValueError(f"--experiment: unknown {experiment!r}; expected one of {sorted(EXPERIMENTS)}")
    e = EXPERIMENTS[experiment]
    specs = e.plan(e.protocols[0], False, tuple(mixers))
    first = {s.mixer: s for s in reversed(specs)}
    return [Setup(m, first[m].model, first[m].task, first[m].train.batch_size) for m in mixers]


def step_ms(setup: Setup, mode: str, steps: int, threads: int | None = None) -> float:
    """Milliseconds a training step of `setup` on the GPU in `mode` (median of the log windows after the first two),
    on `threads` CPU threads (default: torch's)."""
    if threads is not None:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = DecoderLM(setup.model)
    config = TrainConfig(
        steps=steps, batch_size=setup.rows, warmup_steps=10, eval_every=0, checkpoint_every=0, log_every=LOG_EVERY
    )
    records: list[dict] = []
    train(
        model, config, lambda step, gen: generate(setup.task, setup.rows, gen), None, None, device="cuda",
        progress=False, loss_fn=supervised_cross_entropy, cuda_graph=MODES[mode], on_metrics=records.append,
    )  # fmt: skip
    elapsed = [r["elapsed_s"] for r in records]
    return statistics.median(1e3 * (b - a) / LOG_EVERY for a, b in itertools.pairwise(elapsed[1:]))


def _at_once(setup: Setup, mode: str, steps: int, processes: int) -> list[float]:
    """Each of `processes` concurrent processes' `step_ms`."""
    if processes == 1:
        return [step_ms(setup, mode, steps)]
    threads = threads_per_job(processes)  # as `linattn run --jobs` shares the cores
    context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        return list(pool.map(step_ms, *zip(*[(setup, mode, steps, threads)] * processes)))


def run(mixers: list[str], processes: list[int], steps: int, experiment: str | None = None) -> list[dict]:
    """One row per mixer and process count: in each mode, the median process's step (ms) and all processes' steps a
    second."""
    chosen = setups(mixers, experiment)
    if not processes or min(processes) < 1:
        raise ValueError(f"--processes: expected counts ≥ 1, got {processes}")
    if steps < 4 * LOG_EVERY:
        raise ValueError(f"--steps: expected at least {4 * LOG_EVERY} (four log windows of {LOG_EVERY}), got {steps}")
    rows = []
    for setup in chosen:
        for n in processes:
            row = {"mixer": setup.mixer, "processes": n}
            for mode in MODES:
                ms = _at_once(setup, mode, steps, n)
                row[f"{mode}_ms"] = statistics.median(ms)
                row[f"{mode}_steps_per_s"] = sum(1e3 / x for x in ms)
            rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| mixer | processes | eager ms / step | graphed ms / step | eager steps / s, all | graphed steps / s, all "
        "| graphed ÷ eager |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        gain = r["graph_steps_per_s"] / r["eager_steps_per_s"]
        lines.append(
            f"| {r['mixer']} | {r['processes']} | {r['eager_ms']:.2f} | {r['graph_ms']:.2f} | "
            f"{r['eager_steps_per_s']:,.0f} | {r['graph_steps_per_s']:,.0f} | {gain:.2f}× |"
        )
    return "\n".join(lines) + "\n"
