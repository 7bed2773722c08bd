"""The fuzz harness (`python -m linattn.bench fuzz`) runs on the CPU, reports in its documented structure, and
draws the same cases for the same seed."""

from __future__ import annotations

import json

from linattn.bench import fuzz
from linattn.bench.__main__ import main as bench_main


def test_fuzz_command_reports_counts_and_findings(tmp_path, capsys):
    path = tmp_path / "fuzz.json"
    rc = bench_main(["fuzz", "--seconds", "5", "--seed", "3", "--json", str(path)])
    out = capsys.readouterr().out
    saved = json.loads(path.read_text())
    assert rc == (1 if saved["findings"] else 0)
    assert out.startswith("# linattn fuzz: seed 3, device cpu, 5 s, ")
    assert "| target | valid runs | invalid runs | clear errors | findings |" in out
    targets = [*fuzz.op_names(), *(f"layer:{n}" for n in fuzz.layer_names())]
    assert set(saved["counts"]) == set(targets) and saved["cases"] >= len(targets)
    for target in targets:
        assert f"| `{target}` |" in out
        counts = saved["counts"][target]
        assert counts["valid"] > 0 and counts["invalid"] > 0 and counts["clear"] <= counts["invalid"]
    assert sum(c["findings"] for c in saved["counts"].values()) == len(saved["findings"])
    assert f"## Findings: {len(saved['findings'])} (" in out
    for finding in saved["findings"]:
        assert finding["kind"] in fuzz.KINDS and finding["repro"].startswith(("import torch; ", fuzz.IMPORTS))
    assert saved["environment"]["torch"]


def test_fuzz_is_deterministic_given_the_seed():
    """The number of cases depends on the time given, the cases themselves on the seed alone."""
    runs = [fuzz.fuzz(600, seed=11, cases=20).to_json() for _ in range(2)]
    assert runs[0] == runs[1] and runs[0]["cases"] == 20
    assert fuzz.fuzz(600, seed=12, cases=20).to_json()["counts"] != runs[0]["counts"]


def test_fuzz_command_refuses_a_missing_device(capsys, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert bench_main(["fuzz", "--seconds", "1", "--device", "cuda"]) == 2
    assert bench_main(["fuzz", "--seconds", "1", "--device", "tpu"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
