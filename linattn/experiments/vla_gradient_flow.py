"""VLA paper, gradient flow: how much gradient reaches the first token from a loss on the last, against T.

For each mixer (linear attention, DeltaNet, VLA), seed and sequence length `T`, a fresh untrained `vla-tinylm`
`DecoderLM` (`torch.manual_seed(seed)`, eval mode, float64 so that small gradients are not rounding noise) reads `T`
uniformly random tokens, batch 1, in one forward call. The input of the first block,

    x_t = E[id_t] + P[t]   (token embedding plus learned position),

is captured with a forward pre-hook on `blocks[0]`, and its first row `x_0` replaced by a leaf that requires a
gradient (the model's parameters do not). The loss reads the last token only: its logits against a fixed random
unit direction `r ∈ R^vocab` (drawn from the seed's generator, the same for every mixer and `T`),

    L = ⟨logits_{T−1}, r⟩,   g(T) = ‖∂L/∂x_0‖₂,

so `g` measures the sensitivity of the last output to the first input along a direction that favours no token. Every
path from `x_0` to the last output goes through a mixer (the MLPs and norms act per token), and in one layer of a
recurrent mixer it passes through the state transitions `∂S_t/∂S_{t−1}`: `I` for linear attention, `I − β_t k̂_t k̂_tᵀ`
for DeltaNet, `I − α̂_t k̂_tᵀ` for VLA (whose normalised form the paper argues keeps `‖J_t‖₂ = 1`, so the gradient
does not vanish with depth T). Reported: `g(T)`, the median over seeds (and its min/max), `g(T) / g(T_0)` at the first
length (16), and the log-log slope `d log g / d log T` over the last two lengths (0: no decay, −1: `g ∝ 1/T`).
At `T = 1` the first token is the last one, and `g` is the direct (per-token) path alone.

The preset's learned position table (1024 rows) is lengthened to the longest `T`; in an untrained model every row is
an independent N(0, 0.02²) draw like the first 1024.

Full run: T = 16, 64, 256, 1024, 4096, seeds 0–2 (9 s on a 2-core CPU). `--quick`: T = 16, 64, 256, one seed (1 s).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from linattn.experiments.diagnostic import Diagnostic
from linattn.experiments.mixers import model_with
from linattn.extras import pyplot
from linattn.io import save_figure
from linattn.models import DecoderLM, ModelConfig

MIXERS = ("linear", "deltanet", "vla")


@dataclass(frozen=True)
class GradientFlowConfig:
    Ts: tuple[int, ...] = (16, 64, 256, 1024, 4096)  # sequence lengths, increasing; the ratio is to the first
    seeds: tuple[int, ...] = (0, 1, 2)  # model init, tokens and loss direction
    model: str = "vla-tinylm"  # the preset

    def __post_init__(self):
        if not self.Ts or any(not isinstance(t, int) or t < 1 for t in self.Ts):
            raise ValueError(f"Ts: expected positive ints, got {self.Ts!r}")
        if any(a >= b for a, b in zip(self.Ts, self.Ts[1:])):
            raise ValueError(f"Ts: expected increasing lengths, got {self.Ts!r}")
        if not self.seeds:
            raise ValueError("seeds: expected at least one seed")


FULL = GradientFlowConfig()
QUICK = GradientFlowConfig(Ts=(16, 64, 256), seeds=(0,))


def model_config(mixer: str, config: GradientFlowConfig) -> ModelConfig:
    """The preset with `mixer` and a position table long enough for the longest `T`."""
    return model_with(mixer, config.model, max(config.Ts))


def first_token_gradient(model: DecoderLM, ids: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
    """`∂⟨logits[0, −1], direction⟩ / ∂x_0` for `ids: [1, T]`, where `x_0` is the first block's input at token 0
    (embedding plus position); `[d_model]`. Only `x_0` needs a gradient: the model's parameters may be frozen."""
    if ids.dim() != 2 or ids.shape[0] != 1:
        raise ValueError(f"ids: expected shape [1, T], got {list(ids.shape)}")
    leaf = []

    def replace_first(_, args):
        x = args[0]  # [1, T, d]
        x0 = x[:, :1].detach().requires_grad_(True)
        leaf.append(x0)
        return (torch.cat([x0, x[:, 1:]], dim=1), *args[1:])

    hook = model.blocks[0].register_forward_pre_hook(replace_first)
    try:
        logits, _ = model(ids)
    finally:
        hook.remove()
    (grad,) = torch.autograd.grad(logits[0, -1] @ direction, leaf[0])
    return grad[0, 0]


def measure_model(mixer: str, config: GradientFlowConfig, seed: int, device: str = "cpu") -> list[float]:
    """One untrained model (float64, frozen): `g(T)` for each `T` of `config.Ts`, on prefixes of one token stream."""
    torch.manual_seed(seed)
    cfg = model_config(mixer, config)
    model = DecoderLM(cfg).to(device=device, dtype=torch.float64).eval().requires_grad_(False)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, cfg.vocab_size, (1, max(config.Ts)), generator=gen).to(device)  # [1, T_max]
    direction = torch.randn(cfg.vocab_size, generator=gen, dtype=torch.float64)
    direction = (direction / direction.norm()).to(device)
    return [first_token_gradient(model, ids[:, :T], direction).norm().item() for T in config.Ts]


def log_slope(Ts: list[int], norms: list[float]) -> float:
    """`Δ log g / Δ log T` over the last two lengths (0: no decay, −1: `g ∝ 1/T`); NaN with one length."""
    if len(Ts) < 2:
        return float("nan")
    return (math.log(norms[-1]) - math.log(norms[-2])) / (math.log(Ts[-1]) - math.log(Ts[-2]))


def summary(Ts: list[int], grads: list[list[float]]) -> dict:
    """One mixer's seeds (`seed -> T -> g`) as the report reads them: the median `g(T)` over seeds, its ratio to the
    first length, and the median of the seeds' slopes over the last two lengths (what REPORT.md's rule judges)."""
    med = [statistics.median(col) for col in zip(*grads)]
    return {"median": med, "ratio": [g / med[0] for g in med],
            "slope": statistics.median(log_slope(Ts, g) for g in grads)}  # fmt: skip


def measure(quick: bool, device: str, config: GradientFlowConfig | None = None) -> dict:
    """Every mixer, seed and `T`; the JSON body of results.json (`grad_norm`: mixer -> seed -> T -> g)."""
    config = config or (QUICK if quick else FULL)
    grads = {m: [measure_model(m, config, s, device) for s in config.seeds] for m in MIXERS}
    cfg = model_config("vla", config)
    return {
        "config": asdict(config),
        "model": {k: v for k, v in asdict(cfg).items() if k not in ("mixer", "mixer_options")},
        "mixers": list(MIXERS),
        "loss": "<logits of the last token, a random unit direction over the vocabulary>",
        "T": list(config.Ts),
        "grad_norm": grads,
    }


def table(results: dict) -> str:
    """`g(T)` (median over seeds) and `g(T) / g(T_0)` per mixer, with the seeds' median slope over the last two
    lengths."""
    c, Ts = results["config"], results["T"]
    s = {m: summary(Ts, results["grad_norm"][m]) for m in results["mixers"]}
    header = "| mixer | " + " | ".join(f"T = {T:,}" for T in Ts) + " | slope (last two) |"
    rule = "|---|" + "---:|" * (len(Ts) + 1)
    lines = [
        "## ‖∂L/∂x_0‖₂: gradient reaching the first token's input from a loss on the last token",
        "",
        f"Untrained `{c['model']}`, float64, random tokens, batch 1; `x_0` = embedding + position of token 0 (the "
        "first block's input), `L = ⟨logits_{T−1}, r⟩` with `r` a random unit vector over the vocabulary; median "
        f"over seeds {tuple(c['seeds'])}. Slope: `Δ log g / Δ log T` over the last two lengths, each seed's, their "
        "median (what REPORT.md judges).",
        "",
        header,
        rule,
    ]
    for key, title in (("median", None), ("ratio", f"## Ratio to T = {Ts[0]:,}")):
        if title:
            lines += ["", title, "", header, rule]
        for m in results["mixers"]:
            row = " | ".join(f"{g:.3g}" for g in s[m][key])
            lines.append(f"| {m} | {row} | {s[m]['slope']:+.2f} |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    """Log-log `g(T)` against `T`: the median over seeds with its min–max band, and a `∝ 1/T` guide."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.5, 4.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    Ts = results["T"]
    for i, m in enumerate(results["mixers"]):
        runs = torch.tensor(results["grad_norm"][m])  # [seeds, T]
        ax.fill_between(Ts, runs.min(0).values, runs.max(0).values, color=colors[i], alpha=0.2)
        ax.loglog(Ts, runs.median(0).values, marker="o", ms=4, color=colors[i], label=m)
    first = summary(Ts, results["grad_norm"][results["mixers"][0]])["median"][0]
    ax.loglog(Ts, [first * Ts[0] / T for T in Ts], "k:", lw=0.8, label="∝ 1/T")
    c = results["config"]
    ax.set_xlabel("sequence length T (tokens)")
    ax.set_ylabel("‖∂L/∂x_0‖₂ (first token's input, loss on the last)")
    ax.set_title(f"untrained {c['model']}, {len(c['seeds'])} seed(s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("VLA paper, gradient flow: last token -> first token")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


DIAGNOSTIC = Diagnostic(
    "vla-gradient-flow",
    "Gradient norm reaching the first token's input from a loss on the last token, in untrained TinyLMs (linear, "
    "DeltaNet, VLA) on random tokens, against the sequence length T",
    measure,
    table,
    plot,
)
