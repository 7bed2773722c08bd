"""A timing run that resumes: its finished blocks, kept in the run's work folder, so that a run cut short (a GPU
job's time limit) goes on where it stopped instead of starting over.

A block is the unit whose numbers are compared with each other (every contender at one shape, every model at one
length), so one block's rows always come from one process on one device: a resumed run's ratios are still measured
side by side. A block finished on other hardware, under another torch, Triton or version of the package's code, or
under another setup, is measured again; the report names the blocks it resumed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from linattn.bench.environment import describe

STAMPED = ("gpu", "cuda", "cpu", "torch")  # what a block's numbers depend on, of `describe`'s facts


def code_version() -> str:
    """A hash of the package's Python sources and the Triton version: the kernels a block timed."""
    try:
        triton = metadata.version("triton")
    except metadata.PackageNotFoundError:  # no Triton off Linux
        triton = "none"
    digest = hashlib.sha256(triton.encode())
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


class FinishedBlocks:
    """`work/blocks.jsonl`: a line per finished block, `{"key", "stamp", "rows"}`, appended and synced as each
    block ends (a line a kill cut short is skipped). `work=None`: nothing kept, every block measured."""

    def __init__(self, work: Path | None, device: str, setup: dict):
        self.path = None if work is None else Path(work) / "blocks.jsonl"
        facts = describe(device)
        # through JSON, so that a stamp read back (tuples as lists) compares equal
        hardware = {k: facts[k] for k in STAMPED if k in facts}
        self.stamp = json.loads(json.dumps({"hardware": hardware, "code": code_version(), "setup": setup}))
        self.done: dict[str, list[dict]] = {}
        self.resumed: list[str] = []  # the keys of the blocks taken from an earlier process
        text = self.path.read_text() if self.path is not None and self.path.exists() else ""
        self.cut = bool(text) and not text.endswith("\n")  # the next line starts on a line of its own
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("stamp") == self.stamp:
                self.done[entry["key"]] = entry["rows"]

    def rows(self, key: str, measure: Callable[[], list[dict]]) -> list[dict]:
        """The block's rows: kept ones if it finished before, else `measure()`'s, kept before they are returned."""
        if key in self.done:
            print(f"# {key}: resumed from {self.path}", file=sys.stderr, flush=True)
            self.resumed.append(key)
            return self.done[key]
        rows = measure()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write("\n" * self.cut + json.dumps({"key": key, "stamp": self.stamp, "rows": rows}) + "\n")
                f.flush()
                os.fsync(f.fileno())
            self.cut = False
        self.done[key] = rows
        return rows
