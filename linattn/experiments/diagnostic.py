"""A named diagnostic: a measurement of untrained (or given) models, not a training sweep.

`linattn run NAME [--quick]` writes `results/NAME/default[-quick]/{results.json, table.md, plot.png}`, each file
atomically (`default-cuda[-quick]` for a diagnostic whose numbers are the device's, such as timings, run on a
GPU); an existing `results.json` is kept unless `force` (then the folder is discarded and measured again), as for
`Experiment`. A resumable diagnostic keeps its finished parts in the folder's `work/` until the report is written, so
that a run killed part way (a GPU job's time limit) goes on from them when run again without `force`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from linattn.bench.environment import describe
from linattn.experiments.experiment import report_header
from linattn.io import write_atomic


@dataclass(frozen=True)
class Diagnostic:
    name: str
    description: str
    measure: Callable[[bool, str], dict]  # (quick, device) -> the measurements, JSON-serialisable
    table: Callable[[dict], str]  # results.json's content -> the markdown body of table.md
    plot: Callable[[dict, Path], None]  # results.json's content, the PNG path
    per_device: bool = False  # the results describe the hardware (timings): a GPU run gets its own folder
    # `measure(quick, device, work=FOLDER)` keeps its finished parts there (a trained model's checkpoints, a timing
    # run's blocks: `blocks.FinishedBlocks`), so that a killed run resumes; the folder goes once the report is written
    resumable: bool = False

    def output_dir(self, root: Path, quick: bool, device: str = "cpu") -> Path:
        gpu = self.per_device and device.startswith("cuda")
        return Path(root) / self.name / ("default" + ("-cuda" if gpu else "") + ("-quick" if quick else ""))

    def run(self, *, quick: bool, device: str, root: Path, force: bool, command: str) -> Path:
        """Measure and write the report (unless it exists and not `force`); returns the output folder."""
        out = self.output_dir(root, quick, device)
        if force and out.exists():
            shutil.rmtree(out)
        # a run cut short leaves `work/` (a finished one removes it): resumed, it replaces the report it came to replace
        unfinished = self.resumable and (out / "work").exists()
        if (out / "results.json").exists() and not unfinished:
            print(f"{out / 'results.json'} exists: kept (use --force to run again)")
            return out
        if unfinished:
            print(f"{out}: resuming the run cut short (its finished parts in work/)")
        results = {
            "experiment": self.name,
            "description": self.description,
            "quick": quick,
            "command": command,
            "environment": describe(device),
            **self.measure(quick, device, **({"work": out / "work"} if self.resumable else {})),
        }
        table = self.report(results)
        # results.json last: its presence marks the folder complete (a rerun keeps it)
        write_atomic(out / "table.md", table)
        self.plot(results, out / "plot.png")
        write_atomic(out / "results.json", json.dumps(results, indent=2))
        shutil.rmtree(out / "work", ignore_errors=True)
        print(table)
        return out

    def report(self, results: dict) -> str:
        """table.md: a header (what, the command, where it ran), then the diagnostic's own tables."""
        title = f"{results['experiment']}{' (quick)' if results['quick'] else ''}"
        return "\n".join([*report_header(results, title), self.table(results).rstrip("\n"), ""])
