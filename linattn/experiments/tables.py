"""The results tables of the README and of docs/results.md, generated from the committed `results/` (never typed by
hand).

`linattn tables` prints the two MQAR tables; `linattn tables --write FILE` fills each generated block FILE holds:
between `<!-- results:begin -->` and `<!-- results:end -->` the VLA paper's MQAR capacity, between
`<!-- zoology:begin -->` and `<!-- zoology:end -->` Zoology's MQAR, and between `<!-- claims:begin -->` and
`<!-- claims:end -->` the claims' tally (`report.readme_block`). Tests check the files hold what this generates.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from linattn.experiments.archive import finished_in
from linattn.experiments.experiment import THEN, hardware, seeds_text, summarize
from linattn.experiments.mixers import VLA_COMPARISON
from linattn.experiments.paper import VLA_MQAR_CAPACITY
from linattn.io import write_atomic

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
ZOOLOGY_BEGIN, ZOOLOGY_END = "<!-- zoology:begin -->", "<!-- zoology:end -->"
CAPACITY, ZOOLOGY = "vla-mqar-capacity", "zoology-mqar"
FAIR_MIXERS = (*VLA_COMPARISON, "softmax-conv")


def _runs(folder: Path) -> list[dict]:
    return [run.record for _, run in sorted(finished_in(folder).items())]


def _machines(records: list[dict]) -> list[str]:
    """The hardware the training runs record, each once."""
    return sorted({r.get("hardware", "hardware unrecorded") for r in records})


def _without_device(command: str) -> str:
    """The command line(s) of a result without `--device` and what follows it, each of an extended result's
    commands (joined by `experiment.THEN`)."""
    return THEN.join(part.split(" --device")[0] for part in command.split(THEN))


def capacity_tables(root: Path = Path("results")) -> str:
    """Markdown: the paper protocol beside the paper's table, then the fair protocol (lr sweeps so far)."""
    paper_dir, fair_dir = root / CAPACITY / "paper", root / CAPACITY / "fair"
    if not (paper_dir / "results.json").exists():
        raise FileNotFoundError(f"--results: no {paper_dir / 'results.json'} (run `linattn run {CAPACITY}` first)")
    paper = json.loads((paper_dir / "results.json").read_text())
    ns = sorted({int(x) for row in paper["table"].values() for x in row})
    seeds = paper.get("seeds", 1)
    lines = [
        f"**Paper protocol** (`{_without_device(paper['command'])}`; {hardware(paper)}): 3000 steps, batch 64, "
        f"lr 3e-4, {'one seed' if seeds == 1 else f'the median of {seeds_text(paper)}'}. Ours, with the paper's "
        "number in parentheses.",
        "",
        "| n_pairs | " + " | ".join(paper["mixers"]) + " |",
        "|---:|" + "---:|" * len(paper["mixers"]),
    ]
    for n in ns:
        cells = []
        for m in paper["mixers"]:
            cell = f"{paper['table'][m][str(n)]:.3f}"
            if m in VLA_MQAR_CAPACITY:
                cell += f" ({VLA_MQAR_CAPACITY[m][n]:.3f})"
            cells.append(cell)
        lines.append(f"| {n} | " + " | ".join(cells) + " |")

    records = _runs(fair_dir)
    if not records:
        not_run = f"**Fair protocol**: not run yet (`linattn run {CAPACITY} --protocol fair`)."
        return "\n".join([*lines, "", not_run]) + "\n"
    sweep = len({r["lr"] for r in records})
    summary = summarize(records)
    complete = {m for m in FAIR_MIXERS if sum(r["mixer"] == m for r in records) == sweep * len(ns)}
    shown = [m for m in FAIR_MIXERS if m in summary["acc"]]
    missing = [m for m in FAIR_MIXERS if m not in shown]
    partial = [m for m in shown if m not in complete]
    machines = ", ".join(_machines(records))
    lines += [
        "",
        f"**Fair protocol** (`linattn run {CAPACITY} --protocol fair`; {machines}): batch 256, up to "
        f"5000 steps (stop at validation accuracy ≥ 0.995), lr ∈ {{3e-4, 1e-3, 3e-3}} chosen per cell on validation; "
        "test accuracy."
        + (" `*`: the lr sweep of that mixer is not complete (best of the runs finished so far)." if partial else "")
        + (f" Not run yet: {', '.join(missing)}." if missing else ""),
        "",
        "| n_pairs | " + " | ".join(m + ("" if m in complete else "*") for m in shown) + " |",
        "|---:|" + "---:|" * len(shown),
    ]
    for n in ns:
        cells = [f"{summary['acc'][m][str(n)]:.3f}" if str(n) in summary["acc"][m] else "—" for m in shown]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def zoology_tables(root: Path = Path("results"), link: str = "results") -> str:
    """Markdown: Zoology's MQAR, one row per mixer and one column per width: the test accuracy at the learning rate
    chosen on validation with the state size beside it, then every learning rate's test accuracy (the sweep). Its
    links lead to `link`, the results root as the page that shows them reaches it."""
    folder = root / ZOOLOGY / "fair"
    if not (folder / "results.json").exists():
        raise FileNotFoundError(f"--results: no {folder / 'results.json'} (run `linattn run {ZOOLOGY}` first)")
    results = json.loads((folder / "results.json").read_text())
    metric, mixers, sizes = results["metric"], results["mixers"], results["state_size"]
    widths = sorted({int(x) for row in results["table"].values() for x in row})
    lrs = sorted({r["lr"] for r in results["runs"]})
    tested = {(r["mixer"], r["x"], r["lr"]): r["test"][metric] for r in results["runs"]}
    references = "; ".join(
        f"{m} {a:.2f} at {int(float(n)):,} floats" for m, row in results["paper"].items() for n, a in row.items()
    )
    header = "| mixer | " + " | ".join(f"d {d}" for d in widths) + " |"
    rule = "|---|" + "---:|" * len(widths)
    lines = [
        f"**Zoology MQAR** (`{_without_device(results['command'])}`; runs on {', '.join(_machines(results['runs']))}, "
        f"{results['environment']['date']}): test accuracy, each example's averaged as Zoology scores it, at the "
        f"learning rate chosen per cell on validation; in parentheses the state size in floats (all layers, at "
        f"T = 1,024; softmax attention's is its KV cache). The published reference points: {references}. "
        f"[Plot]({link}/{ZOOLOGY}/fair/plot.png), [table]({link}/{ZOOLOGY}/fair/table.md).",
        "",
        header,
        rule,
    ]
    for m in mixers:
        cells = [f"{results['table'][m][str(d)]:.3f} ({sizes[m][str(d)]:,})" for d in widths]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    sweep = " / ".join(f"{lr:g}" for lr in lrs)
    below = results.get("lr_below")
    edge = f" (lr {below:g} only where {lrs[1]:g}, the grid's lowest, was the best; –: not run)" if below else ""
    lines += ["", f"Every run's test accuracy, lr {sweep}{edge}:", "", header, rule]
    for m in mixers:
        cells = [" / ".join(f"{tested[m, d, lr]:.3f}" if (m, d, lr) in tested else "–" for lr in lrs) for d in widths]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _replace_block(text: str, begin: str, end: str, content: str, where: Path) -> str:
    if begin not in text or end not in text:
        raise ValueError(f"{where}: expected the markers {begin} and {end}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{content}{end}{tail}"


def write_page(page: Path, root: Path = Path("results")) -> None:
    """Fill every generated block `page` holds (at least one): the two MQAR results, the claims' tally."""
    from linattn.experiments import report

    link = Path(os.path.relpath(root, page.parent)).as_posix()  # the results root, seen from the page
    blocks = {
        (BEGIN, END): lambda: capacity_tables(root),
        (ZOOLOGY_BEGIN, ZOOLOGY_END): lambda: zoology_tables(root, link),
        (report.BEGIN, report.END): lambda: report.readme_block(root, link),
    }
    text = page.read_text()
    held = [(begin, end, make) for (begin, end), make in blocks.items() if begin in text]
    if not held:
        markers = ", ".join(begin for begin, _ in blocks)
        raise ValueError(f"{page} holds none of the generated blocks ({markers})")
    for begin, end, make in held:
        text = _replace_block(text, begin, end, make(), page)
    write_atomic(page, text)
