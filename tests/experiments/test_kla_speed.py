"""KLA's speed diagnostic at toy size: the report's structure, the ratios it derives, the claims' verdicts and config
errors (no speed is asserted: benchmarks report it)."""

from __future__ import annotations

import json

import pytest

from linattn.cli import main
from linattn.experiments import claims, kla_speed
from linattn.experiments.registry import DIAGNOSTICS

TINY = kla_speed.KLASpeedConfig(Ts=(16, 48), context=20, d_model=32, n_heads=2, min_run_time=0.01)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_cli_writes_the_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(kla_speed.PRESETS, ("cpu", True), TINY)
    assert DIAGNOSTICS["kla-speed"] is kla_speed.DIAGNOSTIC
    assert main(["run", "kla-speed", "--quick", "--device", "cpu", "--out", str(tmp_path)]) == 0
    out = tmp_path / "kla-speed" / "default-quick"
    r = json.loads((out / "results.json").read_text())
    assert [(p["mixer"], p["T"]) for p in r["prefill"]] == [("GDN", 16), ("KLA", 16), ("GDN", 48), ("KLA", 48)]
    assert all(p["ms"] > 0 for p in r["prefill"]) and [d["mixer"] for d in r["decode"]] == ["GDN", "KLA"]
    ms = {(p["mixer"], p["T"]): p["ms"] for p in r["prefill"]}
    assert r["prefill_ratio"]["48"] == pytest.approx(ms["KLA", 48] / ms["GDN", 48])
    gdn, kla = r["decode"]
    assert r["decode_speedup"]["recurrent"] == pytest.approx(gdn["step_ms"] / kla["step_ms"])
    text = (out / "table.md").read_text()
    assert "# kla-speed (quick)" in text and "| 48 | " in text and "## One decoded token after 20" in text
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()


def test_the_claims_verdicts(tmp_path):
    def verdicts(prefill_ratio, recurrent):
        results = {
            "device": "cuda",
            "config": {"context": 32768},
            "prefill_ratio": {"8192": 2.0, "131072": prefill_ratio},
            "decode_speedup": {"recurrent": recurrent, "rerun": 1.0},
        }
        folder = tmp_path / str(prefill_ratio) / str(recurrent) / "kla-speed" / "default-cuda"
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(results))
        claim = {c.claim: c for c in claims.CLAIMS}
        return [
            claim[text].evaluate(folder.parents[1]) for text in ("prefill latency KLA ≈ GDN", "decode 2.1× GDN at 32K")
        ]

    (prefill, decode) = verdicts(1.05, 1.0)
    assert prefill == ("KLA / GDN 1.05× at T = 131,072; CUDA", "holds")
    assert decode == ("1.00× recurrent, 1.00× re-running the context, at 32,768; CUDA", "does not hold")
    assert [v for _, v in verdicts(1.2, 1.5)] == ["does not hold", "partly"]
    assert [v for _, v in verdicts(0.95, 2.0)] == ["holds", "holds"]


def test_config_errors_name_the_argument():
    with pytest.raises(ValueError, match="^Ts: expected increasing"):
        kla_speed.KLASpeedConfig(Ts=(64, 16), context=8)
    with pytest.raises(ValueError, match="^context: expected an int >= 1"):
        kla_speed.KLASpeedConfig(Ts=(16,), context=0)
    with pytest.raises(ValueError, match="^dtype: expected one of"):
        kla_speed.KLASpeedConfig(Ts=(16,), context=8, dtype="float16")
