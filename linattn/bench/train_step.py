"""GPU training-step benchmark: the VLA paper's TinyLM on MQAR (n = 24 pairs, 64 rows of 73 tokens), the trainer's
whole step (draw the batch, forward, backward, clip, AdamW update), eager and replayed from CUDA graphs
(`train(cuda_graph=True)`, `linattn.train.graph`), alone and as N processes training at once, which is how
`linattn run --jobs N` shares one GPU.

A model this small is bound by the host: its eager step launches many kernels that each take the GPU little time.
A graph launches them at once, so a process alone runs at the GPU's pace; N processes share the GPU by turns,
unless an MPS daemon (`nvidia-cuda-mps-control -d`) lets their kernels run side by side. The header says whether
one is there. The N processes start together but are not synchronised: their first windows, compiles and captures
included, are left out of each median.

Run on a CUDA machine: `python -m linattn.bench train-step [--mixers gated_deltanet,vla] [--processes 1,16]
[--steps 300] [--json FILE]`. A process's step time is the median over the trainer's log windows (25 steps each)
after the first two, which hold the compiles, the autotuning and the captures.
"""

from __future__ import annotations

import multiprocessing
import statistics
from concurrent.futures import ProcessPoolExecutor

import torch

from linattn.experiments.mixers import MIXERS
from linattn.models import DecoderLM, preset
from linattn.tasks import VLAMQARConfig, generate
from linattn.train import TrainConfig, supervised_cross_entropy, train

N_PAIRS, ROWS = 24, 64
LOG_EVERY = 25


def step_ms(mixer: str, cuda_graph: bool, steps: int) -> float:
    """Milliseconds a training step of `mixer`'s TinyLM on the GPU (median of the log windows after the first two)."""
    torch.manual_seed(0)
    m = MIXERS[mixer]
    model = DecoderLM(preset("vla-tinylm", mixer=m.layer, mixer_options=m.options, max_seq_len=128))
    task = VLAMQARConfig(n_pairs=N_PAIRS)
    config = TrainConfig(
        steps=steps, batch_size=ROWS, warmup_steps=10, eval_every=0, checkpoint_every=0, log_every=LOG_EVERY
    )
    records: list[dict] = []
    train(
        model, config, lambda step, gen: generate(task, ROWS, gen), None, None, device="cuda", progress=False,
        loss_fn=supervised_cross_entropy, cuda_graph=cuda_graph, on_metrics=records.append,
    )  # fmt: skip
    tokens = generate(task, ROWS, torch.Generator()).inputs.numel()  # a step's input tokens
    return statistics.median(1e3 * tokens / r["tokens_per_s"] for r in records[2:])


def _at_once(mixer: str, cuda_graph: bool, steps: int, processes: int) -> list[float]:
    """Each of `processes` concurrent processes' `step_ms`."""
    if processes == 1:
        return [step_ms(mixer, cuda_graph, steps)]
    context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        return list(pool.map(step_ms, *zip(*[(mixer, cuda_graph, steps)] * processes)))


def run(mixers: list[str], processes: list[int], steps: int) -> list[dict]:
    """One row per mixer and process count: the median process's step (ms) and all processes' steps a second, eager
    and graphed."""
    unknown = [m for m in mixers if m not in MIXERS]
    if unknown:
        raise ValueError(f"--mixers: unknown {unknown}; expected names of {sorted(MIXERS)}")
    if not processes or min(processes) < 1:
        raise ValueError(f"--processes: expected counts ≥ 1, got {processes}")
    if steps < 4 * LOG_EVERY:
        raise ValueError(f"--steps: expected at least {4 * LOG_EVERY} (four log windows of {LOG_EVERY}), got {steps}")
    rows = []
    for mixer in mixers:
        for n in processes:
            row = {"mixer": mixer, "processes": n}
            for mode, graphed in (("eager", False), ("graph", True)):
                ms = _at_once(mixer, graphed, steps, n)
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
