"""A timing run's finished blocks: kept as each ends, reused by a run that resumes, measured again where the hardware
or the setup changed, and a line cut by a kill skipped."""

from __future__ import annotations

import json

from linattn.experiments import blocks
from linattn.experiments.blocks import FinishedBlocks


def counting(calls: list, value: int):
    def measure():
        calls.append(value)
        return [{"value": value}]

    return measure


def test_a_finished_block_is_not_measured_again(tmp_path):
    calls = []
    first = FinishedBlocks(tmp_path, "cpu", {"Ts": (1, 2)})
    assert first.rows("T=1", counting(calls, 1)) == [{"value": 1}]
    resumed = FinishedBlocks(tmp_path, "cpu", {"Ts": (1, 2)})  # tuples, as the setup is given again
    assert resumed.rows("T=1", counting(calls, 10)) == [{"value": 1}]
    assert resumed.rows("T=2", counting(calls, 2)) == [{"value": 2}]
    assert calls == [1, 2] and resumed.resumed == ["T=1"]


def test_other_setups_and_hardware_are_measured_again(tmp_path):
    calls = []
    FinishedBlocks(tmp_path, "cpu", {"Ts": (1,)}).rows("T=1", counting(calls, 1))
    assert FinishedBlocks(tmp_path, "cpu", {"Ts": (1, 2)}).rows("T=1", counting(calls, 2)) == [{"value": 2}]
    path = tmp_path / "blocks.jsonl"
    entry = json.loads(path.read_text().splitlines()[0])
    entry["stamp"]["hardware"]["torch"] = "0.0"  # a block timed under another torch
    path.write_text(json.dumps(entry) + "\n")
    assert FinishedBlocks(tmp_path, "cpu", {"Ts": (1,)}).rows("T=1", counting(calls, 3)) == [{"value": 3}]
    assert calls == [1, 2, 3]


def test_a_line_cut_by_a_kill_is_skipped(tmp_path):
    calls = []
    FinishedBlocks(tmp_path, "cpu", {}).rows("a", counting(calls, 1))
    with open(tmp_path / "blocks.jsonl", "a") as f:
        f.write('{"key": "b", "sta')
    resumed = FinishedBlocks(tmp_path, "cpu", {})
    assert resumed.rows("a", counting(calls, 2)) == [{"value": 1}]
    assert resumed.rows("b", counting(calls, 3)) == [{"value": 3}]
    assert FinishedBlocks(tmp_path, "cpu", {}).rows("b", counting(calls, 4)) == [{"value": 3}]
    assert calls == [1, 3]


def test_without_a_folder_every_block_is_measured(tmp_path):
    calls = []
    for _ in range(2):
        FinishedBlocks(None, "cpu", {}).rows("a", counting(calls, 1))
    assert calls == [1, 1] and not list(tmp_path.iterdir())


def test_a_change_of_code_is_measured_again(tmp_path, monkeypatch):
    calls = []
    FinishedBlocks(tmp_path, "cpu", {}).rows("a", counting(calls, 1))
    monkeypatch.setattr(blocks, "code_version", lambda: "another")
    assert FinishedBlocks(tmp_path, "cpu", {}).rows("a", counting(calls, 2)) == [{"value": 2}]
    assert calls == [1, 2]
