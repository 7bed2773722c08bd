"""State-norm growth at op level: `‖S_t‖_F` against `t` for linear attention, DeltaNet and VLA.

The VLA paper claims linear attention's state grows as `O(T)` while VLA's levels off (Proposition 1).
Here each mixer is fed the same random stream of unit keys and Gaussian values, and the state is carried
across segments (`initial_state` → `final_state`), so `t` reaches 100K tokens in bounded memory. Three
streams are measured, because the answer depends on them: linear attention's `S_t = Σ k_s v_sᵀ` is a random
walk (`‖S_t‖ ∝ √t`) unless `E[k vᵀ] ≠ 0`, and only then grows as `t`:

- `isotropic`: unit Gaussian keys, zero-mean values;
- `positive`: unit ELU+1 keys (every entry > 0, as the paper's models feed the state), zero-mean values;
- `coherent`: unit ELU+1 keys, values with a shared mean (`v ~ N(1, 1)` per entry).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from linattn.extras import pyplot
from linattn.io import save_figure
from linattn.ops import delta_rule, linear_attention, vla

MIXERS = ("linear", "deltanet", "vla")
STREAMS = {
    "isotropic": "unit Gaussian keys, zero-mean values",
    "positive": "unit ELU+1 keys, zero-mean values",
    "coherent": "unit ELU+1 keys, values ~ N(1, 1)",
}


@dataclass(frozen=True)
class StateNormConfig:
    T: int = 100_000  # last token
    points: int = 31  # log-spaced measurement points in [1, T]
    H: int = 4  # heads; norms are averaged over heads
    K: int = 64  # key = value head dim
    lam0: float = 0.1  # VLA ridge
    seed: int = 0


@dataclass
class StateNormResult:
    config: StateNormConfig
    t: list[int]
    norms: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # stream -> mixer -> ‖S_t‖_F

    def slope(self, stream: str, mixer: str, decades: float = 1.0) -> float:
        """Log-log slope of `‖S_t‖_F` over the last `decades` of `t` (1: linear growth, 0: a plateau)."""
        t, n = self.t, self.norms[stream][mixer]
        i = next(j for j, tj in enumerate(t) if tj >= t[-1] / 10**decades)
        return (math.log(n[-1]) - math.log(n[i])) / (math.log(t[-1]) - math.log(t[i]))


def measurement_points(T: int, points: int) -> list[int]:
    """`points` distinct log-spaced integers from 1 to `T`."""
    return sorted({max(1, round(T ** (i / (points - 1)))) for i in range(points)})


def _segment(stream: str, n: int, H: int, K: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    raw = torch.randn(1, n, H, K, generator=gen)
    k = F.normalize(raw if stream == "isotropic" else F.elu(raw) + 1, dim=-1)
    v = torch.randn(1, n, H, K, generator=gen) + (1.0 if stream == "coherent" else 0.0)
    u = F.normalize(torch.randn(1, n, H, K, generator=gen), dim=-1) / K**0.5
    return {"k": k, "v": v, "u": u}


def _advance(mixer: str, x: dict[str, torch.Tensor], state, lam0: float):
    k, v = x["k"], x["v"]
    if mixer == "linear":
        return linear_attention(k, k, v, initial_state=state, output_final_state=True)[1]
    if mixer == "deltanet":
        return delta_rule(k, k, v, initial_state=state, output_final_state=True)[1]
    return vla(k, k, v, x["u"], lam0=lam0, initial_state=state, output_final_state=True)[1]


def _frobenius(mixer: str, state) -> float:
    S = state[0] if mixer == "vla" else state
    return S.norm(dim=(-2, -1)).mean().item()


@torch.no_grad()
def run(config: StateNormConfig = StateNormConfig(), progress=None) -> StateNormResult:
    """Measure `‖S_t‖_F` (mean over heads) at log-spaced `t` for every mixer and stream (chunk backend).

    `progress(stream, t)` is called after each measurement point.
    """
    t_points = measurement_points(config.T, config.points)
    result = StateNormResult(config=config, t=t_points)
    for stream in STREAMS:
        states = dict.fromkeys(MIXERS)
        result.norms[stream] = {m: [] for m in MIXERS}
        gen = torch.Generator().manual_seed(config.seed)
        done = 0
        for t in t_points:
            x = _segment(stream, t - done, config.H, config.K, gen)  # every mixer sees the same tokens
            for m in MIXERS:
                states[m] = _advance(m, x, states[m], config.lam0)
                result.norms[stream][m].append(_frobenius(m, states[m]))
            done = t
            if progress is not None:
                progress(stream, t)
    return result


def table(result: StateNormResult, shown: tuple[int, ...] = (10, 100, 1_000, 10_000, 100_000)) -> str:
    """Markdown table: `‖S_t‖_F` at a few `t`, and the log-log slope over the last decade."""
    cols = [t for t in shown if t in result.t]
    head = "| stream | mixer | " + " | ".join(f"t = {t:,}" for t in cols) + " | slope (last decade) |"
    lines = [head, "|---|---|" + "---:|" * (len(cols) + 1)]
    for stream in STREAMS:
        for m in MIXERS:
            n = result.norms[stream][m]
            vals = " | ".join(f"{n[result.t.index(t)]:.3g}" for t in cols)
            lines.append(f"| {stream} | {m} | {vals} | {result.slope(stream, m):+.2f} |")
    return "\n".join(lines)


def plot(result: StateNormResult, path) -> None:
    """Log-log plot of `‖S_t‖_F` against `t`, one panel per stream, with `√t` and `t` guides."""
    plt = pyplot()

    fig, axes = plt.subplots(1, len(STREAMS), figsize=(15, 4.4), sharey=True)
    t = torch.tensor(result.t, dtype=torch.float64)
    for ax, stream in zip(axes, STREAMS):
        for m, style in zip(MIXERS, ({"marker": "o"}, {"marker": "s", "ls": "--"}, {"marker": "^", "ls": ":"})):
            ax.loglog(result.t, result.norms[stream][m], ms=4, label=m, **style)
        base = result.norms[stream]["linear"][0]
        ax.loglog(result.t, (base * t).tolist(), "k:", lw=0.8, label="∝ t")
        ax.loglog(result.t, (base * t.sqrt()).tolist(), "k--", lw=0.8, label="∝ √t")
        ax.set_title(STREAMS[stream])
        ax.set_xlabel("tokens t")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("‖S_t‖_F (mean over heads)")
    axes[0].legend()
    c = result.config
    fig.suptitle(f"State norm at op level, H={c.H}, K=V={c.K}, float32, λ0={c.lam0} (VLA)")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
