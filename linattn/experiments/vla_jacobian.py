"""VLA paper, Jacobian: the state update's `J_t = ∂S_t/∂S_{t-1} = I − α̂_t k̂_tᵀ` in untrained and trained TinyLMs.

For every VLA layer of an untrained `vla-tinylm` (`torch.manual_seed(seed)`, uniformly random tokens, batch 1),
the layer's input is captured with a forward pre-hook and its gate recomputed from the layer's parameters the way
`VariationalLinearAttention.mix` forms it (the layer does not return its gate):

    k_raw = W_k x,   k = ELU(k_raw) + 1,   k̂ = k / ‖k‖,   u = normalize(W_u k_raw) / √d
    α̂_t = A_t k̂_t / ‖A_t k̂_t‖ = `vla_gate(k, u, lam0)`,   A_t = (λ0 I + Σ_{s≤t} u_s u_sᵀ)⁻¹

(replaying the delta rule with these `k̂, α̂` and the layer's values reproduces the layer's state; see the tests).
Reported per layer, over tokens, heads and seeds:

- quantiles of `‖J_t‖₂` (`jacobian.rank_one_update_norm`; Proposition 2 says exactly 1, true only when α̂ = k̂;
  for unit vectors it lies in [1, (1 + √5)/2]) and of `cos(α̂_t, k̂_t)` (> 0, as `A_t` is positive definite);
- quantiles of `‖J_{t+w−1} ⋯ J_t‖₂` over non-overlapping windows of `w` steps (`jacobian.window_product_norms`),
  and the growth `‖J_t ⋯ J_1‖₂` from the first token;
- the unnormalised write `α_t = A_t k̂_t` (here by a direct solve `α_t = M_t⁻¹ k̂_t`, `M_t = λ0 I + Σ_{s≤t} u_s u_sᵀ`,
  because the ops return only α̂; its direction is checked against `vla_gate`: `gate_check`), in the TinyLM
  (d_h = 32, its λ0 = 0.1) and in a TinyLM widened to d_model = 384 (4 heads of d_h = 96) at λ0 ∈ {0.1, 1, 10}:
  `‖α_t‖`, `‖I − α_t k̂_tᵀ‖₂` and the product over 25 steps (paper: "~d_h/λ0 per step, 1e32 after 25 steps at
  d_h = 96"). With `‖u‖ = 1/√d`, `A_t ≈ I/λ0` for the first tokens, so `‖α_t‖ ≈ 1/λ0` there.

Trained: the measurement trains its own VLA TinyLM on MQAR (n = 8, the paper's recipe: 3000 steps, batch 64, lr
3e-4) and collects the same one-step statistics on held-out MQAR sequences (`trained`); `collect` takes any
`DecoderLM` with VLA layers.

Full run: T = 1000 tokens, seeds 0–2, windows of 25, 100 and 1000 steps (30 s on a 2-core CPU), and the trained
model's 3000 steps (about 10 minutes there). `--quick`: T = 200, one seed, windows of 25 and 100, 100 training
steps (20 s).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from linattn.experiments import paper
from linattn.experiments.diagnostic import Diagnostic
from linattn.experiments.jacobian import cosine, rank_one_update_norm, window_product_norms
from linattn.extras import pyplot
from linattn.io import save_figure
from linattn.layers.base import elu_plus_one, split_heads
from linattn.layers.vla import VariationalLinearAttention
from linattn.models import DecoderLM, preset
from linattn.ops import vla_gate

QUANTILES = {"min": 0.0, "p01": 0.01, "p10": 0.1, "p50": 0.5, "p90": 0.9, "p99": 0.99, "max": 1.0}
GROWTH_POINTS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000)


@dataclass(frozen=True)
class JacobianConfig:
    T: int = 1000  # tokens per model
    seeds: tuple[int, ...] = (0, 1, 2)  # model init and tokens
    windows: tuple[int, ...] = (25, 100, 1000)  # product windows (those <= T are measured)
    model: str = "vla-tinylm"  # the preset
    wide_d_model: int = 384  # the widened model of the unnormalised variant: d_h = wide_d_model / n_heads
    lam0s: tuple[float, ...] = (0.1, 1.0, 10.0)  # λ0 of the widened model
    unnormalised_window: int = 25  # steps of the unnormalised product
    bins: int = 60  # histogram bins
    trained_n: int = 8  # the trained model: MQAR (VLA format) with this many pairs, the paper's recipe
    train_steps: int = 3000  # its AdamW updates (the paper's 3000; 0 skips the trained model)
    trained_sequences: int = 64  # MQAR sequences whose gates are collected from the trained model

    def __post_init__(self):
        if not isinstance(self.T, int) or self.T < 2:
            raise ValueError(f"T: expected an int >= 2, got {self.T!r}")
        if not self.seeds:
            raise ValueError("seeds: expected at least one seed")
        if not 1 <= self.unnormalised_window <= self.T:
            raise ValueError(
                f"unnormalised_window: expected 1 <= window <= T = {self.T}, got {self.unnormalised_window}"
            )
        if self.train_steps < 0 or self.trained_n < 1 or self.trained_sequences < 1:
            raise ValueError(
                "train_steps, trained_n, trained_sequences: expected >= 0, >= 1, >= 1, got "
                f"{self.train_steps}, {self.trained_n}, {self.trained_sequences}"
            )
        if not any(1 <= w <= self.T for w in self.windows):
            raise ValueError(f"windows: expected at least one window in [1, T = {self.T}], got {self.windows}")


FULL = JacobianConfig()
QUICK = JacobianConfig(T=200, seeds=(0,), windows=(25, 100), train_steps=100, trained_sequences=8)


def gate_inputs(layer: VariationalLinearAttention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys `k = ELU(W_k x)+1` and penalty directions `u = normalize(W_u k_raw)/√d` that `layer` feeds its gate,
    from its input `x: [B, T, d_model]`: `([B, T, H, d], [B, T, H, d])`."""
    H, d = layer.n_heads, layer.head_dim
    k_raw = split_heads(layer.k_proj(x), H)
    u = F.normalize(torch.einsum("bthi,hji->bthj", k_raw, layer.W_u.to(k_raw.dtype)), dim=-1) / d**0.5
    return elu_plus_one(k_raw), u


@torch.no_grad()
def collect(model: DecoderLM, ids: torch.Tensor) -> list[dict]:
    """Run `model` on `ids: [1, T]` and return, per VLA layer, `{"k_hat", "alpha_hat", "u": [T, H, d] float64 (CPU),
    "lam0"}`: the unit key and unit write direction of every step, as the layer's gate computes them."""
    if ids.dim() != 2 or ids.shape[0] != 1:
        raise ValueError(f"ids: expected shape [1, T], got {list(ids.shape)}")
    layers = [b.mixer for b in model.blocks if isinstance(b.mixer, VariationalLinearAttention)]
    if not layers:
        raise ValueError("model: expected a DecoderLM with VLA mixers")
    inputs = []
    hooks = [layer.register_forward_pre_hook(lambda _, args: inputs.append(args[0])) for layer in layers]
    try:
        model(ids)
    finally:
        for h in hooks:
            h.remove()
    out = []
    for layer, x in zip(layers, inputs):
        k, u = gate_inputs(layer, x)
        alpha_hat, _ = vla_gate(k, u, lam0=layer.lam0)  # [1, T, H, d]
        k_hat = F.normalize(k.to(alpha_hat.dtype), dim=-1)  # as the op normalises it
        gates = {"k_hat": k_hat, "alpha_hat": alpha_hat, "u": u}
        out.append({**{n: g[0].double().cpu() for n, g in gates.items()}, "lam0": layer.lam0})
    return out


def unnormalised_alpha(k_hat: torch.Tensor, u: torch.Tensor, lam0: float) -> torch.Tensor:
    """`α_t = A_t k̂_t = M_t⁻¹ k̂_t`, `M_t = λ0 I + Σ_{s≤t} u_s u_sᵀ`, by a direct solve per head in float64.
    `k_hat, u: [T, H, d]` -> `[T, H, d]`."""
    _, H, d = k_hat.shape
    eye = torch.eye(d, dtype=torch.float64)
    alphas = []
    for h in range(H):
        uh = u[:, h].double()  # [T, d]
        M = lam0 * eye + torch.cumsum(uh[:, :, None] * uh[:, None, :], dim=0)  # [T, d, d]
        alphas.append(torch.linalg.solve(M, k_hat[:, h].double()[..., None])[..., 0])
    return torch.stack(alphas, dim=1)


def quantiles(x: torch.Tensor) -> dict[str, float]:
    """Named quantiles and the mean of a flat sample."""
    x = x.double().flatten()
    q = torch.quantile(x, torch.tensor(list(QUANTILES.values()), dtype=torch.float64))
    return {**{n: v.item() for n, v in zip(QUANTILES, q)}, "mean": x.mean().item()}


def _one_step(alpha: list[torch.Tensor], k_hat: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """`‖I − α k̂ᵀ‖₂` and `cos(α, k̂)` of every step and head of every run, flat."""
    step = torch.cat([rank_one_update_norm(a, k).flatten() for a, k in zip(alpha, k_hat)])
    return step, torch.cat([cosine(a, k).flatten() for a, k in zip(alpha, k_hat)])


def _windows(alpha: list[torch.Tensor], k_hat: list[torch.Tensor], w: int) -> torch.Tensor:
    """Product norms over non-overlapping windows of `w` steps, every head of every run: `[windows]`."""
    return torch.cat(
        [window_product_norms(a[:, h], k[:, h], w) for a, k in zip(alpha, k_hat) for h in range(a.shape[1])]
    )


def _growth(alpha: list[torch.Tensor], k_hat: list[torch.Tensor], ts: list[int]) -> dict[str, list]:
    """`‖J_t ⋯ J_1‖₂` at each of `ts`: median, min and max over heads and runs."""
    curves = torch.stack(
        [
            torch.cat([window_product_norms(a[:t, h], k[:t, h], t) for t in ts])
            for a, k in zip(alpha, k_hat)
            for h in range(a.shape[1])
        ]
    )  # [heads × runs, len(ts)]
    return {
        "t": list(ts),
        "median": curves.median(0).values.tolist(),
        "min": curves.min(0).values.tolist(),
        "max": curves.max(0).values.tolist(),
    }


def _unnormalised(runs: list[list[dict]], lam0: float, window: int) -> dict:
    """Statistics of `α_t = A_t k̂_t` pooled over the layers of `runs` (seed -> layer -> `collect` output)."""
    k_hat = [layer["k_hat"] for run in runs for layer in run]
    alpha = [unnormalised_alpha(layer["k_hat"], layer["u"], lam0) for run in runs for layer in run]
    first = _growth(alpha, k_hat, list(range(1, window + 1)))
    product = torch.tensor(first["median"][-1], dtype=torch.float64)
    return {
        "alpha_norm": quantiles(torch.cat([a.norm(dim=-1).flatten() for a in alpha])),
        "step_norm": quantiles(_one_step(alpha, k_hat)[0]),
        "window": window,
        "window_products": quantiles(_windows(alpha, k_hat, window)),
        "first_window": first,
        "per_step_factor": product.pow(1 / window).item(),
    }


def trained(config: JacobianConfig, device: str, work: Path | None = None) -> dict:
    """A VLA TinyLM trained on MQAR (VLA format, `trained_n` pairs, T = 3n + 1) with the paper's recipe (AdamW
    lr 3e-4, batch 64, warmup 300, `train_steps` updates, seed 42), then the one-step statistics of its gates over
    `trained_sequences` held-out MQAR sequences, per layer, and the product over each whole sequence. With `work`
    the training checkpoints there (every 500 steps) and resumes from it."""
    from linattn.experiments.protocols import paper as paper_protocol
    from linattn.experiments.runner import evaluate_on
    from linattn.tasks import VLAMQARConfig, generate
    from linattn.train import train

    task = VLAMQARConfig(n_pairs=config.trained_n)
    recipe = paper_protocol(config.train_steps, 64, min(300, config.train_steps // 10)).train
    torch.manual_seed(recipe.seed)
    base = preset(config.model, mixer="vla")
    model = DecoderLM(base.replace(vocab_size=max(base.vocab_size, 128)))  # the VLA format's 127 tokens and SEP
    train(model, recipe, lambda step, gen: generate(task, recipe.batch_size, gen), None, work, device=device)
    gen = torch.Generator().manual_seed(12345)  # held out: the trainer draws from seed 42
    batch = generate(task, config.trained_sequences, gen)
    accuracy = evaluate_on(model, [batch], torch.device(device))["acc"]
    model.eval()
    runs = [collect(model, batch.inputs[i : i + 1].to(device)) for i in range(config.trained_sequences)]
    layers = []
    for i in range(len(runs[0])):
        alpha = [run[i]["alpha_hat"] for run in runs]
        k_hat = [run[i]["k_hat"] for run in runs]
        T = alpha[0].shape[0]
        step, cos = _one_step(alpha, k_hat)
        layers.append(
            {
                "layer": i,
                "step_norm": quantiles(step),
                "cos": quantiles(cos),
                "sequence_product": quantiles(_windows(alpha, k_hat, T)),
            }
        )
    return {"n_pairs": config.trained_n, "T": 3 * config.trained_n + 1, "steps": config.train_steps,
            "accuracy": accuracy, "layers": layers}  # fmt: skip


def measure(quick: bool, device: str, config: JacobianConfig | None = None, work: Path | None = None) -> dict:
    """Collect every seed's gates, then the statistics; the JSON body of results.json (`work`: the trained model's
    checkpoint folder, as `trained`)."""
    config = config or (QUICK if quick else FULL)

    def runs_of(model_config) -> list[list[dict]]:
        runs = []
        for seed in config.seeds:
            torch.manual_seed(seed)
            model = DecoderLM(model_config).to(device).eval()
            gen = torch.Generator().manual_seed(seed)
            ids = torch.randint(0, model_config.vocab_size, (1, config.T), generator=gen).to(device)  # [1, T]
            runs.append(collect(model, ids))
        return runs

    base = preset(config.model, mixer="vla")
    runs = runs_of(base)  # seed -> layer -> gates
    n_layers = len(runs[0])
    norm_edges = torch.linspace(1.0, (1 + 5**0.5) / 2, config.bins + 1, dtype=torch.float64)
    cos_edges = torch.linspace(0.0, 1.0, config.bins + 1, dtype=torch.float64)
    windows = [w for w in config.windows if 1 <= w <= config.T]
    growth_t = [t for t in GROWTH_POINTS if t <= config.T]
    layers = []
    for i in range(n_layers):
        alpha = [run[i]["alpha_hat"] for run in runs]
        k_hat = [run[i]["k_hat"] for run in runs]
        step, cos = _one_step(alpha, k_hat)
        products = {w: _windows(alpha, k_hat, w) for w in windows}
        layers.append(
            {
                "layer": i,
                "step_norm": quantiles(step),
                "cos": quantiles(cos),
                "hist_step_norm": torch.histogram(step.clamp(norm_edges[0], norm_edges[-1]), norm_edges)[0].tolist(),
                "hist_cos": torch.histogram(cos.clamp(0, 1), cos_edges)[0].tolist(),
                "windows": {
                    str(w): {**quantiles(p), "count": p.numel(), "above_1": (p > 1 + 1e-9).double().mean().item()}
                    for w, p in products.items()
                },
                "growth": _growth(alpha, k_hat, growth_t),
            }
        )
    gate_check = max(
        (F.normalize(unnormalised_alpha(g["k_hat"], g["u"], g["lam0"]), dim=-1) - g["alpha_hat"]).abs().max().item()
        for run in runs
        for g in run
    )
    d_h = base.d_model // base.n_heads
    unnormalised = [{"model": config.model, "d_h": d_h, "lam0": runs[0][0]["lam0"]}]
    unnormalised[0].update(_unnormalised(runs, runs[0][0]["lam0"], config.unnormalised_window))
    for lam0 in config.lam0s:
        wide = base.replace(d_model=config.wide_d_model, mixer_options={"lam0": lam0})
        entry = {"model": f"{config.model}, d_model {config.wide_d_model}", "d_h": wide.d_model // wide.n_heads}
        unnormalised.append({**entry, "lam0": lam0, **_unnormalised(runs_of(wide), lam0, config.unnormalised_window)})
    return {
        "config": asdict(config),
        "d_h": d_h,
        "paper": {"step_norm": paper.VLA_JACOBIAN_NORM, "unnormalised": paper.VLA_UNNORMALISED_GROWTH},
        "gate_check": gate_check,
        "hist_edges": {"step_norm": norm_edges.tolist(), "cos": cos_edges.tolist()},
        "layers": layers,
        "unnormalised": unnormalised,
        "trained": trained(config, device, work) if config.train_steps else None,
    }


def _row(q: dict) -> str:
    return " | ".join(f"{q[k]:.4g}" for k in QUANTILES)


def _median_max(q: dict) -> str:
    return f"{q['p50']:.3g} ({q['max']:.3g})"


def table(results: dict) -> str:
    """Single-step quantiles, window products, growth from the first token, and the unnormalised variant."""
    c = results["config"]
    head = "| min | 1% | 10% | 50% | 90% | 99% | max |"
    lines = [
        f"Untrained `{c['model']}` (d_h = {results['d_h']}), {c['T']:,} random tokens, seeds {c['seeds']}; quantiles "
        "over tokens and heads (and seeds). The gate recomputed from each layer's parameters agrees in direction "
        f"with a direct float64 solve to {results['gate_check']:.1e} (max abs).",
        "",
        f"## One step: `‖I − α̂_t k̂_tᵀ‖₂` (paper, Proposition 2: exactly {results['paper']['step_norm']:g}) and "
        "`cos(α̂_t, k̂_t)`",
        "",
        "| layer | quantity " + head,
        "|---|---|" + "---:|" * 7,
    ]
    for layer in results["layers"]:
        lines.append(f"| {layer['layer']} | ‖I − α̂k̂ᵀ‖₂ | {_row(layer['step_norm'])} |")
        lines.append(f"| {layer['layer']} | cos(α̂, k̂) | {_row(layer['cos'])} |")
    lines += [
        "",
        "## Products over non-overlapping windows: `‖J_{t+w−1} ⋯ J_t‖₂`",
        "",
        "| layer | w | windows " + head + " share > 1 |",
        "|---|---:|---:|" + "---:|" * 8,
    ]
    for layer in results["layers"]:
        for w, q in layer["windows"].items():
            lines.append(f"| {layer['layer']} | {w} | {q['count']} | {_row(q)} | {q['above_1']:.2f} |")
    ts = results["layers"][0]["growth"]["t"]
    lines += [
        "",
        "## From the first token: `‖J_t ⋯ J_1‖₂`, median (max) over heads and seeds",
        "",
        "| layer | " + " | ".join(f"t = {t:,}" for t in ts) + " |",
        "|---|" + "---:|" * len(ts),
    ]
    for layer in results["layers"]:
        g = layer["growth"]
        lines.append(
            f"| {layer['layer']} | " + " | ".join(f"{m:.3g} ({x:.3g})" for m, x in zip(g["median"], g["max"])) + " |"
        )
    t = results.get("trained")
    if t:
        lines += [
            "",
            f"## Trained: VLA TinyLM after {t['steps']:,} steps of MQAR (n = {t['n_pairs']}, T = {t['T']}), "
            f"held-out accuracy {t['accuracy']:.3f}; gates over held-out MQAR sequences",
            "",
            "| layer | quantity " + head,
            "|---|---|" + "---:|" * 7,
        ]
        for layer in t["layers"]:
            lines.append(f"| {layer['layer']} | ‖I − α̂k̂ᵀ‖₂ | {_row(layer['step_norm'])} |")
            lines.append(f"| {layer['layer']} | cos(α̂, k̂) | {_row(layer['cos'])} |")
            lines.append(f"| {layer['layer']} | product over the sequence | {_row(layer['sequence_product'])} |")
    p = results["paper"]["unnormalised"]
    w = results["unnormalised"][0]["window"]
    lines += [
        "",
        f"## Unnormalised write `α_t = A_t k̂_t`: median (max) over tokens, heads, layers and seeds "
        f"(paper: {p['product_norm']:.0e} after {p['steps']} steps at d_h = {p['d_h']})",
        "",
        f"| model | d_h | λ0 | ‖α_t‖ | ‖I − α_t k̂_tᵀ‖₂ | product, first {w} steps | product, all {w}-step windows "
        "| per-step factor (first window) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in results["unnormalised"]:
        first = e["first_window"]
        lines.append(
            f"| {e['model']} | {e['d_h']} | {e['lam0']:g} | {_median_max(e['alpha_norm'])} | "
            f"{_median_max(e['step_norm'])} | {first['median'][-1]:.3g} ({first['max'][-1]:.3g}) | "
            f"{_median_max(e['window_products'])} | {e['per_step_factor']:.3g} |"
        )
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    """Histograms of `‖J_t‖₂` and `cos(α̂_t, k̂_t)` per layer; product norms from the first token (log-log), for α̂
    and the unnormalised α."""
    plt = pyplot()

    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6))
    edges = results["hist_edges"]
    for name, ax, xlabel in (
        ("step_norm", axes[0], "‖I − α̂_t k̂_tᵀ‖₂"),
        ("cos", axes[1], "cos(α̂_t, k̂_t)"),
    ):
        for layer in results["layers"]:
            ax.stairs(layer[f"hist_{name}"], edges[name], label=f"layer {layer['layer']}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("tokens × heads")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].axvline(results["paper"]["step_norm"], color="k", ls="--", lw=0.8, label="paper (Prop. 2)")
    axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=8)
    ax = axes[2]
    for layer in results["layers"]:
        g = layer["growth"]
        ax.fill_between(g["t"], g["min"], g["max"], alpha=0.2)
        ax.loglog(g["t"], g["median"], marker="o", ms=3, label=f"α̂ (normalised), layer {layer['layer']}")
    for e in results["unnormalised"]:
        g = e["first_window"]
        ax.loglog(g["t"], g["median"], ls="--", label=f"α unnormalised, d_h={e['d_h']}, λ0={e['lam0']:g}")
    p = results["paper"]["unnormalised"]
    ax.loglog([p["steps"]], [p["product_norm"]], "k*", ms=12, label=f"paper, d_h={p['d_h']}")
    ax.set_xlabel("steps t from the first token")
    ax.set_ylabel("‖J_t ⋯ J_1‖₂ (median over heads)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    c = results["config"]
    fig.suptitle(f"VLA paper, Jacobian of the state update: untrained {c['model']}, T = {c['T']:,}")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


DIAGNOSTIC = Diagnostic(
    "vla-jacobian",
    "Jacobian I − α̂_t k̂_tᵀ of VLA's state update in untrained and MQAR-trained TinyLMs: its norm, products over "
    "25/100/1000 steps, and the unnormalised write's growth",
    measure,
    table,
    plot,
    resumable=True,
)
