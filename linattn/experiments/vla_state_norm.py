"""VLA paper, state norm: `‖S_t‖_F` of untrained TinyLMs fed random tokens, per mixer.

(a) Final state. For each mixer (linear attention, DeltaNet, VLA; softmax attention keeps no fixed-size state) and
seed, a fresh `vla-tinylm` `DecoderLM` (`torch.manual_seed(seed)`, eval mode) reads `T = 1000` uniformly random
tokens, batch 1, in one forward call. The model returns every block's final recurrent state, so no hook is needed:
`state["layers"][i]["mixer"]["S"]: [B, H, d, d]` is the matrix state `S_T` of each of these mixers (VLA's state also
holds its inverse penalty `A_T`, which is not measured). Reported: the median over seeds of the last layer's
`mean_h ‖S_T^{(h)}‖_F` (and every layer's), beside the paper's linear 1634, DeltaNet 1.2, VLA 14.5 ("109× lower than
linear attention").

(b) Growth. The same models go on over a stream of random tokens up to `long_T` (100K) in forward calls of at most
`segment` tokens, each starting from the previous call's state (the one-call forward, up to rounding), and the
last layer's `‖S_t‖_F` is read at log-spaced `t` (Proposition 1: VLA's state "converges to a plateau"). The preset's
learned position table (1024 rows) is lengthened to `long_T` rows; in an untrained model every row is an
independent N(0, 0.02²) draw like the first 1024. The stream starts with (a)'s `T` tokens, so the curve at `t = T`
repeats (a)'s number (`consistency`: the largest relative difference). Beside it, the op-level curve of
`state_norm.run` (synthetic unit keys, no model) at the model's head count and head dim.

Full run: T = 1000, seeds 0–2, curve to 100K tokens, op level to 100K tokens, both inits (a minute on a 2-core CPU).
`--quick`: the same (a), curves to 10K tokens (7 s).

Both measurements are taken under two initialisations (`INITS`): PyTorch's own for the linear layers (uniform with
std ≈ 1/√(3·fan_in), ≈ 0.05 at d 128), and the authors' (every linear layer's weight N(0, 0.02²), biases zero; the
embeddings are N(0, 0.02²) in both). An untrained state is a product of these weights, so its norm is the init's as
much as the mixer's; the paper's numbers are of the authors' (docs/papers.md).

The paper's DeltaNet is `S = diag(σ(W_g x)) S + (v − S k̂) k̂ᵀ` (no β); ours is the standard one (`β = σ(W_β x)`,
short convolutions; docs/design.md §2.2), so its number is not expected to match.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from statistics import median

import torch
from torch import nn

from linattn.experiments import paper, state_norm
from linattn.experiments.diagnostic import Diagnostic
from linattn.experiments.mixers import model_with
from linattn.extras import pyplot
from linattn.io import save_figure
from linattn.models import DecoderLM, ModelConfig

MIXERS = ("linear", "deltanet", "vla")
# each initialisation measured: its label -> the std of every linear layer's weight (None: PyTorch's own init)
INITS: dict[str, float | None] = {"default": None, "authors": 0.02}


@dataclass(frozen=True)
class StateNormModelConfig:
    T: int = 1000  # (a): tokens before the final state is read
    seeds: tuple[int, ...] = (0, 1, 2)  # model init and token stream
    long_T: int = 100_000  # (b): last token of the model-level curve
    points: int = 31  # log-spaced measurement points of the curves
    segment: int = 8192  # most tokens per forward call in (b)
    op_T: int = 100_000  # last token of the op-level curve
    model: str = "vla-tinylm"  # the preset
    init_std: float | None = None  # every linear layer's weight N(0, init_std²), biases zero; None: PyTorch's init

    def __post_init__(self):
        for name in ("T", "long_T", "points", "segment", "op_T"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 2:
                raise ValueError(f"{name}: expected an int >= 2, got {getattr(self, name)!r}")
        if self.long_T < self.T:
            raise ValueError(f"long_T: expected >= T = {self.T}, got {self.long_T}")
        if not self.seeds:
            raise ValueError("seeds: expected at least one seed")
        if self.init_std is not None and not (isinstance(self.init_std, float) and self.init_std > 0):
            raise ValueError(f"init_std: expected a float > 0 or None, got {self.init_std!r}")


FULL = StateNormModelConfig()
QUICK = StateNormModelConfig(long_T=10_000, points=13, op_T=10_000)


def model_config(mixer: str, config: StateNormModelConfig) -> ModelConfig:
    """The preset with `mixer` and a position table long enough for the curve."""
    return model_with(mixer, config.model, config.long_T)


def initialise(model: nn.Module, std: float | None) -> None:
    """Every linear layer's weight N(0, std²) and bias zero (`std` None: leave PyTorch's init)."""
    if std is None:
        return
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)


def layer_state_norms(state: dict) -> list[float]:
    """`mean_h ‖S^{(h)}‖_F` of every layer of a `DecoderLM` state with batch 1 (`S: [1, H, d, d]`)."""
    return [layer["mixer"]["S"].float().norm(dim=(-2, -1)).mean().item() for layer in state["layers"]]


@torch.no_grad()
def measure_model(mixer: str, config: StateNormModelConfig, seed: int, device: str = "cpu") -> dict:
    """One untrained model: `final` (every layer's norm after `T` tokens, one call) and `curve` (the last layer's
    norm at each of `t`, carrying the state across calls of at most `segment` tokens)."""
    torch.manual_seed(seed)
    cfg = model_config(mixer, config)
    model = DecoderLM(cfg)
    initialise(model, config.init_std)
    model = model.to(device).eval()
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, cfg.vocab_size, (1, config.long_T), generator=gen).to(device)  # [1, long_T]
    _, state = model(ids[:, : config.T])
    final = layer_state_norms(state)
    t_points = sorted(set(state_norm.measurement_points(config.long_T, config.points)) | {config.T})
    curve, state, done = [], None, 0
    for t in t_points:
        while done < t:
            n = min(t - done, config.segment)
            _, state = model(ids[:, done : done + n], state)
            done += n
        curve.append(layer_state_norms(state)[-1])
    return {"final": final, "t": t_points, "curve": curve}


def log_slope(t: list[int], norms: list[float], decades: float = 1.0) -> float:
    """Log-log slope of `norms` against `t` over the last `decades` of `t` (1: linear growth, 0: a plateau)."""
    i = next(j for j, tj in enumerate(t) if tj >= t[-1] / 10**decades)
    return (math.log(norms[-1]) - math.log(norms[i])) / (math.log(t[-1]) - math.log(t[i]))


def measure_init(config: StateNormModelConfig, device: str) -> dict:
    """Every mixer and seed at model level under `config.init_std`: the final norms and the curves, per seed."""
    runs = {m: [measure_model(m, config, s, device) for s in config.seeds] for m in MIXERS}
    t = runs[MIXERS[0]][0]["t"]
    i_T = t.index(config.T)
    consistency = max(abs(r["curve"][i_T] / r["final"][-1] - 1) for rs in runs.values() for r in rs)
    return {
        "init_std": config.init_std,
        "final": {m: {"per_seed": [r["final"] for r in rs]} for m, rs in runs.items()},  # seed -> layer -> norm
        "curve": {"t": t, "norms": {m: [r["curve"] for r in rs] for m, rs in runs.items()}},  # seed -> t -> norm
        "consistency": consistency,
    }


def summary(run: dict) -> dict:
    """One initialisation's seeds (`measure_init`'s) as REPORT.md's rules read them: per mixer the last layer's
    median norm with the seeds' range, every layer's median, the median curve and the median of the seeds'
    last-decade slopes; and linear attention's median over VLA's."""
    t, out = run["curve"]["t"], {}
    for m, final in run["final"].items():
        last, curves = [layers[-1] for layers in final["per_seed"]], run["curve"]["norms"][m]
        out[m] = {
            "last_layer": {"median": median(last), "min": min(last), "max": max(last)},
            "per_layer": [median(col) for col in zip(*final["per_seed"])],
            "curve": [median(col) for col in zip(*curves)],
            "slope": median(log_slope(t, c) for c in curves),
        }
    ratio = out["linear"]["last_layer"]["median"] / out["vla"]["last_layer"]["median"]
    return {"mixers": out, "ratio_linear_over_vla": ratio}


def measure(quick: bool, device: str, config: StateNormModelConfig | None = None) -> dict:
    """Every mixer and seed at model level under each of `INITS`, then the op-level curve; the JSON body of
    results.json (`inits`: label -> `measure_init`'s)."""
    config = config or (QUICK if quick else FULL)
    inits = {label: measure_init(replace(config, init_std=std), device) for label, std in INITS.items()}
    cfg = model_config("vla", config)
    op = state_norm.run(
        state_norm.StateNormConfig(T=config.op_T, points=config.points, H=cfg.n_heads, K=cfg.d_model // cfg.n_heads)
    )
    return {
        "config": {k: v for k, v in asdict(config).items() if k != "init_std"},
        "model": {k: v for k, v in asdict(cfg).items() if k not in ("mixer", "mixer_options")},
        "mixers": list(MIXERS),
        "paper": {**paper.VLA_STATE_NORM, "linear/vla": paper.VLA_STATE_NORM_RATIO},
        "inits": inits,
        "op_level": {"config": asdict(op.config), "t": op.t, "norms": op.norms},
    }


def _op_result(results: dict) -> state_norm.StateNormResult:
    op = results["op_level"]
    return state_norm.StateNormResult(state_norm.StateNormConfig(**op["config"]), op["t"], op["norms"])


def _shown(t: list[int]) -> tuple[int, ...]:
    """The powers of ten among `t`, and its last point."""
    return tuple(sorted({x for x in t if 10 ** round(math.log10(x)) == x and x > 1} | {t[-1]}))


INIT_TITLES = {"default": "PyTorch's default init", "authors": "The authors' init, every linear layer N(0, 0.02²)"}


def _model_tables(results: dict, label: str) -> list[str]:
    """(a) against the paper and (b) at a few `t` with the last decade's slope, of one initialisation."""
    c, run, paper_values = results["config"], results["inits"][label], results["paper"]
    s = summary(run)
    lines = [
        f"## {INIT_TITLES.get(label, label)}",
        "",
        f"### Final state: last layer `‖S_T‖_F` at T = {c['T']:,}, mean over heads",
        "",
        f"Untrained `{c['model']}`, random tokens, batch 1; median (min – max) over seeds {tuple(c['seeds'])}, the "
        "statistic REPORT.md judges.",
        "",
        "| mixer | ours | paper | every layer (median over seeds) |",
        "|---|---:|---:|---|",
    ]
    for m in results["mixers"]:
        last = s["mixers"][m]["last_layer"]
        lines.append(
            f"| {m} | {last['median']:.4g} ({last['min']:.4g} – {last['max']:.4g}) | {paper_values[m]:g} | "
            + ", ".join(f"{x:.4g}" for x in s["mixers"][m]["per_layer"])
            + " |"
        )
    lines += [
        f"| linear / VLA | {s['ratio_linear_over_vla']:.3g}× | {paper_values['linear/vla']:g}× | |",
        "",
        f"### Growth: last layer `‖S_t‖_F` against t (median over seeds), to {c['long_T']:,} tokens",
        "",
        f"State carried across forward calls of ≤ {c['segment']:,} tokens; at t = T it differs from the one-call "
        f"value by at most {run['consistency']:.1e} (relative). Slope: each seed's over the last decade, their "
        "median.",
        "",
    ]
    t = run["curve"]["t"]
    shown = _shown(t)
    lines += [
        "| mixer | " + " | ".join(f"t = {x:,}" for x in shown) + " | slope (last decade) |",
        "|---|" + "---:|" * (len(shown) + 1),
    ]
    for m in results["mixers"]:
        row = " | ".join(f"{s['mixers'][m]['curve'][t.index(x)]:.4g}" for x in shown)
        lines.append(f"| {m} | {row} | {s['mixers'][m]['slope']:+.2f} |")
    return [*lines, ""]


def table(results: dict) -> str:
    """Each initialisation's (a) against the paper and (b) growth, then the op-level table."""
    lines = [line for label in results["inits"] for line in _model_tables(results, label)]
    op = results["op_level"]["config"]
    lines += [
        f"## Op level (`state_norm.run`): synthetic unit keys, H = {op['H']}, K = V = {op['K']}, λ0 = {op['lam0']}",
        "",
        state_norm.table(_op_result(results), shown=_shown(results["op_level"]["t"])),
    ]
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    """Log-log `‖S_t‖_F` against `t`: the models under each initialisation (median, min–max band over seeds, the
    paper's T = 1000 values as stars), then one panel per op-level stream."""
    plt = pyplot()

    op = _op_result(results)
    inits = results["inits"]
    fig, axes = plt.subplots(1, len(inits) + len(state_norm.STREAMS), figsize=(24, 4.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    c = results["config"]
    for ax, (label, run) in zip(axes, inits.items()):
        curve = run["curve"]
        for i, m in enumerate(results["mixers"]):
            runs = torch.tensor(curve["norms"][m])  # [seeds, t]
            ax.fill_between(curve["t"], runs.min(0).values, runs.max(0).values, color=colors[i], alpha=0.2)
            ax.loglog(curve["t"], runs.median(0).values, marker="o", ms=3, color=colors[i], label=m)
            ax.loglog([1000], [results["paper"][m]], "*", ms=12, color=colors[i], mec="k", label=f"{m} (paper)")
        ax.set_title(f"untrained {c['model']}, {label} init, {len(c['seeds'])} seeds", fontsize=9)
    for ax, stream in zip(axes[len(inits) :], state_norm.STREAMS):
        for i, m in enumerate(state_norm.MIXERS):
            ax.loglog(op.t, op.norms[stream][m], marker="o", ms=3, color=colors[i], label=m)
        ax.set_title(f"op level: {state_norm.STREAMS[stream]}", fontsize=9)
    for ax in axes:
        t = torch.tensor(ax.get_lines()[0].get_xdata(), dtype=torch.float64)
        base = ax.get_lines()[0].get_ydata()[0]
        ax.loglog(t, base * t, "k:", lw=0.8, label="∝ t")
        ax.loglog(t, base * t.sqrt(), "k--", lw=0.8, label="∝ √t")
        ax.set_xlabel("tokens t")
        ax.set_ylabel("‖S_t‖_F (mean over heads)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    axes[len(inits)].legend(fontsize=7)
    fig.suptitle("VLA paper, state norm: model level under two inits (left) and op level")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


DIAGNOSTIC = Diagnostic(
    "vla-state-norm",
    "State norm ‖S_t‖_F of untrained TinyLMs (linear, DeltaNet, VLA) on random tokens, under PyTorch's init and "
    "the authors' (every linear layer N(0, 0.02²)): the last layer at T = 1000 against the paper, and its growth to "
    "100K tokens",
    measure,
    table,
    plot,
)
