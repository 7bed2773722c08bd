"""How far an experiment's training runs have got, read from its archive and run folders alone: `linattn progress NAME`.

An experiment writes its table only when every run is in; one that takes several jobs of limited time (Zoology's
108 runs) shows its state here meanwhile: each run's test metric once it finished, the step of its checkpoint (where
it resumes) once it began, a dash before.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from linattn.experiments.archive import RUNS_NAME, FinishedRun, finished_in
from linattn.experiments.experiment import Experiment, seed_counts, summarize
from linattn.experiments.runner import RunSpec
from linattn.train.checkpoint import CHECKPOINT_NAME, load_checkpoint
from linattn.train.trainer import METRICS_NAME


def progress(
    experiment: Experiment,
    protocol: str,
    quick: bool,
    root: Path,
    seeds: int | None = None,
    mixers: tuple[str, ...] | None = None,
) -> str:
    """A markdown summary: how many of the runs finished and began, then one row per mixer, setting (and seed) and
    one column per learning rate, each cell the run's test metric, `step N` (its checkpoint's, where it resumes;
    `step N (log M)` where the log is ahead: a run training now, or one stopped since its checkpoint) or `–` (below
    the grid, `lr_below`, only the runs that began; seeds after the first at the rate the first chose, once it has
    every rate). `mixers` None: the result's where it has one (else the experiment's), and any other with a
    finished run; else those (as `linattn run --mixers` named them). `seeds` None: each mixer's seeds as its result
    and finished runs count them, and any replicate begun beyond; else every mixer `seeds`."""
    out = experiment.output_dir(root, protocol, quick)
    runs, finished_runs = out / RUNS_NAME, finished_in(out)
    result = out / "results.json"
    counts = seed_counts(json.loads(result.read_text())) if result.exists() else dict.fromkeys(experiment.mixers, 1)
    for run in finished_runs.values():
        mixer = run.record["mixer"]
        counts[mixer] = max(counts.get(mixer, 1), 1 + run.record.get("replicate", 0))
    if mixers is not None:
        counts = {mixer: counts.get(mixer, 1) for mixer in mixers}

    def begun(spec: RunSpec) -> bool:
        return spec.id in finished_runs or (runs / spec.id).exists()

    plan = experiment.plan(protocol, quick, tuple(counts))
    chosen = _chosen(plan, finished_runs, experiment.metric)
    specs = []
    for spec in plan:
        specs.append(spec)  # the first seed: every learning rate
        i, n = 1, counts[spec.mixer] if seeds is None else seeds
        while i < n or (seeds is None and begun(replace(spec, replicate=i))):
            later = replace(spec, replicate=i)
            if spec.train.lr == chosen.get((spec.mixer, str(spec.x))) or begun(later):
                specs.append(later)
            i += 1
    lrs = sorted({s.train.lr for s in specs})
    rows: dict[str, dict[float, str]] = {}
    finished = begun = 0
    for spec in specs:
        cell, state = _cell(runs / spec.id, finished_runs, experiment.metric)
        finished += state == "finished"
        begun += state == "begun"
        rows.setdefault(_row(spec), {})[spec.train.lr] = cell
    if experiment.lr_below is not None and not quick:  # the runs below the grid's edge that began (`edge_runs`)
        lowest = min(lrs)
        for spec in specs:
            edge = replace(spec, train=replace(spec.train, lr=experiment.lr_below))
            if spec.train.lr == lowest and ((runs / edge.id).exists() or edge.id in finished_runs):
                rows[_row(edge)][edge.train.lr] = _cell(runs / edge.id, finished_runs, experiment.metric)[0]
                lrs = sorted({*lrs, edge.train.lr})
    title = f"{experiment.name} — protocol `{protocol}`{' (quick)' if quick else ''}"
    counts = f"{finished} of {len(specs)} runs finished, {begun} begun"
    lines = [
        f"{title}: {counts}; test `{experiment.metric}` by learning rate",
        "",
        f"| mixer, {experiment.x_name} | " + " | ".join(f"lr {lr:g}" for lr in lrs) + " |",
        "|---|" + "---:|" * len(lrs),
    ]
    lines += [f"| {row} | " + " | ".join(cells.get(lr, "") for lr in lrs) + " |" for row, cells in rows.items()]
    return "\n".join(lines) + "\n"


def _chosen(plan: list[RunSpec], finished: dict[str, FinishedRun], metric: str) -> dict[tuple[str, str], float]:
    """`(mixer, setting) -> lr` where the first seed has finished at every rate of the grid: the rate the later
    seeds train at (`experiment.seed_runs`; a rate below the grid counts once it finished)."""
    rates: dict[tuple[str, str], list[str]] = {}
    for spec in plan:
        rates.setdefault((spec.mixer, str(spec.x)), []).append(spec.id)
    done = {key for key, ids in rates.items() if all(i in finished for i in ids)}
    records = [r.record for r in finished.values() if not r.record.get("replicate")]
    return {
        (mixer, x): lr
        for mixer, by_x in summarize([r for r in records if (r["mixer"], str(r["x"])) in done], metric)["lr"].items()
        for x, lr in by_x.items()
    }


def _row(spec: RunSpec) -> str:
    return f"{spec.mixer}, {spec.x}" + (f", seed {spec.replicate}" if spec.replicate else "")


def _cell(run_dir: Path, finished: dict[str, FinishedRun], metric: str) -> tuple[str, str]:
    """`(what the table shows, "finished" | "begun" | "not begun")` for one run: in `finished` (the experiment's
    finished runs, `archive.finished_in`), or begun in its working folder `run_dir`."""
    if run_dir.name in finished:
        value = finished[run_dir.name].record["test"].get(metric)
        return ("n/a" if value is None else f"{value:.3f}"), "finished"
    log, checkpoint = run_dir / METRICS_NAME, run_dir / CHECKPOINT_NAME
    steps = [json.loads(line).get("step", 0) for line in log.read_text().splitlines()] if log.exists() else []
    if not steps and not checkpoint.exists():
        return "–", "not begun"
    logged = max(steps, default=0)
    try:
        saved = load_checkpoint(checkpoint, mmap=True)["run"]["step"] if checkpoint.exists() else 0
    except ValueError:  # one damaged file must not hide the others' progress; resuming it names the file
        return f"step ? (log {logged}; unreadable checkpoint)", "begun"
    return f"step {saved}" + (f" (log {logged})" if logged > saved else ""), "begun"
