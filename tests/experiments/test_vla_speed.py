"""The speed diagnostic at toy size: the report's structure, the speed-up and crossover arithmetic on times whose
answer is known, the claims' verdicts, and config errors (no speed is asserted: benchmarks report it)."""

from __future__ import annotations

import json

import pytest

from linattn.bench import contenders
from linattn.cli import main
from linattn.experiments import claims, vla_speed
from linattn.experiments.registry import DIAGNOSTICS

TINY = contenders.SpeedConfig(Ts=(16, 32, 64), head_dims=(8,), H=2, loop_max_T=32, min_run_time=0.01)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_cli_writes_the_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(vla_speed.PRESETS, ("cpu", True), TINY)
    name = "vla-speed"
    assert DIAGNOSTICS[name] is vla_speed.DIAGNOSTIC
    assert main(["run", name, "--quick", "--device", "cpu", "--out", str(tmp_path)]) == 0
    out = tmp_path / name / "default-quick"
    r = json.loads((out / "results.json").read_text())
    assert r["experiment"] == name and r["device"] == "cpu" and r["config"]["Ts"] == [16, 32, 64]
    assert r["contenders"] == [  # no triton here
        "VLA chunk", "VLA token loop", "softmax (SDPA)", "linear attention", "GDN (delta_rule)", "KLA (delta_rule)",
        "CCQ-GDN",
    ]  # fmt: skip
    assert len(r["rows"]) == 3 * 7
    for row in r["rows"]:
        if row["contender"] == "VLA token loop" and row["T"] > 32:
            assert row["note"] == "not timed beyond T = 32" and "fwd_ms" not in row
        else:
            assert row["fwd_ms"] > 0 and row["fwdbwd_ms"] > 0, row
    for p in vla_speed.PASSES:
        assert r["speedup"]["8"][p]["T"] == 32
        assert r["crossover"]["8"][p]["T_max"] == 64
    text = (out / "table.md").read_text()
    assert f"# {name} (quick)" in text and "## Forward + backward, K = V = 8 (ms)" in text
    assert "| 64 | " in text and "not timed beyond T = 32" in text and "## The paper's claims" in text
    assert "## Against GDN" in text and "| T (K = V = 8) | VLA | KLA (delta_rule) | CCQ-GDN |" in text
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()


def test_a_run_cut_short_resumes_from_its_finished_blocks(tmp_path, monkeypatch, capsys):
    """Killed in its last (K, T) block, the run keeps the blocks before it; run again (no --force) it times only
    the rest, in place of the report it was started to replace, and the work folder goes with the new report."""
    monkeypatch.setitem(vla_speed.PRESETS, ("cpu", True), TINY)
    timed, time_contender = [], vla_speed.time_contender

    def killed_at_64(contender, x, K, config, device):
        if x["q"].shape[1] == 64:
            raise KeyboardInterrupt
        timed.append(x["q"].shape[1])
        return time_contender(contender, x, K, config, device)

    monkeypatch.setattr(vla_speed, "time_contender", killed_at_64)
    command = ["run", "vla-speed", "--quick", "--device", "cpu", "--out", str(tmp_path)]
    assert main(command) == 130  # interrupted
    out = tmp_path / "vla-speed" / "default-quick"
    assert len((out / "work" / "blocks.jsonl").read_text().splitlines()) == 2 and not (out / "results.json").exists()
    (out / "results.json").write_text("{}")  # the report an earlier run left, which this one was started to replace

    def counted(contender, x, K, config, device):
        timed.append(x["q"].shape[1])
        return time_contender(contender, x, K, config, device)

    timed.clear()
    monkeypatch.setattr(vla_speed, "time_contender", counted)
    assert main(command) == 0
    assert timed == [64] * 7 and not (out / "work").exists()
    results = json.loads((out / "results.json").read_text())
    assert len(results["rows"]) == 3 * 7 and results["resumed"] == ["K=8 T=16", "K=8 T=32"]
    capsys.readouterr()


def test_crossover_of_power_laws_is_exact():
    """Linear against quadratic time: `0.01 T` and `1e-6 T²` meet at T = 10⁴, between grid points."""
    Ts = (1024, 4096, 16384, 65536)
    c = vla_speed.crossover({T: 0.01 * T for T in Ts}, {T: 1e-6 * T**2 for T in Ts})
    assert c["T"] == pytest.approx(1e4, rel=1e-9) and not c["from_start"]
    assert c["T_max"] == 65536 and c["ratio_at_T_max"] == pytest.approx(1e4 / 65536)
    assert vla_speed.crossover_text(c) == "T ≈ 10.0K"


def test_crossover_is_where_ours_stays_faster():
    """A dip below 1 that comes back up is not the crossover; the last crossing from above is."""
    ours = {1: 2.0, 2: 0.5, 4: 2.0, 8: 0.5}
    c = vla_speed.crossover(ours, dict.fromkeys(ours, 1.0))
    assert c["T"] == pytest.approx(4 * 2**0.5)  # r = 2 at T = 4, 1/2 at T = 8: r = 1 halfway in log T


def test_crossover_none_and_from_the_start():
    ref = {100: 1.0, 1000: 1.0}
    none = vla_speed.crossover({100: 4.0, 1000: 2.0}, ref)
    assert none["T"] is None and not none["from_start"] and none["ratio_at_T_max"] == 2.0
    assert vla_speed.crossover_text(none) == "none up to T = 1,000 (VLA / softmax 2×)"
    start = vla_speed.crossover({100: 0.5, 1000: 0.25}, ref)
    assert start["T"] is None and start["from_start"]
    assert vla_speed.crossover_text(start) == "from the shortest T"
    only_common = vla_speed.crossover({100: 4.0, 1000: 0.5, 5000: 0.1}, ref)  # T = 5000 has no reference
    assert only_common["T_max"] == 1000
    with pytest.raises(ValueError, match="^ours, reference"):
        vla_speed.crossover({100: 1.0}, {200: 1.0})


def test_speedup_and_fastest_times():
    rows = [
        {"contender": "VLA chunk", "K": 8, "T": 16, "fwd_ms": 2.0, "fwdbwd_ms": 6.0},
        {"contender": "VLA triton", "K": 8, "T": 16, "fwd_ms": 1.0, "fwdbwd_ms": 9.0},
        {"contender": "VLA chunk", "K": 8, "T": 32, "fwd_ms": 4.0, "fwdbwd_ms": 12.0},
        {"contender": "VLA triton", "K": 8, "T": 32, "note": "ValueError: not available"},
        {"contender": "VLA token loop", "K": 8, "T": 16, "fwd_ms": 30.0, "fwdbwd_ms": 120.0},
        {"contender": "VLA token loop", "K": 8, "T": 32, "note": "not timed beyond T = 16"},
        {"contender": "VLA chunk", "K": 16, "T": 16, "fwd_ms": 100.0, "fwdbwd_ms": 100.0},
    ]
    chunked = vla_speed.times(rows, contenders.VLA_CHUNKED, 8, "fwd")
    assert chunked == {16: 1.0, 32: 4.0}  # the fastest chunked backend at each T
    loop = vla_speed.times(rows, (contenders.LOOP,), 8, "fwd")
    assert vla_speed.speedup(chunked, loop) == {"T": 16, "ratio": 30.0}
    assert vla_speed.speedup(vla_speed.times(rows, contenders.VLA_CHUNKED, 8, "fwdbwd"), {32: 60.0}) == {
        "T": 32,
        "ratio": 5.0,
    }
    assert vla_speed.speedup(chunked, {64: 1.0}) is None


def _results(device: str, speedups: dict, crossovers: dict, kla_over_gdn: float = 1.0, **ms: float) -> dict:
    """A run's derived numbers, and rows at one T: KLA and GDN (the timer's control) and any contender in `ms`."""
    rows = [{"contender": "GDN (delta_rule)", "K": 32, "T": 64, "fwd_ms": 1.0, "fwdbwd_ms": 1.0},
            {"contender": "KLA (delta_rule)", "K": 32, "T": 64, "fwd_ms": 1.0, "fwdbwd_ms": kla_over_gdn}]  # fmt: skip
    rows += [{"contender": name, "K": 32, "T": 64, "fwd_ms": t, "fwdbwd_ms": t} for name, t in ms.items()]
    return {"device": device, "speedup": speedups, "crossover": crossovers, "config": {"head_dims": [32]},
            "rows": rows}  # fmt: skip


def _cross(T, T_max=8192, from_start=False, ratio=0.5):
    return {"T": T, "from_start": from_start, "T_max": T_max, "ratio_at_T_max": ratio}


def test_claim_verdicts(tmp_path):
    claim = {c.claim: c for c in claims.CLAIMS}
    speed = claim["chunked VLA is 14× faster than sequential Python"]
    cross = claim["VLA crosses below softmax attention at ≈ 43K tokens"]
    overhead = claim["the Sherman–Morrison gate costs ≈ 5× the operations of linear attention"]
    ccq = claim["the covariance read costs little"]
    s = lambda f: {"fwd": {"T": 4096, "ratio": f}, "fwdbwd": {"T": 4096, "ratio": 3 * f}}
    x = lambda T, **kw: {"fwd": _cross(T, **kw), "fwdbwd": _cross(T, **kw)}
    cases = [
        (speed, _results("cpu", {"32": s(15.0), "128": s(20.0)}, {}), "holds"),
        (speed, _results("cpu", {"32": s(13.9)}, {}), "partly"),  # forward short of 14×, forward + backward past it
        (speed, _results("cpu", {"32": s(15.0), "128": s(5.0)}, {}), "partly"),
        (speed, _results("cuda", {"32": s(2.0)}, {}), "does not hold"),
        (speed, _results("cuda", {"32": s(2.0)}, {}, kla_over_gdn=1.5), "inconclusive"),  # the timer's control
        (cross, _results("cuda", {}, {"32": x(40_000.0, T_max=65536), "128": x(None, T_max=65536)}), "holds"),
        (cross, _results("cpu", {}, {"32": x(40_000.0, T_max=65536)}), "partly"),  # a CPU never decides it
        (cross, _results("cuda", {}, {"32": x(9_000.0, T_max=65536)}), "partly"),
        (cross, _results("cuda", {}, {"32": x(None, T_max=65536, ratio=1.5)}), "does not hold"),
        (cross, _results("cuda", {}, {"32": x(None, T_max=16384, ratio=1.5)}), "partly"),  # short of the band
        (overhead, _results("cuda", {}, {}, **{"VLA triton": 5.0, "linear attention": 1.0}), "holds"),
        (overhead, _results("cuda", {}, {}, **{"VLA triton": 1.5, "linear attention": 1.0}), "does not hold"),
        (overhead, _results("cuda", {}, {}, **{"VLA triton": 1.5}), "not yet measured"),  # no linear attention
        (ccq, _results("cuda", {}, {}, **{"CCQ-GDN": 1.1}), "holds"),
        (ccq, _results("cuda", {}, {}, **{"CCQ-GDN": 1.6}), "partly"),
    ]
    for i, (claim, results, verdict) in enumerate(cases):
        root = tmp_path / str(i)
        folder = root / claim.readings[0].results
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(results))
        v = claim.evaluate(root)
        assert v.verdict == verdict, (claim.claim, results, v)
    v = cross.evaluate(tmp_path / "9")
    assert v.ours == (
        "forward none up to T = 16,384 (VLA / softmax 1.5×) (K = 32); forward + backward none up to T = 16,384 "
        "(VLA / softmax 1.5×); CUDA"
    )


def test_config_errors_name_the_argument():
    for kwargs, argument in [
        ({"Ts": (64, 16)}, "Ts"),
        ({"Ts": ()}, "Ts"),
        ({"head_dims": (0,)}, "head_dims"),
        ({"H": 0}, "H"),
        ({"loop_max_T": 1.5}, "loop_max_T"),
        ({"dtype": "int8"}, "dtype"),
        ({"min_run_time": 0}, "min_run_time"),
    ]:
        with pytest.raises(ValueError, match=f"^{argument}:"):
            contenders.SpeedConfig(**kwargs)


def test_against_gdn_takes_vla_fastest_backend_and_peak_memory():
    def row(name, fwd, both, peak):
        return {"contender": name, "K": 32, "T": 1024, "fwd_ms": fwd, "fwdbwd_ms": both, "peak_gib": peak}

    rows = [row("GDN (delta_rule)", 1.0, 2.0, 1.0), row("VLA chunk", 9.0, 30.0, 4.0), row("VLA triton", 3.0, 6.0, 1.5),
            row("KLA (delta_rule)", 1.0, 2.1, 1.0)]  # fmt: skip
    results = {"config": {"head_dims": [32], "Ts": [1024]}, "rows": rows}
    line = vla_speed.against_gdn(results)[-1]
    assert line == "| 1,024 | 3.00× / 3.00× · 1.50× memory | 1.00× / 1.05× · 1.00× memory | — |"


def test_against_gdn_shows_the_gpu_busy_ratio_where_both_have_one():
    def row(name, wall, gpu=None):
        r = {"contender": name, "K": 32, "T": 8192, "fwd_ms": wall, "fwdbwd_ms": 2 * wall}
        return r if gpu is None else {**r, "fwd_gpu_ms": gpu, "fwdbwd_gpu_ms": 4 * gpu}

    rows = [row("GDN (delta_rule)", 1.0, 0.25), row("CCQ-GDN", 1.5, 0.3), row("KLA (delta_rule)", 1.0)]
    results = {"config": {"head_dims": [32], "Ts": [8192]}, "rows": rows}
    line = vla_speed.against_gdn(results)[-1]
    assert line == "| 8,192 | — | 1.00× / 1.00× | 1.50× / 1.50× (GPU 1.20× / 1.20×) |"


def test_against_gdn_at_the_fast_level_where_it_was_timed():
    def row(name, fwd):
        return {"contender": name, "K": 32, "T": 8192, "fwd_ms": fwd, "fwdbwd_ms": 2 * fwd}

    rows = [row("GDN (delta_rule)", 1.0), row("CCQ-GDN", 1.5), row("VLA triton", 2.4)]
    results = {"config": {"head_dims": [32], "Ts": [8192]}, "rows": rows}
    assert not any("fast" in line for line in vla_speed.against_gdn(results))  # the CPU's runs: no fast level
    results["rows"] += [row("GDN fast", 0.8), row("CCQ-GDN fast", 1.0)]
    lines = vla_speed.against_gdn(results)  # VLA's fast call not timed (an earlier run's rows)
    assert '### At `precision="fast"`' in lines and lines[-1] == "| 8,192 | — | 1.25× / 1.25× |"
    results["rows"].append(row("VLA fast", 2.0))
    assert vla_speed.against_gdn(results)[-1] == "| 8,192 | 2.50× / 2.50× | 1.25× / 1.25× |"


def test_speed_ratios_are_read_at_the_largest_length_both_were_timed(tmp_path):
    # linear attention timed to 64, VLA to 128 as well: the ratio is read at 64 (5×), not VLA's 128 over linear's 64
    results = _results("cuda", {}, {}, **{"VLA triton": 5.0, "linear attention": 1.0})
    results["rows"].append({"contender": "VLA triton", "K": 32, "T": 128, "fwd_ms": 20.0, "fwdbwd_ms": 20.0})
    overhead = next(c for c in claims.CLAIMS if c.claim.startswith("the Sherman–Morrison gate costs"))
    folder = tmp_path / overhead.readings[0].results
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(results))
    v = overhead.evaluate(tmp_path)
    assert (v.verdict, v.ours) == ("holds", "5.00× (K = 32, T = 64); CUDA")
    beside = overhead.rows(tmp_path)[1][1]  # against GDN, also read at the length GDN shares, and saying which
    assert beside.ours == "VLA / GDN 5.00× (K = 32, T = 64); CUDA"
