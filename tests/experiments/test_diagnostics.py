"""The VLA diagnostics (state norm, Jacobian) at toy size: known answers, the written report, --force."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from linattn.cli import main
from linattn.experiments import kaczmarz_properties, vla_jacobian, vla_state_norm
from linattn.experiments.registry import DIAGNOSTICS
from linattn.layers.base import split_heads
from linattn.models import DecoderLM, preset
from linattn.ops import delta_rule

TINY_STATE_NORM = vla_state_norm.StateNormModelConfig(
    T=64, seeds=(0, 1), long_T=600, points=8, segment=100, op_T=200, model="debug"
)
TINY_JACOBIAN = vla_jacobian.JacobianConfig(
    T=60, seeds=(0,), windows=(10, 60), model="debug", wide_d_model=64, lam0s=(0.1, 10.0), unnormalised_window=8,
    trained_n=2, train_steps=20, trained_sequences=3,
)  # fmt: skip
GOLDEN = (1 + 5**0.5) / 2  # the largest ‖I − α̂ k̂ᵀ‖₂ for unit vectors with α̂ᵀk̂ ≥ 0


pytestmark = pytest.mark.usefixtures("one_thread")


def test_state_norm_measure():
    r = vla_state_norm.measure(True, "cpu", TINY_STATE_NORM)
    assert list(r["inits"]) == list(vla_state_norm.INITS)
    for label, run in r["inits"].items():
        s = vla_state_norm.summary(run)
        t, median = run["curve"]["t"], {m: s["mixers"][m]["curve"] for m in vla_state_norm.MIXERS}
        assert t[0] == 1 and t[-1] == 600 and 64 in t and run["init_std"] == vla_state_norm.INITS[label]
        # carrying the state across calls of 100 tokens gives the one-call state at T
        assert run["consistency"] < 1e-4
        for m in vla_state_norm.MIXERS:
            runs = run["final"][m]["per_seed"]
            assert len(runs) == 2 and all(len(layers) == 2 for layers in runs)
            assert s["mixers"][m]["last_layer"]["median"] == pytest.approx(sum(seed[-1] for seed in runs) / 2)
        # linear attention's state grows about linearly with t in the model (its keys and values are coherent);
        # the delta rules' stay bounded
        assert all(a < b for a, b in zip(median["linear"], median["linear"][1:]))
        assert s["mixers"]["linear"]["slope"] > 0.7
        assert median["linear"][-1] > 10 * median["vla"][-1] > 10 * 0.1
        assert s["ratio_linear_over_vla"] > 10
    # the authors' init draws smaller weights than PyTorch's (std 0.02 against ≈ 1/√(3 · 32) at d 32)
    default, authors = (
        vla_state_norm.summary(r["inits"][label])["mixers"]["linear"]["last_layer"]["median"]
        for label in ("default", "authors")
    )
    assert authors < default
    assert set(r["op_level"]["norms"]) == {"isotropic", "positive", "coherent"}
    json.dumps(r)  # results.json material
    text = vla_state_norm.table(r)
    assert "## PyTorch's default init" in text and "## The authors' init" in text


def test_state_norm_summary_is_the_median_over_seeds():
    # three seeds: the table shows the median (what the rules judge) and the median of the seeds' slopes
    t = [1, 10, 100]
    run = {"final": {m: {"per_seed": [[1.0, x] for x in (1.0, 2.0, 9.0)]} for m in ("linear", "vla")},
           "curve": {"t": t, "norms": {m: [[1.0, 1.0, 10.0], [1.0, 1.0, 100.0], [1.0, 1.0, 1000.0]]
                                       for m in ("linear", "vla")}}}  # fmt: skip
    s = vla_state_norm.summary(run)["mixers"]["vla"]
    assert s["last_layer"] == {"median": 2.0, "min": 1.0, "max": 9.0} and s["per_layer"] == [1.0, 2.0]
    assert s["curve"] == [1.0, 1.0, 100.0] and s["slope"] == pytest.approx(2.0)  # the mean's would be 2.57


def test_authors_init_draws_every_linear_layer_from_n_0_002():
    torch.manual_seed(0)
    model = DecoderLM(preset("vla-tinylm", mixer="vla"))
    vla_state_norm.initialise(model, 0.02)
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    weights = torch.cat([m.weight.flatten() for m in linear])
    assert weights.std().item() == pytest.approx(0.02, rel=0.02) and abs(weights.mean().item()) < 1e-3
    assert all(m.bias is None or not m.bias.any() for m in linear)
    before = [p.clone() for p in model.parameters()]
    vla_state_norm.initialise(model, None)  # None leaves the weights as they are
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_state_norm_config_errors_name_the_argument():
    with pytest.raises(ValueError, match="^long_T"):
        vla_state_norm.StateNormModelConfig(T=100, long_T=50)
    with pytest.raises(ValueError, match="^seeds"):
        vla_state_norm.StateNormModelConfig(seeds=())
    with pytest.raises(ValueError, match="^init_std"):
        vla_state_norm.StateNormModelConfig(init_std=0.0)


def test_layer_state_norms_of_a_fresh_state_are_zero():
    model = DecoderLM(preset("debug", mixer="vla"))
    assert vla_state_norm.layer_state_norms(model.init_state(1)) == [0.0, 0.0]


def test_collected_gate_is_the_layers():
    """Unit α̂ with α̂ᵀk̂ > 0; the delta rule replayed with the collected k̂, α̂ reproduces every layer's state."""
    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer="vla")).eval()
    ids = torch.randint(0, 32, (1, 50))
    gates = vla_jacobian.collect(model, ids)
    assert len(gates) == 2
    inputs = []
    hooks = [b.mixer.register_forward_pre_hook(lambda _, args: inputs.append(args[0])) for b in model.blocks]
    with torch.no_grad():
        _, state = model(ids)
    for h in hooks:
        h.remove()
    for g, x, block, layer_state in zip(gates, inputs, model.blocks, state["layers"]):
        assert g["alpha_hat"].shape == (50, 2, 16) and g["alpha_hat"].dtype == torch.float64
        assert torch.allclose(g["alpha_hat"].norm(dim=-1), torch.ones(50, 2, dtype=torch.float64), atol=1e-6)
        assert ((g["alpha_hat"] * g["k_hat"]).sum(-1) > 0).all()
        v = split_heads(block.mixer.v_proj(x), 2).detach().double()  # [1, T, H, d]
        k_hat, w = g["k_hat"][None], g["alpha_hat"][None]
        _, S = delta_rule(k_hat, k_hat, v, w=w, output_final_state=True)
        assert torch.allclose(S, layer_state["mixer"]["S"].double(), rtol=1e-4, atol=1e-5)


def test_unnormalised_alpha():
    gen = torch.Generator().manual_seed(0)
    k_hat = F.normalize(torch.rand(30, 2, 8, generator=gen, dtype=torch.float64), dim=-1)
    # no penalty: A = I / λ0, so α = k̂ / λ0
    zero = torch.zeros_like(k_hat)
    assert torch.allclose(vla_jacobian.unnormalised_alpha(k_hat, zero, 0.5), k_hat / 0.5)
    # otherwise A_t ⪯ I / λ0: ‖α_t‖ ≤ 1/λ0, and it shrinks as the penalty accumulates
    u = F.normalize(torch.randn(30, 2, 8, generator=gen, dtype=torch.float64), dim=-1)
    alpha = vla_jacobian.unnormalised_alpha(k_hat, u, 0.5)
    assert (alpha.norm(dim=-1) <= 2 + 1e-12).all() and (alpha.norm(dim=-1)[-1] < 1).all()


def test_jacobian_measure():
    r = vla_jacobian.measure(True, "cpu", TINY_JACOBIAN)
    assert r["gate_check"] < 1e-5
    for layer in r["layers"]:
        q = layer["step_norm"]
        assert 1 - 1e-9 <= q["min"] <= q["p50"] <= q["max"] <= GOLDEN
        assert 0 < layer["cos"]["min"] <= layer["cos"]["max"] <= 1 + 1e-9
        assert set(layer["windows"]) == {"10", "60"} and layer["windows"]["10"]["count"] == 2 * 6
        assert sum(layer["hist_step_norm"]) == sum(layer["hist_cos"]) == 60 * 2
        assert layer["growth"]["t"] == [1, 2, 5, 10, 25, 50]
    small, wide_01, wide_10 = r["unnormalised"]
    assert (small["d_h"], wide_01["d_h"], wide_10["lam0"]) == (16, 32, 10.0)
    # at λ0 = 0.1 the unnormalised write grows by about 1/λ0 a step; at λ0 = 10 (‖α‖ ≤ 0.1) hardly at all
    assert wide_01["per_step_factor"] > 3 and wide_01["first_window"]["median"][-1] > 1e4
    assert wide_10["alpha_norm"]["max"] <= 0.1 + 1e-9 and wide_10["window_products"]["max"] < 1.01
    trained = r["trained"]
    assert (trained["n_pairs"], trained["T"], trained["steps"]) == (2, 7, 20) and 0 <= trained["accuracy"] <= 1
    for layer in trained["layers"]:
        assert 1 - 1e-9 <= layer["step_norm"]["min"] <= layer["step_norm"]["max"] <= GOLDEN
        assert layer["sequence_product"]["min"] > 0  # one product per sequence and head
    json.dumps(r)


def test_jacobian_training_resumes_from_its_checkpoint(tmp_path):
    first = vla_jacobian.trained(TINY_JACOBIAN, "cpu", tmp_path)
    assert (tmp_path / "checkpoint.pt").exists()
    assert vla_jacobian.trained(TINY_JACOBIAN, "cpu", tmp_path) == first  # the finished run, read back


def test_jacobian_config_errors_name_the_argument():
    with pytest.raises(ValueError, match="^unnormalised_window"):
        vla_jacobian.JacobianConfig(T=10, unnormalised_window=25)
    with pytest.raises(ValueError, match="^windows"):
        vla_jacobian.JacobianConfig(T=10, windows=(25,), unnormalised_window=5)


@pytest.fixture
def tiny_quick(monkeypatch):
    monkeypatch.setattr(vla_state_norm, "QUICK", TINY_STATE_NORM)
    monkeypatch.setattr(vla_jacobian, "QUICK", TINY_JACOBIAN)


@pytest.mark.parametrize("name", ["vla-state-norm", "vla-jacobian"])
def test_cli_writes_the_report_and_keeps_it(name, tmp_path, tiny_quick, capsys):
    assert name in DIAGNOSTICS
    argv = ["run", name, "--quick", "--device", "cpu", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = tmp_path / name / "default-quick"
    results = json.loads((out / "results.json").read_text())
    assert results["experiment"] == name and results["quick"] and results["environment"]["date"]
    assert results["command"] == "linattn " + " ".join(argv)
    assert f"# {name} (quick)" in (out / "table.md").read_text()
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "work").exists()  # a training's checkpoint folder goes once the report is written
    capsys.readouterr()

    (out / "marker").write_text("")
    before = (out / "results.json").read_text()
    assert main(argv) == 0
    assert "exists: kept" in capsys.readouterr().out
    assert (out / "results.json").read_text() == before and (out / "marker").exists()

    assert main([*argv, "--force"]) == 0
    assert not (out / "marker").exists() and json.loads((out / "results.json").read_text())["command"].endswith(
        "--force"
    )


def test_kaczmarz_properties():
    """Our op's Kaczmarz write has all three properties to rounding; a fixed step has none; a relaxed one (η = ½)
    is still a gradient step along the same direction, but neither the projection nor the line search."""
    config = kaczmarz_properties.KaczmarzConfig(draws=50, K=16, V=8, directions=4)
    r = kaczmarz_properties.measure(False, "cpu", config)
    assert set(r["errors"]["kla"]) == set(kaczmarz_properties.PROPERTIES)
    assert all(e["max"] < 1e-12 for e in r["errors"]["kla"].values())
    assert all(e["min"] > 1e-3 for e in r["errors"]["control"].values())
    x = kaczmarz_properties.draw(config)
    with torch.no_grad():
        S = kaczmarz_properties.kla_write(x["S0"], x["k"], x["v"])
        half = x["S0"] + 0.5 * (S - x["S0"])  # the relaxed step η = ½
    err = kaczmarz_properties.errors(half, x)
    assert (err["projection"] > 0.1).all() and (err["line_search"] > 0.1).all()
    line = r["line"]
    assert min(line["loss"]) == pytest.approx(0.0, abs=1e-12) and line["loss"][line["s_times_kk"].index(1.0)] < 1e-12
    json.dumps(r)
    text = kaczmarz_properties.table(r)
    assert "| orthogonal projection onto Sᵀk = v |" in text
    assert DIAGNOSTICS["kaczmarz-properties"] is kaczmarz_properties.DIAGNOSTIC
