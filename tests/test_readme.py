"""The README's API tour runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_api_tour_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python block"
    namespace: dict = {}  # the blocks build on each other, as a reader runs them
    for code in blocks:
        exec(compile(code, str(README), "exec"), namespace)


def test_results_tables_are_generated_from_results():
    from linattn.experiments.tables import BEGIN, END, capacity_tables

    block = README.read_text().split(BEGIN, 1)[1].split(END, 1)[0]
    assert block.strip() == capacity_tables(README.parent / "results").strip(), "run `linattn tables --write README.md`"


def test_zoology_tables_are_generated_from_results():
    from linattn.experiments.tables import ZOOLOGY_BEGIN, ZOOLOGY_END, zoology_tables

    block = README.read_text().split(ZOOLOGY_BEGIN, 1)[1].split(ZOOLOGY_END, 1)[0]
    assert block.strip() == zoology_tables(README.parent / "results").strip(), "run `linattn tables --write README.md`"
