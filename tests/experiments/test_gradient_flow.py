"""The gradient-flow diagnostic at toy size: the captured leaf is the first token's input, known answers, the report."""

from __future__ import annotations

import json
import math

import pytest
import torch

from linattn.cli import main
from linattn.experiments import vla_gradient_flow
from linattn.experiments.registry import DIAGNOSTICS
from linattn.models import DecoderLM, preset

TINY = vla_gradient_flow.GradientFlowConfig(Ts=(1, 4, 16), seeds=(0, 1), model="debug")

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(mixer: str) -> DecoderLM:
    torch.manual_seed(0)
    return DecoderLM(preset("debug", mixer=mixer)).double().eval()


@pytest.mark.parametrize("mixer", vla_gradient_flow.MIXERS)
def test_leaf_gradient_is_the_first_position_rows(mixer):
    """`x_0 = E[id_0] + P[0]` and row 0 of the position table is read by token 0 only, so `∂L/∂x_0 = ∂L/∂P[0]`."""
    model = _model(mixer)
    ids = torch.randint(0, 32, (1, 12), generator=torch.Generator().manual_seed(1))
    r = torch.randn(32, dtype=torch.float64)
    grad = vla_gradient_flow.first_token_gradient(model, ids, r)
    logits, _ = model(ids)
    (logits[0, -1] @ r).backward()
    assert grad.shape == (32,) and torch.isfinite(grad).all() and grad.norm() > 0
    assert torch.allclose(grad, model.pos.weight.grad[0], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("mixer", vla_gradient_flow.MIXERS)
def test_only_the_mixers_carry_the_gradient_across_tokens(mixer):
    """With every mixer's output zeroed, the last token sees nothing of the first unless it is the first (T = 1)."""
    model = _model(mixer)
    ids = torch.randint(0, 32, (1, 9), generator=torch.Generator().manual_seed(2))
    r = torch.randn(32, dtype=torch.float64)
    before = [vla_gradient_flow.first_token_gradient(model, ids[:, :T], r).norm().item() for T in (1, 9)]
    hooks = [b.mixer.register_forward_hook(lambda _, args, out: (out[0] * 0, out[1])) for b in model.blocks]
    after = [vla_gradient_flow.first_token_gradient(model, ids[:, :T], r).norm().item() for T in (1, 9)]
    for h in hooks:
        h.remove()
    assert before[0] > 0 and before[1] > 0
    assert after[1] == 0.0 and 0 < after[0] != before[0]


def test_measure():
    r = vla_gradient_flow.measure(True, "cpu", TINY)
    assert r["T"] == [1, 4, 16] and r["mixers"] == ["linear", "deltanet", "vla"]
    for m in vla_gradient_flow.MIXERS:
        runs = r["grad_norm"][m]
        assert len(runs) == 2 and all(len(g) == 3 and all(math.isfinite(x) and x > 0 for x in g) for g in runs)
    json.dumps(r)


def test_the_summary_is_the_median_over_seeds():
    # three seeds, g ∝ T^-1, T^-2, T^-3 scaled: the median row and the median of the seeds' slopes (what the rule reads)
    grads = [[1.0, 0.25], [3.0, 0.1875], [2.0, 0.03125]]
    s = vla_gradient_flow.summary([1, 4], grads)
    assert s["median"] == [2.0, 0.1875] and s["ratio"] == [1.0, 0.09375]
    assert s["slope"] == pytest.approx(-2.0)  # the seeds' slopes -1, -2, -3; the median row's would be -1.71


def test_config_errors_name_the_argument():
    with pytest.raises(ValueError, match="^Ts"):
        vla_gradient_flow.GradientFlowConfig(Ts=(64, 16))
    with pytest.raises(ValueError, match="^Ts"):
        vla_gradient_flow.GradientFlowConfig(Ts=(0, 16))
    with pytest.raises(ValueError, match="^seeds"):
        vla_gradient_flow.GradientFlowConfig(seeds=())
    with pytest.raises(ValueError, match="^ids"):
        vla_gradient_flow.first_token_gradient(_model("vla"), torch.zeros(2, 3, dtype=torch.long), torch.ones(32))


def test_cli_writes_the_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(vla_gradient_flow, "QUICK", TINY)
    name = "vla-gradient-flow"
    assert DIAGNOSTICS[name] is vla_gradient_flow.DIAGNOSTIC
    assert main(["run", name, "--quick", "--device", "cpu", "--out", str(tmp_path)]) == 0
    out = tmp_path / name / "default-quick"
    assert json.loads((out / "results.json").read_text())["experiment"] == name
    text = (out / "table.md").read_text()
    assert f"# {name} (quick)" in text and "| vla |" in text and "T = 16" in text
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
