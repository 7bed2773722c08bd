"""KLA paper, the Kaczmarz step's three properties, checked numerically in float64.

With `η = 1, ε = 0` KLA writes `S = S̃ + β k eᵀ`, `e = v − S̃ᵀk`, `β = 1 / ‖k‖²` (`S̃`: the decayed state `[K, V]`,
`k`: a raw key, `v`: its value). The paper says this one step is at once
1. an orthogonal projection of `S̃` onto `{S : Sᵀk = v}`: the constraint holds, and `S − S̃` is the smallest change
   that makes it hold — its norm is the distance `‖e‖ / ‖k‖` of `S̃` from that affine set, and it is orthogonal (in
   the Frobenius inner product) to every direction `D` along the set (`Dᵀk = 0`);
2. an exact line search: along its direction `k eᵀ` the step minimises the token's loss `L(S) = ½‖Sᵀk − v‖²`
   (`L(S̃ + s k eᵀ) = ½ (1 − s‖k‖²)² ‖e‖²`, a parabola in `s` with its minimum at `s = 1/‖k‖²`);
3. a normalised gradient step: `∇L(S̃) = −k eᵀ`, so the write is `S̃ − ∇L(S̃) / ‖k‖²`, stochastic gradient descent on
   the token's loss with its step divided by the input's squared norm.

Each is measured as a relative error on `draws` random `(S̃, k, v)` (key norms spread over four decades), with `S` as
our op writes it: `delta_rule(k, k, v, kaczmarz_eps=0, initial_state=S̃)` for one token (float64, `backend="naive"`,
the definition the other backends are tested against). Errors: (1) the largest of `‖Sᵀk − v‖ / ‖v‖`,
`|‖S − S̃‖_F − ‖e‖/‖k‖| / (‖e‖/‖k‖)` and `|⟨S − S̃, D⟩| / (‖S − S̃‖ ‖D‖)` over random `D` along the set; (2) the
parabola's minimiser, fitted through `L` at `s = 0, β, 2β`, against `β`; (3) `‖S − (S̃ − ∇L / ‖k‖²)‖ / ‖S − S̃‖`
with `∇L` from autograd. The same errors of a step that is not Kaczmarz's — Gated DeltaNet's `β = 0.5` on the raw key,
the paper's ablation without key normalisation — are the positive control: a check that cannot reject that step
could not confirm this one.

Full run: 1,000 draws at K = 64, V = 32 (a second on a CPU). `--quick`: 100 draws.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from linattn.experiments.diagnostic import Diagnostic
from linattn.extras import pyplot
from linattn.io import save_figure
from linattn.ops import delta_rule

PROPERTIES = {
    "projection": "orthogonal projection onto Sᵀk = v",
    "line_search": "exact line search along k eᵀ",
    "normalised_sgd": "normalised gradient step on ½‖Sᵀk − v‖²",
}
CONTROL_BETA = 0.5  # Gated DeltaNet's step on a raw key, independent of its norm: fails all three


@dataclass(frozen=True)
class KaczmarzConfig:
    draws: int = 1000  # random (S̃, k, v)
    K: int = 64
    V: int = 32
    directions: int = 8  # random directions along the constraint set, each draw
    log10_norm: tuple[float, float] = (-2.0, 2.0)  # key norms 10^U(a, b)
    seed: int = 0

    def __post_init__(self):
        for name in ("draws", "K", "V", "directions"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {getattr(self, name)!r}")
        low, high = self.log10_norm
        if not low <= high:
            raise ValueError(f"log10_norm: expected (low, high) with low <= high, got {self.log10_norm!r}")


FULL, QUICK = KaczmarzConfig(), KaczmarzConfig(draws=100)


def draw(config: KaczmarzConfig) -> dict[str, torch.Tensor]:
    """`S̃: [N, K, V]`, `k: [N, K]` (norms 10^U(log10_norm)), `v: [N, V]`, float64, from `config.seed` alone."""
    gen = torch.Generator().manual_seed(config.seed)
    N, K, V = config.draws, config.K, config.V
    low, high = config.log10_norm
    norms = 10 ** (low + (high - low) * torch.rand(N, 1, generator=gen, dtype=torch.float64))
    k = torch.nn.functional.normalize(torch.randn(N, K, generator=gen, dtype=torch.float64), dim=-1) * norms
    return {
        "S0": torch.randn(N, K, V, generator=gen, dtype=torch.float64),
        "k": k,
        "v": torch.randn(N, V, generator=gen, dtype=torch.float64),
        "D": torch.randn(N, config.directions, K, V, generator=gen, dtype=torch.float64),
    }


def kla_write(S0: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The state our op writes for one token: `delta_rule` with the Kaczmarz step (`η = 1, ε = 0`) from `S̃`."""
    q = k[:, None, None]  # [N, 1, 1, K]: one token, one head
    _, S = delta_rule(q, q, v[:, None, None], kaczmarz_eps=0.0, initial_state=S0[:, None], output_final_state=True,
                      backend="naive")  # fmt: skip
    return S[:, 0]  # [N, K, V]


def fixed_write(S0: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: float = CONTROL_BETA) -> torch.Tensor:
    """The control: the delta rule with a fixed step `β` on the raw key (no normalisation)."""
    q = k[:, None, None]
    b = torch.full(q.shape[:3], beta, dtype=k.dtype)
    _, S = delta_rule(q, q, v[:, None, None], beta=b, initial_state=S0[:, None], output_final_state=True,
                      backend="naive")  # fmt: skip
    return S[:, 0]


def _loss(S: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """`½‖Sᵀk − v‖²` of each draw: `[N]`."""
    return 0.5 * (torch.einsum("nkv,nk->nv", S, k) - v).pow(2).sum(-1)


def errors(S: torch.Tensor, x: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each property's relative error of the written states `S: [N, K, V]` from `x` (`draw`'s): `[N]` each."""
    S0, k, v, D = x["S0"], x["k"], x["v"], x["D"]
    kk = k.pow(2).sum(-1)  # [N]
    e = v - torch.einsum("nkv,nk->nv", S0, k)  # [N, V]
    change = S - S0
    # 1. the constraint, the distance, and orthogonality to the directions along the set (Dᵀk = 0)
    along = D - torch.einsum("nk,ndkv->ndkv", k / kk[:, None], torch.einsum("nk,ndkv->ndv", k, D)[:, :, None])
    constraint = (torch.einsum("nkv,nk->nv", S, k) - v).norm(dim=-1) / v.norm(dim=-1)
    distance = e.norm(dim=-1) / kk.sqrt()
    size = change.flatten(1).norm(dim=-1)
    inner = torch.einsum("nkv,ndkv->nd", change, along).abs() / (size[:, None] * along.flatten(2).norm(dim=-1))
    projection = torch.stack([constraint, (size - distance).abs() / distance, inner.amax(-1)]).amax(0)
    # 2. the loss along the direction k eᵀ at s = 0, β, 2β: a parabola's minimiser from three points
    beta = 1.0 / kk
    step = torch.einsum("nk,nv->nkv", k, e)
    L0, L1, L2 = (_loss(S0 + (i * beta)[:, None, None] * step, k, v) for i in range(3))
    s_star = beta * 0.5 * (L2 - 4 * L1 + 3 * L0) / (L2 - 2 * L1 + L0)
    direction = torch.einsum("nkv,nkv->n", change, step) / (size * step.flatten(1).norm(dim=-1))  # 1: along k eᵀ
    s_taken = size / step.flatten(1).norm(dim=-1)  # the step the write took along its direction
    line_search = torch.maximum((s_taken - s_star).abs() / s_star, (1 - direction).abs())
    # 3. the normalised gradient step, ∇L from autograd
    leaf = S0.clone().requires_grad_()
    (grad,) = torch.autograd.grad(_loss(leaf, k, v).sum(), leaf)
    normalised_sgd = (S - (S0 - grad / kk[:, None, None])).flatten(1).norm(dim=-1) / size
    return {"projection": projection, "line_search": line_search, "normalised_sgd": normalised_sgd}


def loss_along(x: dict[str, torch.Tensor], i: int = 0, points: int = 41) -> dict[str, list[float]]:
    """Draw `i`'s loss `L(S̃ + s k eᵀ) / L(S̃)` at `s · ‖k‖²` from 0 to 2: the parabola of property 2."""
    S0, k, v = x["S0"][i : i + 1], x["k"][i : i + 1], x["v"][i : i + 1]
    kk = k.pow(2).sum()
    e = v - torch.einsum("nkv,nk->nv", S0, k)
    step = torch.einsum("nk,nv->nkv", k, e)
    s = torch.linspace(0, 2, points, dtype=torch.float64)
    losses = torch.stack([_loss(S0 + (si / kk) * step, k, v)[0] for si in s]) / _loss(S0, k, v)[0]
    return {"s_times_kk": s.tolist(), "loss": losses.tolist()}


@torch.no_grad()
def _writes(x: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {"kla": kla_write(x["S0"], x["k"], x["v"]), "control": fixed_write(x["S0"], x["k"], x["v"])}


def measure(quick: bool, device: str, config: KaczmarzConfig | None = None) -> dict:
    """Each property's errors over the draws, for the KLA write and the control: the JSON body of results.json
    (`device` is not used: the check is float64 arithmetic on the CPU)."""
    config = config or (QUICK if quick else FULL)
    x = draw(config)
    measured = {}
    for name, S in _writes(x).items():
        err = errors(S, x)
        measured[name] = {
            p: {"max": e.max().item(), "median": e.median().item(), "min": e.min().item()} for p, e in err.items()
        }
    return {"config": asdict(config), "properties": PROPERTIES, "errors": measured, "line": loss_along(x)}


def table(results: dict) -> str:
    """Each property's relative error (largest, median) for the KLA write and the control's (smallest)."""
    c = results["config"]
    lines = [
        f"float64, {c['draws']:,} draws, K = {c['K']}, V = {c['V']}, key norms 10^U{tuple(c['log10_norm'])}; the KLA "
        f"write is our op's (`delta_rule(..., kaczmarz_eps=0)`, η = 1), the control Gated DeltaNet's β = "
        f"{CONTROL_BETA} on the raw key.",
        "",
        "| property | KLA: largest error | KLA: median | control: smallest error |",
        "|---|---:|---:|---:|",
    ]
    for p, text in results["properties"].items():
        kla, control = results["errors"]["kla"][p], results["errors"]["control"][p]
        lines.append(f"| {text} | {kla['max']:.1e} | {kla['median']:.1e} | {control['min']:.1e} |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    """The token's loss along the write direction (property 2), the KLA step marked, and each property's errors."""
    plt = pyplot()

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    line = results["line"]
    left.plot(line["s_times_kk"], line["loss"], color="k")
    left.axvline(1.0, color="C0", ls="--", label="KLA: β = 1 / ‖k‖²")
    left.set_xlabel("step along k eᵀ, in units of 1 / ‖k‖²")
    left.set_ylabel("L(S̃ + s k eᵀ) / L(S̃)")
    left.set_title("Exact line search (one draw)")
    left.legend()
    names = list(results["properties"])
    for i, (who, key) in enumerate((("kla", "max"), ("control", "min"))):
        values = [max(results["errors"][who][p][key], 1e-18) for p in names]
        label = "KLA, largest error" if who == "kla" else f"control (β = {CONTROL_BETA}), smallest error"
        right.bar([j + (i - 0.5) * 0.38 for j in range(len(names))], values, 0.38, label=label)
    right.set_xticks(range(len(names)), [n.replace("_", " ") for n in names])
    right.set_yscale("log")
    right.set_ylabel("relative error")
    right.set_title("The three properties, float64")
    right.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


DIAGNOSTIC = Diagnostic(
    "kaczmarz-properties",
    "The Kaczmarz step's three properties (orthogonal projection, exact line search, normalised gradient step), "
    "checked in float64 on random states, keys and values, against a step that has none of them",
    measure,
    table,
    plot,
)
