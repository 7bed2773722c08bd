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
    names = list(kla_speed.MIXERS)
    assert names == ["GDN", "KLA", "Mamba-2"]
    assert [(p["mixer"], p["T"]) for p in r["prefill"]] == [(n, T) for T in (16, 48) for n in names]
    assert all(p["ms"] > 0 for p in r["prefill"]) and [d["mixer"] for d in r["decode"]] == names
    assert all("step_gpu_ms" not in d for d in r["decode"])  # the GPU's busy time: on CUDA only
    ms = {(p["mixer"], p["T"]): p["ms"] for p in r["prefill"]}
    assert r["prefill_ratio"]["48"] == pytest.approx(ms["KLA", 48] / ms["GDN", 48])
    gdn, kla, _ = r["decode"]
    assert r["decode_speedup"]["recurrent"] == pytest.approx(gdn["step_ms"] / kla["step_ms"])
    text = (out / "table.md").read_text()
    assert "# kla-speed (quick)" in text and "| 48 | " in text and "## One decoded token after 20" in text
    assert "| T | GDN (ms) | KLA (ms) | Mamba-2 (ms) | KLA / GDN |" in text and "over Mamba-2's" in text
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()


def test_the_claims_verdicts(tmp_path):
    claim = {c.claim: c for c in claims.CLAIMS}
    prefill, decode, mamba = (claim[text] for text in ("prefill latency KLA ≈ GDN", "decode 2.1× GDN at 32K",
                                                      "decode 1.7× Mamba-2 at 32K"))  # fmt: skip

    def verdicts(prefill_ratio, steps, device="cuda", busy=None):
        """`steps`: mixer -> a recurrent step's ms (the re-run 10× it); `busy`: mixer -> its GPU busy ms."""
        rows = [{"mixer": m, "step_ms": ms, "rerun_ms": 10 * ms, **({"step_gpu_ms": busy[m]} if busy else {})}
                for m, ms in steps.items()]  # fmt: skip
        results = {"device": device, "config": {"context": 32768}, "decode": rows,
                   "prefill_ratio": {"8192": prefill_ratio, "131072": prefill_ratio}}  # fmt: skip
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        folder = root / "kla-speed" / "default-cuda"
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(results))
        return [c.evaluate(root) for c in (prefill, decode, mamba)]

    p, d, m = verdicts(1.05, {"GDN": 0.9, "KLA": 0.7})  # a host-bound step, no busy time, no Mamba-2
    assert (p.ours, p.verdict) == ("KLA / GDN 1.05× at T = 131,072; CUDA", "holds")
    assert d.verdict == "inconclusive" and "the host's launches" in d.why
    assert d.why.endswith("needs `linattn run kla-speed --device cuda --force`")
    assert m.verdict == "not yet measured" and m.ours == "— (no 'Mamba-2' in kla-speed/default-cuda)"
    busy = {"GDN": 0.1, "KLA": 0.1, "Mamba-2": 0.13}
    p, d, m = verdicts(1.0, {"GDN": 0.9, "KLA": 0.9, "Mamba-2": 0.9}, busy=busy)
    assert (d.verdict, m.verdict) == ("does not hold", "partly") and d.ours.endswith("GPU busy time 1.00×")
    _, d, _ = verdicts(1.0, {"GDN": 8.0, "KLA": 4.0, "Mamba-2": 6.8}, device="cpu")  # a step the host does not bound
    assert d.verdict == "holds"
    p, d, _ = verdicts(1.3, {"GDN": 8.0, "KLA": 4.0, "Mamba-2": 6.8}, device="cpu")
    # the control: KLA and GDN, the same work, must time alike, or no speed ratio is read
    assert p.verdict == "does not hold" and d.verdict == "inconclusive" and "prefill 1.30×" in d.why


def test_config_errors_name_the_argument():
    with pytest.raises(ValueError, match="^Ts: expected increasing"):
        kla_speed.KLASpeedConfig(Ts=(64, 16), context=8)
    with pytest.raises(ValueError, match="^context: expected an int >= 1"):
        kla_speed.KLASpeedConfig(Ts=(16,), context=0)
    with pytest.raises(ValueError, match="^dtype: expected one of"):
        kla_speed.KLASpeedConfig(Ts=(16,), context=8, dtype="float16")
