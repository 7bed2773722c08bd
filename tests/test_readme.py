"""The README's API tour runs as written, and the generated blocks of the README and docs/results.md are what
`linattn tables` makes of the committed results."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from linattn.experiments import report, tables

REPO = Path(__file__).resolve().parents[1]
README, RESULTS_PAGE = REPO / "README.md", REPO / "docs" / "results.md"


def test_api_tour_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python block"
    namespace: dict = {}  # the blocks build on each other, as a reader runs them
    for code in blocks:
        exec(compile(code, str(README), "exec"), namespace)


@pytest.mark.parametrize(
    ("page", "begin", "end", "generate"),
    [
        (RESULTS_PAGE, tables.BEGIN, tables.END, lambda root, link: tables.capacity_tables(root)),
        (RESULTS_PAGE, tables.ZOOLOGY_BEGIN, tables.ZOOLOGY_END, tables.zoology_tables),
        (README, report.BEGIN, report.END, report.readme_block),
    ],
    ids=["capacity", "zoology", "claims"],
)
def test_generated_blocks_are_current(page, begin, end, generate, monkeypatch):
    monkeypatch.chdir(REPO)  # the claims' evidence links are relative to the repository root
    block = page.read_text().split(begin, 1)[1].split(end, 1)[0]
    link = Path(os.path.relpath(REPO / "results", page.parent)).as_posix()
    assert block.strip() == generate(Path("results"), link).strip(), f"run `linattn tables --write {page.name}`"


def test_relative_links_resolve():
    """Every relative link of the user-facing pages names a file or folder of the repository."""
    pages = [README, RESULTS_PAGE, REPO / "BENCHMARKS.md", *(REPO / "docs").glob("*.md"), *REPO.glob("linattn/**/*.md")]
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(REPO)}: broken link {target}"
