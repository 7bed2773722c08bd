"""An experiment's finished runs in `runs.jsonl.gz`: packed from the working folders, read back in their place (a
fresh clone has only the archive), found by other experiments for reuse, shown by `progress`."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from linattn.experiments import runner
from linattn.experiments.archive import ARCHIVE_NAME, finished_in, pack, read_archive
from linattn.experiments.progress import progress
from linattn.experiments.runner import run_one
from tests.experiments.test_experiments import TINY, tiny_plan


def test_packed_runs_stand_in_for_their_folders(tmp_path, monkeypatch, one_thread):
    out = tmp_path / "tiny" / "paper-quick"
    specs = tiny_plan("paper", True, ("vla",))
    first = [run_one(s, out / "runs" / s.id, progress=False) for s in specs]
    assert pack(out) == out / ARCHIVE_NAME and pack(out).read_bytes() == pack(out).read_bytes()  # same runs, same bytes
    archived = read_archive(out / ARCHIVE_NAME)
    assert sorted(archived) == sorted(s.id for s in specs)
    assert archived[specs[0].id].metrics and archived[specs[0].id].where == f"tiny/paper-quick/runs/{specs[0].id}"

    shutil.rmtree(out / "runs")  # what a fresh clone has: the archive alone
    monkeypatch.setattr(runner, "train", lambda *a, **k: pytest.fail("trained again"))
    assert [run_one(s, out / "runs" / s.id, progress=False) for s in specs] == json.loads(json.dumps(first))
    assert finished_in(out).keys() == archived.keys()
    assert f"{len(specs)} of 4 runs finished" in progress(TINY, "paper", True, tmp_path)

    # another experiment training the same finds the archived run and copies it, metrics included
    copy = run_one(specs[0], tmp_path / "other" / "paper" / "runs" / specs[0].id, progress=False, reuse_root=tmp_path)
    assert copy["reused_from"] == f"tiny/paper-quick/runs/{specs[0].id}" and copy["test"] == first[0]["test"]
    assert (tmp_path / "other" / "paper" / "runs" / specs[0].id / "metrics.jsonl").read_text().count("\n") == len(
        archived[specs[0].id].metrics
    )


def test_an_archived_run_of_another_training_is_refused(tmp_path, one_thread):
    out = tmp_path / "tiny" / "paper"
    spec = tiny_plan("paper", True, ("gated_deltanet",))[0]
    record = run_one(spec, out / "runs" / spec.id, progress=False)
    (out / "runs" / spec.id / "result.json").write_text(json.dumps({**record, "key": "0123456789abcdef"}))
    pack(out)
    shutil.rmtree(out / "runs")
    with pytest.raises(ValueError, match=f"{ARCHIVE_NAME}: its result is of another training"):
        run_one(spec, out / "runs" / spec.id, progress=False)


def test_an_unreadable_archive_names_itself(tmp_path):
    path = tmp_path / "x" / "paper" / ARCHIVE_NAME
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress(b'{"result": {"id": "a"}, "metrics": []}\nnot json\n'))
    with pytest.raises(ValueError, match=f"{path}: not a readable archive of runs"):
        read_archive(path)
    assert pack(tmp_path / "nothing-here") is None


def test_an_unreadable_result_blocks_only_its_own_run(tmp_path, one_thread):
    """A damaged result.json or archive of another experiment is skipped with a warning that names it; a run's own
    damaged result is refused with its path, not retrained over."""
    (tmp_path / "broken" / "paper" / "runs" / "x").mkdir(parents=True)
    (tmp_path / "broken" / "paper" / "runs" / "x" / "result.json").write_text('{"id": "x", "test": ')
    (tmp_path / "gone" / "paper").mkdir(parents=True)
    (tmp_path / "gone" / "paper" / ARCHIVE_NAME).write_bytes(b"not gzip")
    spec = tiny_plan("paper", True, ("vla",))[0]
    with pytest.warns(UserWarning, match="result.json: not a readable result") as caught:
        record = run_one(spec, tmp_path / "tiny" / "paper" / "runs" / spec.id, progress=False, reuse_root=tmp_path)
    assert any(ARCHIVE_NAME in str(w.message) for w in caught) and "reused_from" not in record

    own = tmp_path / "tiny" / "paper" / "runs" / spec.id / "result.json"
    own.write_text("{")
    with pytest.raises(ValueError, match=f"{own}: not a readable result"):
        run_one(spec, own.parent, progress=False)
