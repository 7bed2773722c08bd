"""The README's API tour runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from linattn.experiments import tables

README = Path(__file__).resolve().parents[1] / "README.md"


def test_api_tour_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python block"
    namespace: dict = {}  # the blocks build on each other, as a reader runs them
    for code in blocks:
        exec(compile(code, str(README), "exec"), namespace)


@pytest.mark.parametrize(
    ("begin", "end", "generate"),
    [
        (tables.BEGIN, tables.END, tables.capacity_tables),
        (tables.ZOOLOGY_BEGIN, tables.ZOOLOGY_END, tables.zoology_tables),
    ],
    ids=["capacity", "zoology"],
)
def test_results_tables_are_generated_from_results(begin, end, generate):
    block = README.read_text().split(begin, 1)[1].split(end, 1)[0]
    assert block.strip() == generate(README.parent / "results").strip(), "run `linattn tables --write README.md`"
