"""An experiment's finished training runs, kept as one compressed file beside its report.

While a run trains, its folder `runs/<id>/` holds its checkpoint, its metrics log and, once finished, its
`result.json` (`runner.run_one`); these folders are working files, not part of the repository. When an experiment's
command ends, `pack` gathers every finished run of its folder into `runs.jsonl.gz`: one JSON object a line,
`{"result": <result.json>, "metrics": [<metrics.jsonl rows>]}`, sorted by run id. A run found there counts as
finished, exactly as its folder's `result.json` would: a fresh clone resumes, extends and reports an experiment from
the archive alone.
"""

from __future__ import annotations

import gzip
import json
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from linattn.io import write_atomic
from linattn.train.trainer import METRICS_NAME

ARCHIVE_NAME = "runs.jsonl.gz"
RUNS_NAME = "runs"  # the folder of the runs' working folders, beside the archive
RESULT_NAME = "result.json"  # a finished run's record, in its working folder


@dataclass(frozen=True)
class FinishedRun:
    record: dict  # its `result.json`
    metrics: tuple[dict, ...]  # its metrics log, one dict a logged step (empty where none was kept)
    where: str  # `<experiment>/<variant>/runs/<id>`, relative to the results root


def read_archive(path: Path) -> dict[str, FinishedRun]:
    """The runs of the archive at `path` by id (none if it does not exist); an unreadable one is an error that
    names it."""
    if not path.exists():
        return {}
    folder = f"{path.parent.parent.name}/{path.parent.name}/{RUNS_NAME}"
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            entries = [json.loads(line) for line in f if line.strip()]
        return {
            e["result"]["id"]: FinishedRun(e["result"], tuple(e["metrics"]), f"{folder}/{e['result']['id']}")
            for e in entries
        }
    except (OSError, EOFError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a readable archive of runs ({type(e).__name__}: {e})") from e


def read_folder(run_dir: Path) -> FinishedRun | None:
    """The finished run in the working folder `run_dir` (its `result.json` and metrics log), or None; an unreadable
    one is an error that names the file."""
    result = run_dir / RESULT_NAME
    if not result.exists():
        return None
    where = f"{run_dir.parent.parent.parent.name}/{run_dir.parent.parent.name}/{RUNS_NAME}/{run_dir.name}"
    try:
        record = json.loads(result.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{result}: not a readable result ({type(e).__name__}: {e})") from e
    log = run_dir / METRICS_NAME
    try:
        lines = log.read_text().splitlines() if log.exists() else []
        metrics = tuple(json.loads(line) for line in lines if line.strip())
    except (OSError, ValueError):
        metrics = ()  # the log is a record of the training, not its result: a damaged one is left out
    return FinishedRun(record, metrics, where)


def finished_in(out: Path, *, skip_unreadable: bool = False) -> dict[str, FinishedRun]:
    """Every finished run of the experiment folder `out`, by id: its archive's, and its working folders' (which win:
    a folder is newer than an archive packed from it). An unreadable archive or result is an error naming its file,
    or with `skip_unreadable` a warning, the rest read on."""

    def guarded(read, path: Path, default):
        try:
            return read(path)
        except ValueError as e:
            if not skip_unreadable:
                raise
            warnings.warn(f"skipped: {e}", stacklevel=4)
            return default

    runs = guarded(read_archive, out / ARCHIVE_NAME, {})
    for run_dir in sorted((out / RUNS_NAME).glob("*/")):
        if (run := guarded(read_folder, run_dir, None)) is not None:
            runs[run_dir.name] = run
    return runs


def finished_under(root: Path) -> Iterator[FinishedRun]:
    """Every finished run of every experiment under the results root `root` (`<experiment>/<variant>/`); one that
    cannot be read is skipped with a warning naming its file, so that it blocks no other experiment."""
    folders = {p.parent for pattern in (ARCHIVE_NAME, RUNS_NAME) for p in Path(root).glob(f"*/*/{pattern}")}
    for out in sorted(folders):
        yield from finished_in(out, skip_unreadable=True).values()


def pack(out: Path) -> Path | None:
    """Gather the finished runs of the experiment folder `out` into its archive (written atomically; the working
    folders stay). Returns the archive's path, or None where there is nothing to keep."""
    runs = finished_in(out)
    if not runs:
        return None
    rows = [{"result": run.record, "metrics": list(run.metrics)} for _, run in sorted(runs.items())]
    lines = [json.dumps(row, sort_keys=True) for row in rows]
    data = gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)  # mtime 0: the same runs, the same bytes
    return write_atomic(out / ARCHIVE_NAME, data)
