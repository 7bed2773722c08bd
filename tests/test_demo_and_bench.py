"""The demo and the CPU benchmark run end to end at tiny sizes (their numbers are not asserted: speed is
reported by benchmarks, never tested)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from linattn import demo
from linattn.bench.__main__ import main as bench_main
from linattn.experiments import state_norm


def test_demo_writes_table_and_plot(tmp_path, capsys, monkeypatch):
    from linattn.experiments.registry import EXPERIMENTS
    from tests.experiments.test_experiments import TINY

    monkeypatch.setitem(EXPERIMENTS, "vla-mqar-capacity", TINY)  # the real quick run takes minutes
    fair = tmp_path / "committed" / "vla-mqar-capacity" / "fair"
    fair.mkdir(parents=True)
    (fair / "results.json").write_text(json.dumps({"table": {"vla": {"2": 0.875}}}))
    argv = ["--T", "300", "--out", str(tmp_path), "--jobs", "1", "--mixers", "vla", "--results", str(fair.parents[1])]
    assert demo.main(argv) == 0
    out = capsys.readouterr().out
    assert "| coherent | linear |" in out
    assert "beside the fair protocol's committed result" in out and " / 0.875 / 1.000 |" in out  # TINY's paper: 1.0
    assert "output gate" in out
    assert (tmp_path / "state_norm.png").stat().st_size > 10_000
    assert "slope" in (tmp_path / "state_norm.md").read_text()
    assert (tmp_path / "results" / "tiny" / "paper-quick" / "table.md").exists()
    for bad in (["--mixers", "vla,nope"], ["--jobs", "0"]):  # refused before the state-norm part runs
        with pytest.raises(SystemExit):
            demo.main(["--T", "300", "--out", str(tmp_path / "bad"), *bad])
        assert not (tmp_path / "bad").exists()


def test_state_norm_shapes_of_growth():
    """Coherent streams make linear attention grow as t; the delta rules stay bounded."""
    result = state_norm.run(state_norm.StateNormConfig(T=2000, points=12, H=2, K=16))
    assert 0.8 < result.slope("coherent", "linear") < 1.1
    assert 0.3 < result.slope("isotropic", "linear") < 0.7
    for mixer in ("deltanet", "vla"):
        assert abs(result.slope("coherent", mixer)) < 0.1


def test_bench_cpu_runs(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert bench_main(["cpu", "--T", "70", "--H", "1", "--K", "8", "--min-run-time", "0.01", "--json", str(path)]) == 0
    assert "| `vla` |" in capsys.readouterr().out
    rows = json.loads(path.read_text())["rows"]
    assert {r["op"] for r in rows} == {"delta_rule", "vla"}
    for option in ("--T", "--K", "--min-run-time"):
        with pytest.raises(SystemExit):
            bench_main(["cpu", option, "0"])
        assert f"argument {option}: expected a positive number, got 0" in capsys.readouterr().err


def test_bench_ops_needs_a_gpu(capsys, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    for command in ("ops", "decode", "stages", "train-step"):
        assert bench_main([command]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_train_step_table_and_arguments():
    from linattn.bench import train_step

    row = {"mixer": "vla", "processes": 16, "eager_ms": 25.0, "graph_ms": 27.0, "eager_steps_per_s": 640.0,
           "graph_steps_per_s": 590.0}  # fmt: skip
    assert train_step.table([row]).splitlines()[2] == "| vla | 16 | 25.00 | 27.00 | 640 | 590 | 0.92× |"
    kla = train_step.setups(["kla"], "kla-stack")[0]  # an experiment's first run of the mixer
    assert (kla.rows, kla.model.mixer, type(kla.task).__name__) == (32, "kla", "StackConfig"), kla
    with pytest.raises(ValueError, match=r"--experiment: unknown 'nope'"):
        train_step.run(["vla"], [1], 300, "nope")
    with pytest.raises(ValueError, match=r"--mixers: unknown \['nope'\]"):
        train_step.run(["nope"], [1], 300)
    with pytest.raises(ValueError, match=r"--processes: expected counts ≥ 1, got \[0\]"):
        train_step.run(["vla"], [0], 300)
    with pytest.raises(ValueError, match="--steps: expected at least 100"):
        train_step.run(["vla"], [1], 50)


def test_ops_table_groups_rows_by_shape_with_ratios_to_sdpa():
    from linattn.bench import ops

    def row(contender, shape, fwdbwd):
        return {"contender": contender, "shape": shape, "fwd_ms": 1.0, "fwdbwd_ms": fwdbwd, "peak_gib": 0.5,
                "fwd_bw_frac": 0.1, "fwd_mma_frac": 0.2}  # fmt: skip

    rows = [row("sdpa (flash)", "B=1 T=8K", 2.0), row("sdpa (flash)", "B=1 T=64K", 100.0),
            row("ours", "B=1 T=8K", 5.0), row("ours", "B=1 T=64K", 40.0)]  # fmt: skip
    lines = ops.table(rows).splitlines()[2:]  # measured contender by contender, shown shape by shape
    assert [line.split(" | ")[:2] for line in lines] == [
        ["| B=1 T=8K", "sdpa (flash)"], ["| B=1 T=8K", "ours"], ["| B=1 T=64K", "sdpa (flash)"], ["| B=1 T=64K", "ours"]
    ]  # fmt: skip
    assert "| 2.50× |" in lines[1] and "| 0.40× |" in lines[3]
    assert lines[0].endswith("| 10% / 20% | — |")  # no forward + backward fractions in these rows


def test_ops_fractions_count_the_minimal_bytes_and_flops_of_each_pass(tmp_path, capsys):
    """Forward: n inputs read and o written; forward + backward: 3 n + 2 tensors and three times the FLOPs. A saved
    run's table is printed again, without a GPU, with every fraction recomputed."""
    from linattn.bench import ops

    gdn = next(c for c in ops.CONTENDERS if c.name == "ours triton GDN")
    row = {"contender": gdn.name, "shape": "B=1 T=8K", "B": 1, "T": 8192, "fwd_ms": 2.0, "fwdbwd_ms": 4.0}
    limits = {"bandwidth": 1e12, "bf16_flops": 1e15}
    got = ops.fractions(gdn, row, limits)
    tensor = 8192 * 16 * 128 * 2  # B·T·H·K bf16 elements, bytes
    assert got["fwd_bw_frac"] == pytest.approx(4 * tensor / 2e-3 / 1e12)
    assert got["fwdbwd_bw_frac"] == pytest.approx(11 * tensor / 4e-3 / 1e12)
    assert got["fwdbwd_mma_frac"] == pytest.approx(1.5 * got["fwd_mma_frac"])  # 3× the FLOPs in 2× the time
    saved = tmp_path / "ops.json"
    saved.write_text(json.dumps({"ceilings": limits, "rows": [row]}))
    assert bench_main(["ops", "--table-from", str(saved)]) == 0
    fwd, both = (f"{100 * got[f'{p}_bw_frac']:.0f}% / {100 * got[f'{p}_mma_frac']:.0f}%" for p in ("fwd", "fwdbwd"))
    assert f"| {fwd} | {both} |" in capsys.readouterr().out
    saved.write_text(json.dumps({"ceilings": limits, "rows": [{**row, "contender": "nobody"}]}))
    assert bench_main(["ops", "--table-from", str(saved)]) == 2
    assert "unknown contender 'nobody'" in capsys.readouterr().err


def test_gate_bench_measures_float32_against_float64(capsys):
    from linattn.bench import gate

    rows = gate.run("cpu", head_dims=(8,), lengths=(300,))
    assert [(r["K"], r["T"], r["inputs"]) for r in rows] == [(8, 300, "float32"), (8, 300, "bfloat16")]
    assert all(r["finite"] and r["max_err"] < 1e-5 and r["max_norm_deviation"] < 1e-5 for r in rows)
    assert "| 8 | 300 | bfloat16 |" in gate.table(rows)
    assert bench_main(["gate", "--device", "tpu"]) == 2 and "--device" in capsys.readouterr().err


def test_stage_profile_times_every_kernel():
    """The GPU stage profile, run here in Triton's interpreter at a small shape with a wall-clock timer."""
    import time

    import torch

    from linattn.bench import stages

    def timer(fn):
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3

    rows = stages.profile(70, timer, H=1, K=16, dtype=torch.float32, device="cpu")
    names = [r["stage"] for r in rows]
    assert names[:2] == ["chunk_cumsum", "wy_fwd"] and names[-1] == "delta_rule forward + backward"
    assert all(r["ms"] > 0 for r in rows) and rows[2]["us_per_chunk"] == rows[2]["ms"] * 1e3 / 2
    assert "**stages, total**" in stages.table(rows)
    batched = stages.profile(70, timer, B=2, H=1, K=16, dtype=torch.float32, device="cpu", segments=2)
    assert {r["B"] for r in batched} == {2} and "| 2 × 70 | wy_fwd |" in stages.table(batched)
    fast = stages.profile(70, timer, H=1, K=16, dtype=torch.bfloat16, device="cpu", fast=True)
    assert [r["stage"] for r in fast] == names
    # the bytes model at the shape: a training step at 64K tokens moves ~26 GB, the fast level less
    exact_bytes, fast_bytes = (sum(stages.stage_bytes(1, 65536, 16, 128, 128, f).values()) for f in (False, True))
    assert 25e9 < exact_bytes < 27e9 and fast_bytes < 0.75 * exact_bytes
    assert "| MB moved | GB/s |" in stages.table(fast) and all(r["bytes"] > 0 for r in fast if r["kind"] == "stage")


def test_gate_stage_profile_times_every_step():
    """VLA's gate profile at a small shape on the CPU, with a wall-clock timer; its table shares the stages'."""
    import time

    from linattn.bench import gate_stages, stages

    def timer(fn):
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3

    rows = gate_stages.profile(130, timer, H=2, K=8, device="cpu")
    kinds = [r["kind"] for r in rows]
    assert kinds[0] == "forward" and "backward" in kinds and "alternative" in kinds and kinds[-1] == "end to end"
    assert all(r["ms"] > 0 for r in rows)
    text = stages.table(rows)
    assert "| 130 | forward: A_c = M_c⁻¹ [N, d, d] (spd_inverse) |" in text
    assert "| 130 | vla gate forward, chunk, carry 1 |" in text
    assert "| 130 | vla gate forward + backward, chunk, carry 8 |" in text
    assert "| 130 | alternative: A_c = inv(M_c) |" in text


def test_verify_checks_a_backend_against_float64():
    """The GPU verification matrix's check, run here on the CPU with the chunk backend."""
    from unittest import mock

    import torch

    from linattn.bench import verify
    from linattn.ops.delta_rule.triton import backward

    row = verify.check(verify.Case(65, 16, 8, torch.float32, two_key=True, H=1), "chunk", device="cpu")
    assert row["ok"] and row["o"] < 1e-6 and row["dk"] < 1e-6
    varlen = verify.check(verify.Case(0, 16, 16, torch.bfloat16, varlen=(1, 20, 9), H=1), "chunk", device="cpu")
    assert varlen["ok"], varlen
    for gated in (True, False):  # linear attention and GLA: the kernels without the erase term
        case = verify.Case(70, 16, 24, torch.float32, erase=False, gated=gated, H=1)
        row = verify.check(case, "triton", device="cpu")
        assert row["ok"] and "dbeta" not in row and ("dg" in row) == gated, row
    assert "1 of 1 cases pass" in verify.table([row])
    no_ht = verify.check(verify.Case(70, 16, 16, torch.bfloat16, H=1, final_state=False), "triton", device="cpu")
    assert "S" not in no_ht and "dq" in no_ht and no_ht["o"] < 1e-2, no_ht  # o, bf16-rounded, is the only output
    cuts = []

    def recording_cut(layout, chunk_state_bytes, cut=backward._cut):
        cuts.append(cut(layout, chunk_state_bytes))
        return cuts[-1]

    with mock.patch.object(backward, "_cut", recording_cut):
        row = verify.check(verify.Case(200, 16, 16, torch.float32, H=1, cut=True), "triton", device="cpu")
    assert row["ok"] and cuts == [128], (row, cuts)  # the backward ran in two spans, [0, 128) and [128, 200)
    ops = (("vla", {"du", "dstate_A", "dstate_S"}), ("ccq", {"dlam", "dstate_Z"}), ("kla", {"deta"}), ("gla", {"dg"}),
           ("normalized", {"dstate_S", "dstate_z"}))  # fmt: skip
    for op, grads in ops:
        row = verify.check(verify.Case(70, 16, 16, torch.float32, op=op, H=1), "triton", device="cpu")
        # float32 accuracy; the 2× rule itself is not asserted here: VLA's state gradient sits at the 1e-6 floor
        # (its chained non-normal steps; 0.9 – 1.1e-6 by seed, on a GPU too), and the interpreter's bfloat16
        # rounds unlike the GPU's
        errors = [v for n, v in row.items() if n not in ("case", "ok") and not n.endswith("_naive")]
        assert grads <= set(row) and max(errors) < 3e-6, row
    # an inference call: outputs alone (normalised linear attention's forward then takes its one-pass path on a GPU)
    case = verify.Case(70, 16, 16, torch.float32, op="normalized", H=1, final_state=False, forward_only=True)
    row = verify.check(case, "triton", device="cpu")
    assert row["ok"] and set(row) == {"case", "ok", "o", "o_naive"} and case.label.endswith("fwd"), row
    ops = {"delta_rule", "vla", "ccq", "kla", "gla", "normalized"}
    assert {c.op for c in verify.matrix()} == set(verify.OPS) == ops
    assert len(verify.matrix()) > 200
    quick = verify.quick_matrix()
    assert 30 < len(quick) < len(verify.matrix()) / 3 and {c.dtype for c in quick} == {torch.float32, torch.bfloat16}
    assert any(c.two_key for c in quick) and any(not c.erase for c in quick) and any(c.varlen for c in quick)
    assert any(not c.final_state for c in quick) and any(c.cut for c in quick)
    assert all(verify.fla_supports(c) == (c.erase and not c.two_key) for c in quick)
    fla = verify.fla_matrix(quick)  # the GDN cases, and the 16-bit ones again without the decay (fla's DeltaNet)
    gdn = [c for c in quick if c.erase and c.gated and not c.two_key]
    assert gdn and all(c in fla for c in gdn) and len(set(fla)) == len(fla)
    assert all((replace(c, gated=False) in fla) == (c.dtype != torch.float32) for c in gdn)
    with pytest.raises(ValueError, match="ops"):
        verify.run("chunk", device="cpu", ops=("softmax",))
    refusal = AssertionError("ChunkDeltaRuleFunction does not support float32")
    with mock.patch.object(verify, "check", side_effect=refusal):  # fla asserts on what it does not support
        row = verify._check_case((gdn[0], "fla", "cpu"))
        with pytest.raises(AssertionError):
            verify._check_case((gdn[0], "triton", "cpu"))
    assert not row["ok"] and "refused: AssertionError: ChunkDeltaRuleFunction" in verify.table([row])


def test_linear_attention_state_grows_linearly_for_a_constant_positive_stream():
    import torch

    from linattn.ops import linear_attention

    k = torch.full((1, 500, 1, 4), 0.5)
    v = torch.ones(1, 500, 1, 3)
    norms = [
        linear_attention(k[:, :t], k[:, :t], v[:, :t], output_final_state=True)[1].norm().item() for t in (10, 100, 500)
    ]
    assert norms == [pytest.approx(t * 1.0 * 3**0.5) for t in (10, 100, 500)]  # ‖t k vᵀ‖ = t ‖k‖ ‖v‖


def test_profile_lists_a_contenders_operators_on_cpu(tmp_path, capsys):
    path = tmp_path / "profile.json"
    args = ["profile", "--contenders", "GDN (delta_rule)", "--lengths", "40", "--K", "8", "--passes", "fwdbwd"]
    assert bench_main([*args, "--device", "cpu", "--host", "--json", str(path)]) == 0
    (row,) = json.loads(path.read_text())["rows"]
    assert row["time"]["rows"] and row["time"]["busy_ms"] > 0 and "memory" not in row
    assert any("chunk_delta_rule" in r["function"] for r in row["host"]["rows"]) and row["host"]["sync"] is None
    out = capsys.readouterr().out
    assert "| kernel / operator |" in out and "| function | calls | ms |" in out
    with pytest.raises(ValueError, match="contender"):
        bench_main(["profile", "--contenders", "GDM", "--device", "cpu"])
    with pytest.raises(ValueError, match="contender: expected one of .* on cpu, got 'fla GLA'"):  # ops' need CUDA
        bench_main(["profile", "--contenders", "fla GLA", "--device", "cpu"])
