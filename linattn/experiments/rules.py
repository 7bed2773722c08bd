"""The rules that judge each claim (`linattn.experiments.claims`): one judge per rule, reading a `results.json`
through `verdicts.Results`; its docstring is the rule the report prints, its thresholds are ours, and each names
its positive control (`verdicts.checked` turns a failed control into `inconclusive`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from itertools import groupby, pairwise

from linattn.experiments import paper, vla_state_norm
from linattn.experiments.verdicts import FAILS, HOLDS, INCONCLUSIVE, PARTLY, Judge, Results, Verdict, checked
from linattn.experiments.vla_gradient_flow import log_slope
from linattn.experiments.vla_speed import crossover_text, speedup

LOSS_MARGIN = 0.01  # nats a token (1% of perplexity): a smaller difference is not read as lower
OVERFIT = 0.05  # nats a token: a last validation loss this far above the best one is an overfit model


# --- VLA: MQAR capacity, long context, overload, copy -----------------------------------------------------------------


def mqar_row(mixer: str) -> str:
    """The paper's MQAR capacity row of `mixer`, `n: accuracy` by n."""
    return ", ".join(f"{n}: {a:.3f}" for n, a in sorted(paper.VLA_MQAR_CAPACITY[mixer].items()))


def _budget(r: Results) -> tuple[bool, str]:
    """The capacity rules' positive control: under the paper's protocol its budget is reproduced (our softmax and
    linear-attention rows within 0.03 of the paper's at every n); under another, some mixer solves every n."""
    if r.get("protocol") == "paper":
        worst = max(abs(r.row(m)[n] - p) for m in ("softmax", "linear") for n, p in paper.VLA_MQAR_CAPACITY[m].items())
        return worst <= 0.03, f"softmax and linear attention within {worst:.3f} of the paper's rows"
    best = max(min(row.values()) for row in (r.row(m) for m in r["table"]))
    return best >= 0.99, f"the best mixer's lowest accuracy over n is {best:.3f}"


def vla_solves(r: Results) -> Verdict:
    """Holds when VLA's median accuracy is ≥ 0.99 at every n (the paper: 1.000); does not hold otherwise. Positive
    control: under the paper's protocol, the same run reproduces the paper's softmax and linear-attention rows within
    0.03 at every n (its budget is the paper's); under another, some mixer solves every n."""
    row = r.row("vla")
    ours = f"{min(row.values()):.3f} – {max(row.values()):.3f} (n = {min(row)} … {max(row)})"
    ok, control = _budget(r)
    return checked(Verdict(ours, HOLDS if min(row.values()) >= 0.99 else FAILS), ok, control)


def baseline_matches(mixer: str) -> Judge:
    def judge(r: Results) -> Verdict:
        """Holds when ours (the median) is within 0.03 of the paper's accuracy at every n both report; does not
        hold otherwise. Positive control: VLA solves the same run's task (≥ 0.99 at every n), so the task and the
        budget can be learnt by this model and a baseline at chance is the baseline's."""
        row = r.row(mixer)
        worst = max(abs(row[n] - p) for n, p in paper.VLA_MQAR_CAPACITY[mixer].items() if n in row)
        ours = ", ".join(f"{n}: {r.cell(mixer, n)}" for n in row)
        vla = min(r.row("vla").values())
        return checked(Verdict(ours, HOLDS if worst <= 0.03 else FAILS), vla >= 0.99, f"VLA's lowest is {vla:.3f}")

    return judge


def text_figure(mixer: str) -> Judge:
    def judge(r: Results) -> Verdict:
        """The figure the paper's text gives where it differs from the paper's table: holds when ours (the median) is
        within 0.03 of it at the n it names; does not hold otherwise. Positive control: VLA solves the same run's
        task (≥ 0.99 at every n), so the task and the budget can be learnt by this model."""
        (n, figure), *_ = paper.VLA_MQAR_TEXT[mixer].items()
        ours = f"{r.cell(mixer, n)} at n = {n} (the paper's table: {paper.VLA_MQAR_CAPACITY[mixer][n]:.3f})"
        vla = min(r.row("vla").values())
        v = Verdict(ours, HOLDS if abs(r.row(mixer)[n] - figure) <= 0.03 else FAILS)
        return checked(v, vla >= 0.99, f"VLA's lowest is {vla:.3f}")

    return judge


def _steps_to_solve(r: Results, mixer: str, n: int) -> str:
    """How many steps `mixer`'s runs at `n` (at the chosen lr) took to reach the stopping accuracy (their median),
    or how many of them did within their budget, and in how many steps each."""
    lr = r.get("chosen_lr", {}).get(mixer, {}).get(str(n))
    runs = [x for x in r["runs"] if x["mixer"] == mixer and x["x"] == n and x["lr"] == lr]
    solved = sorted(x["steps"] for x in runs if (x.get("stop_reason") or "").startswith("acc="))
    if len(solved) == len(runs):
        return f"solved in {statistics.median(solved):,.0f} steps"
    within = f"{len(solved)} of {len(runs)} seeds solved within {max(x['steps'] for x in runs):,} steps"
    return within + (f": in {', '.join(f'{steps:,}' for steps in solved)}" if solved else "")


def softmax_cannot(long_budget: bool) -> Judge:
    def judge(r: Results) -> Verdict:
        """The paper reads softmax's row as attention failing MQAR. Holds when plain softmax attention in the same
        TinyLM stays ≤ 0.5 at the largest n within a long budget (up to 20,000 steps, constant lr: the failure is
        the model's, not the budget's); partly when it solves a smaller n but not the largest; does not hold when it
        exceeds 0.5 at the largest n (the paper's budget was the cause). Within a shorter budget (the fair
        protocol's 5,000 steps) a failure cannot tell 'cannot' from 'slower', and reads inconclusive. Positive
        control: softmax-conv, the same TinyLM with a short convolution before attention, solves the largest n
        (≥ 0.99) in the same run. The steps each took to solve are shown."""
        n = max(r.row("softmax"))
        plain, conv = r.row("softmax"), r.row("softmax-conv")
        groups = groupby(plain, key=lambda x: _steps_to_solve(r, "softmax", x))  # consecutive n, the same steps
        each_n = "; ".join(", ".join(f"{x}: {r.cell('softmax', x)}" for x in xs) + f" ({how})" for how, xs in groups)
        ours = (f"softmax by n, {each_n}; softmax-conv {r.cell('softmax-conv', n)} "
                f"({_steps_to_solve(r, 'softmax-conv', n)}) at n = {n}")  # fmt: skip
        if plain[n] > 0.5:
            v = Verdict(ours, FAILS)
        elif not long_budget:
            v = Verdict(ours, INCONCLUSIVE, "a budget of 5,000 steps cannot tell 'cannot' from 'slower'")
        else:
            v = Verdict(ours, PARTLY if max(plain.values()) > 0.5 else HOLDS)
        return checked(v, conv[n] >= 0.99, f"softmax-conv {conv[n]:.3f} at n = {n}")

    return judge


def deltanet_collapses(r: Results) -> Verdict:
    """Holds when DeltaNet's median at the largest n is ≤ 0.1 (the paper: 0.010 at n = 24); does not hold when it is
    ≥ 0.9; partly between. Ours is the standard DeltaNet (β = σ(·), short convolutions); the paper's is another
    layer (a diagonal decay gate, no β: docs/papers.md), so a verdict speaks for the standard one. Positive control:
    under the paper's protocol its softmax and linear-attention rows are reproduced within 0.03; under another, some
    mixer solves every n."""
    row = r.row("deltanet")
    lo, n = min(row), max(row)
    ours = f"{r.cell('deltanet', lo)} at n = {lo} … {r.cell('deltanet', n)} at n = {n}"
    ok, control = _budget(r)
    return checked(Verdict(ours, HOLDS if row[n] <= 0.1 else FAILS if row[n] >= 0.9 else PARTLY), ok, control)


def long_context(r: Results) -> Verdict:
    """Holds when VLA's median is ≥ 0.98 at every length (the paper: 1.000 … 0.982 at T = 512); does not hold
    otherwise. Positive control: VLA solves the shortest length (≥ 0.99 at T = 49), so the mechanism learnt the
    task and a fall with T is the length's."""
    row = r.row("vla")
    ours = ", ".join(f"T {t}: {r.cell('vla', t)}" for t in row)
    first = row[min(row)]
    return checked(Verdict(ours, HOLDS if min(row.values()) >= 0.98 else FAILS), first >= 0.99,
                    f"VLA {first:.3f} at T = {min(row)}")  # fmt: skip


def long_baselines(r: Results) -> Verdict:
    """The paper: softmax and linear attention ≈ 0.15 and DeltaNet ≈ 0.01 at every length. Holds when softmax's and
    linear attention's medians are within 0.05 of 0.15 and DeltaNet's ≤ 0.05 at every length; partly when one of the
    two; does not hold otherwise. Positive control: VLA solves the shortest length (≥ 0.99) in the same run."""
    rows = {m: r.row(m) for m in ("softmax", "linear", "deltanet")}
    near = all(abs(a - 0.15) <= 0.05 for m in ("softmax", "linear") for a in rows[m].values())
    low = all(a <= 0.05 for a in rows["deltanet"].values())
    ours = "; ".join(f"{m} {min(row.values()):.3f} – {max(row.values()):.3f}" for m, row in rows.items())
    first = r.row("vla")[min(rows["deltanet"])]
    return checked(Verdict(ours + " over T", HOLDS if near and low else PARTLY if near or low else FAILS),
                    first >= 0.99, f"VLA {first:.3f} at the shortest T")  # fmt: skip


def overload(r: Results) -> Verdict:
    """Exact recall below the capacity boundary n = d_h and a decline beyond it gentler than linear attention's:
    holds when VLA's median is ≥ 0.99 at every n < d_h and at least linear attention's at every n ≥ d_h; partly when
    one of the two; does not hold when neither. The paper's one number, 0.62 (its VLA's accuracy at n = d_h, its
    head dim not stated), is shown beside ours at n = d_h, not judged: a d_h we cannot match to the paper's run
    would make a miss ours. Positive control: VLA's curve is a capacity curve — it never rises by more than 0.1 from
    one n to the next larger (a rise means a run at the smaller n failed to train)."""
    d_h = int(next(iter(r["paper"]["vla"])))
    vla, linear = r.row("vla"), r.row("linear")
    exact = all(a >= 0.99 for n, a in vla.items() if n < d_h)
    beyond = all(vla[n] >= a for n, a in linear.items() if n >= d_h and n in vla)
    boundary = f"{r.cell('vla', d_h)} (the paper {r['paper']['vla'][str(d_h)]:.3f})" if d_h in vla else "not run"
    ours = f"d_h = {d_h}, at n = d_h VLA {boundary}; VLA " + ", ".join(f"{n}: {a:.3f}" for n, a in vla.items())
    ours += "; linear " + ", ".join(f"{n}: {a:.3f}" for n, a in linear.items() if n >= d_h)
    ns = sorted(vla)
    rise, at = max((vla[b] - vla[a], b) for a, b in pairwise(ns))
    v = Verdict(ours, HOLDS if exact and beyond else PARTLY if exact or beyond else FAILS)
    return checked(v, rise <= 0.1, f"VLA's accuracy rises by {rise:.2f} at n = {at} (a failed training)")


def copies(converged: bool) -> Judge:
    def judge(r: Results) -> Verdict:
        """Holds when every mixer's median copy accuracy is ≥ 0.99 (the paper: all reach 1.0). A mixer below 0.99
        reads 'does not hold' only under a budget it was trained to convergence in (the fair protocol: lr tuned,
        up to 3,000 steps of 256); under the paper's copy budget (1,500 steps of 32 at lr 3e-4, which also leaves
        GDN and KLA short on MQAR) it reads inconclusive. The paper's own 1.0 comes from the authors' identity task
        (each copied token is its own target: docs/papers.md), which does not test copying. Positive control:
        softmax attention copies (≥ 0.99) in the same run."""
        best = {m: r.row(m)[max(r.row(m))] for m in r["table"]}
        ours = ", ".join(f"{m} {a:.3f}" for m, a in best.items())
        short = [m for m, a in best.items() if a < 0.99]
        if not short:
            v = Verdict(ours, HOLDS)
        elif converged:
            v = Verdict(ours, PARTLY if len(short) < len(best) else FAILS)
        else:
            v = Verdict(ours, INCONCLUSIVE, f"{', '.join(short)} below 0.99 within a budget that is not trained to "
                        "convergence; the paper's 1.0 is an identity task's")  # fmt: skip
        return checked(v, best["softmax"] >= 0.99, f"softmax {best['softmax']:.3f}")

    return judge


# --- VLA: state norm, Jacobian, gradient flow ---------------------------------------------------------------------


def _last_layer(r: Results, init: str, mixer: str) -> list[float]:
    """Each seed's last-layer `‖S_T‖_F` of `mixer` under the initialisation `init`, at the paper's T = 1000 (its
    numbers are at that length only; a KeyError, read as not yet measured, where the run read another)."""
    if r["config"]["T"] != paper.VLA_STATE_NORM_T:
        raise KeyError(f"T = {paper.VLA_STATE_NORM_T}")
    return [layers[-1] for layers in r["inits"][init]["final"][mixer]["per_seed"]]


def _norm_text(values: list[float]) -> str:
    text = f"{statistics.median(values):,.4g}"
    return text + (f" [{min(values):,.4g} – {max(values):,.4g}]" if len(values) > 1 else "")


def _separates(r: Results, init: str) -> tuple[bool, str]:
    """The state-norm rules' positive control: linear attention's median norm exceeds 10× DeltaNet's in the same
    models (the measurement tells a growing state from a bounded one)."""
    linear, deltanet = (statistics.median(_last_layer(r, init, m)) for m in ("linear", "deltanet"))
    return linear > 10 * deltanet, f"linear / DeltaNet {linear / deltanet:.3g}×"


def state_norms(init: str) -> Judge:
    def judge(r: Results) -> Verdict:
        """Each mixer's median last-layer norm over seeds: holds when every one is within 25% of the paper's;
        partly when the order (linear > VLA > DeltaNet) is the paper's; does not hold otherwise. Positive control:
        linear attention's norm exceeds 10× DeltaNet's in the same models."""
        ours = {m: statistics.median(_last_layer(r, init, m)) for m in paper.VLA_STATE_NORM}
        close = all(abs(ours[m] / p - 1) <= 0.25 for m, p in paper.VLA_STATE_NORM.items())
        ordered = ours["linear"] > ours["vla"] > ours["deltanet"]
        text = " / ".join(_norm_text(_last_layer(r, init, m)) for m in ("linear", "deltanet", "vla"))
        return checked(Verdict(text, HOLDS if close else PARTLY if ordered else FAILS), *_separates(r, init))

    return judge


def state_norm_ratio(init: str) -> Judge:
    def judge(r: Results) -> Verdict:
        """Linear attention's median norm over VLA's: holds when within 25% of 109×; partly when larger (VLA's
        state even smaller); does not hold when smaller. Positive control: linear attention's norm exceeds 10×
        DeltaNet's in the same models."""
        linear, vla = (statistics.median(_last_layer(r, init, m)) for m in ("linear", "vla"))
        ratio, target = linear / vla, paper.VLA_STATE_NORM_RATIO
        v = HOLDS if abs(ratio / target - 1) <= 0.25 else PARTLY if ratio > target else FAILS
        return checked(Verdict(f"{ratio:.0f}×", v), *_separates(r, init))

    return judge


def vla_below_15(init: str) -> Judge:
    def judge(r: Results) -> Verdict:
        """VLA's last-layer norm at T = 1000, the one length the paper gives it at (its growth beyond is
        Proposition 1's): holds when below 15 in every seed; partly when the median is; does not hold when the median
        is ≥ 15. Positive control: linear attention's norm exceeds 10× DeltaNet's in the same models."""
        seeds = _last_layer(r, init, "vla")
        v = HOLDS if max(seeds) < 15 else PARTLY if statistics.median(seeds) < 15 else FAILS
        ours = f"{_norm_text(seeds)} at T = {r['config']['T']:,}"
        return checked(Verdict(ours, v), *_separates(r, init))

    return judge


def _seed_slopes(r: Results, init: str, mixer: str) -> list[float]:
    """Each seed's log-log slope of the last layer's `‖S_t‖_F` over the last decade of `t`."""
    curve = r["inits"][init]["curve"]
    return [vla_state_norm.log_slope(curve["t"], n) for n in curve["norms"][mixer]]


def plateau(init: str) -> Judge:
    def judge(r: Results) -> Verdict:
        """The median over seeds of the slope of log ‖S_t‖ against log t over the last decade (to 100K tokens):
        holds when below 0.05; does not hold otherwise. Positive control: linear attention's slope in the same
        models is ≥ 0.3 (the measurement sees a growing state)."""
        slopes = _seed_slopes(r, init, "vla")
        slope = statistics.median(slopes)
        curve = r["inits"][init]["curve"]
        last = statistics.median(n[-1] for n in curve["norms"]["vla"])
        ours = (
            f"slope {slope:+.3f} [{min(slopes):+.3f} – {max(slopes):+.3f}], ‖S‖ = {last:.1f} at t = {curve['t'][-1]:,}"
        )
        linear = statistics.median(_seed_slopes(r, init, "linear"))
        return checked(Verdict(ours, HOLDS if slope < 0.05 else FAILS), linear >= 0.3, f"linear's slope {linear:+.2f}")

    return judge


def unit_jacobian(r: Results) -> Verdict:
    """Holds when every layer's median ‖I − α̂k̂ᵀ‖₂ is within 1e-3 of 1, in the untrained models (three seeds) and
    in the MQAR-trained one; does not hold otherwise. A mathematical statement: one counterexample decides, and for
    unit α̂, k̂ with c = α̂ᵀk̂ the norm is ((3 − 2c + √(5 − 4c)) / 2)^½, which is 1 only at α̂ = k̂. Positive control:
    the measured α̂ is the op's (within 1e-5 of a direct float64 solve) and the trained model learnt its task
    (accuracy ≥ 0.99: it was trained to convergence)."""
    models = {"untrained": r["layers"]}
    if r.get("trained"):
        models["trained"] = r["trained"]["layers"]
    parts, medians = [], []
    for name, layers in models.items():
        p50 = [layer["step_norm"]["p50"] for layer in layers]
        top = [layer["step_norm"]["max"] for layer in layers]
        medians += p50
        parts.append(f"{name}: median {' / '.join(f'{m:.3f}' for m in p50)}, max {' / '.join(f'{m:.3f}' for m in top)}")
    ours = "; ".join(parts) + " by layer"
    learnt = (r.get("trained") or {}).get("accuracy", 1.0)
    ok = r["gate_check"] <= 1e-5 and learnt >= 0.99
    v = Verdict(ours, HOLDS if all(abs(m - 1) <= 1e-3 for m in medians) else FAILS)
    return checked(v, ok, f"gate check {r['gate_check']:.1e}, trained accuracy {learnt:.3f}")


def unnormalised_growth(r: Results) -> Verdict:
    """At d_h = 96 and the smallest λ0, the median product over 25 steps: holds within two orders of magnitude of
    1e32; partly when it still explodes (> 1e10); does not hold otherwise. Positive control: the measured direction
    of α is the op's (within 1e-5 of a direct float64 solve)."""
    target = paper.VLA_UNNORMALISED_GROWTH
    runs = [u for u in r["unnormalised"] if u["d_h"] == target["d_h"]]
    if not runs:
        return Verdict(f"no d_h = {target['d_h']} run", INCONCLUSIVE, "the run has no head dim of the paper's")
    run = min(runs, key=lambda u: u["lam0"])
    window = run["first_window"]  # products from the first token: t, and their median over heads at each t
    if target["steps"] not in window["t"]:
        return Verdict(f"no product over {target['steps']} steps", INCONCLUSIVE, "the run is shorter than the paper's")
    product = window["median"][window["t"].index(target["steps"])]
    close = abs(math.log10(product) - math.log10(target["product_norm"])) <= 2
    v = Verdict(f"{product:.1e} at λ0 = {run['lam0']:g}", HOLDS if close else PARTLY if product > 1e10 else FAILS)
    return checked(v, r["gate_check"] <= 1e-5, f"gate check {r['gate_check']:.1e}")


def _grad_slopes(r: Results, mixer: str) -> list[float]:
    """Each seed's slope of log ‖∂L/∂x_0‖ against log T over the last two lengths."""
    return [log_slope(r["T"], g) for g in r["grad_norm"][mixer]]


def gradient_flow(r: Results) -> Verdict:
    """‖∂L/∂x_0‖ of a loss on the last token against T, the median over seeds of each mixer's slope over the last two
    lengths. "No vanishing" is read against linear attention in the same models, whose state Jacobian is the
    identity: its gradient still falls (the readout averages over T tokens), so a fixed slope such as −0.5 would fail
    the reference itself. Holds when VLA's slope is at least linear attention's less 0.1 (it falls no faster than
    through an identity Jacobian); partly when it falls slower than DeltaNet's; does not hold otherwise. Positive
    control: linear attention keeps a slope ≥ −1 (the measurement sees a gradient that reaches the first token)."""
    slope = {m: statistics.median(_grad_slopes(r, m)) for m in ("vla", "deltanet", "linear")}
    T = r["T"]
    ours = ", ".join(f"{m} {s:+.2f}" for m, s in slope.items()) + f" (median slope, T {T[-2]}→{T[-1]})"
    v = HOLDS if slope["vla"] >= slope["linear"] - 0.1 else PARTLY if slope["vla"] > slope["deltanet"] else FAILS
    return checked(Verdict(ours, v), slope["linear"] >= -1, f"linear's slope {slope['linear']:+.2f}")


# --- speed ----------------------------------------------------------------------------------------------------------

GDN, KLA, LINEAR, CCQ_GDN = "GDN (delta_rule)", "KLA (delta_rule)", "linear attention", "CCQ-GDN"
VLA_CHUNKED = ("VLA chunk", "VLA triton")


def _times(r: Results, names: tuple[str, ...], K: int, pass_: str) -> dict[int, float]:
    """`{T: ms}` of the fastest of `names` at head dim `K`, at every T it was timed: the GPU's busy time where
    measured (a host-bound call's wall time is the host's), else the wall time."""
    best: dict[int, float] = {}
    for row in r["rows"]:
        if row["contender"] in names and row["K"] == K and f"{pass_}_ms" in row:
            ms = row.get(f"{pass_}_gpu_ms", row[f"{pass_}_ms"])
            best[row["T"]] = min(best.get(row["T"], math.inf), ms)
    if not best:
        raise KeyError(names[0])
    return best


def _ratio(r: Results, ours: tuple[str, ...], base: tuple[str, ...], K: int, pass_: str) -> tuple[int, float]:
    """`(T, time of ours / time of base)` at the largest T both were timed at head dim `K`: a ratio of two lengths
    would be a ratio of two workloads."""
    common = speedup(_times(r, base, K, pass_), _times(r, ours, K, pass_))  # ours / base at their largest shared T
    if common is None:
        raise KeyError(base[0])
    return common["T"], common["ratio"]


def _timer_control(r: Results) -> tuple[bool, str]:
    """The speed rules' positive control: KLA's and GDN's forward + backward (the same kernels) within 15% of each
    other at the largest T both were timed, at every head dim: the timer tells equal work as equal."""
    ratios = [_ratio(r, (KLA,), (GDN,), K, "fwdbwd")[1] for K in r["config"]["head_dims"]]
    worst = max(ratios, key=lambda x: abs(x - 1))
    return abs(worst - 1) <= 0.15, f"KLA / GDN {worst:.2f}×"


def chunk_speedup(r: Results) -> Verdict:
    """Chunked VLA (its fastest chunked backend) against its token loop (`backend="naive"`, a Python loop over torch
    ops: the paper's "sequential Python") at the largest T both were timed (T = 4096, the paper's longest, in the
    full runs). The paper's kernel was forward-only, so the forward is the measure: holds when it is ≥ 14× at every
    head dim measured; partly when it is at some head dim, or only the forward + backward is; does not hold
    otherwise. The ratio depends on the machine, and the evidence names it. Positive control: KLA's and GDN's
    forward + backward within 15% in the same run."""
    target = paper.VLA_CHUNK_SPEEDUP
    measured = {K: s for K, s in r["speedup"].items() if s["fwd"] is not None}
    if not measured:
        return Verdict("the token loop and chunked VLA share no timed T", INCONCLUSIVE, "nothing to compare")
    forward = ", ".join(f"{s['fwd']['ratio']:.1f}× (K = {K})" for K, s in measured.items())
    both = ", ".join(f"{s['fwdbwd']['ratio']:.1f}×" if s["fwdbwd"] else "—" for s in measured.values())

    def lengths(p: str) -> str:
        return "/".join(f"{T:,}" for T in sorted({s[p]["T"] for s in measured.values() if s[p]}))

    ours = (f"forward {forward} at T = {lengths('fwd')}; forward + backward {both} at T = {lengths('fwdbwd')}; "
            f"{r['device'].upper()}")  # fmt: skip
    fast = [s["fwd"]["ratio"] >= target for s in measured.values()]
    fast_both = [s["fwdbwd"] is not None and s["fwdbwd"]["ratio"] >= target for s in measured.values()]
    v = Verdict(ours, HOLDS if all(fast) else PARTLY if any(fast) or any(fast_both) else FAILS)
    return checked(v, *_timer_control(r))


def softmax_crossover(r: Results) -> Verdict:
    """Forward time (the paper's kernel was forward-only) of VLA's fastest chunked backend against softmax attention
    (SDPA, causal) at the same shape; the crossover is the T from which VLA stays faster, interpolated in log-log
    between measured lengths. Holds when a GPU run puts it within 25% of 43K at some head dim; does not hold when VLA
    is still slower at the largest T of every head dim and that T is beyond 1.25 × 43K; partly otherwise: a
    crossover elsewhere, or any CPU run (a CPU is a different machine from the paper's T4 GPU). Positive control:
    KLA's and GDN's forward + backward within 15% in the same run."""
    target = paper.VLA_SOFTMAX_CROSSOVER_T
    forward = {K: c["fwd"] for K, c in r["crossover"].items()}
    both = ", ".join(crossover_text(c["fwdbwd"]) for c in r["crossover"].values())
    ours = "forward " + ", ".join(f"{crossover_text(c)} (K = {K})" for K, c in forward.items())
    ours += f"; forward + backward {both}; {r['device'].upper()}"
    near = any(c["T"] is not None and abs(c["T"] / target - 1) <= 0.25 for c in forward.values())
    never = all(c["T"] is None and not c["from_start"] and c["T_max"] > 1.25 * target for c in forward.values())
    v = Verdict(ours, HOLDS if r["device"] == "cuda" and near else FAILS if never else PARTLY)
    return checked(v, *_timer_control(r))


def _ratio_to(r: Results, ours: tuple[str, ...], base: str, pass_: str) -> dict[int, tuple[int, float]]:
    """Per head dim: `(T, time of ours / time of base)` at the largest T both were timed."""
    return {K: _ratio(r, ours, (base,), K, pass_) for K in r["config"]["head_dims"]}


def _ratios_text(ratios: dict[int, tuple[int, float]], r: Results) -> str:
    """Each head dim's ratio with the T it was read at, and the device."""
    return ", ".join(f"{x:.2f}× (K = {K}, T = {T:,})" for K, (T, x) in ratios.items()) + f"; {r['device'].upper()}"


def op_overhead(r: Results) -> Verdict:
    """VLA's forward (its fastest chunked backend) over linear attention's at the largest T both were timed, per
    head dim, the GPU's busy time on CUDA: holds when within a factor of 2 of the paper's 5× (2.5× – 10×) at every
    head dim; partly at some; does not hold otherwise. Positive control: KLA's and GDN's forward + backward within
    15% in the same run."""
    ratios = _ratio_to(r, VLA_CHUNKED, LINEAR, "fwd")
    ours = _ratios_text(ratios, r)
    within = [2.5 <= x <= 10 for _, x in ratios.values()]
    return checked(Verdict(ours, HOLDS if all(within) else PARTLY if any(within) else FAILS), *_timer_control(r))


def over_gdn(r: Results) -> Verdict:
    """Shown, never decided: VLA's forward over GDN's at the largest T both were timed (the GPU's busy time on
    CUDA). GDN is not the paper's baseline: it does more than linear attention, so VLA / linear attention is at
    least this. Positive control: KLA's and GDN's forward + backward within 15% in the same run."""
    ratios = _ratio_to(r, VLA_CHUNKED, GDN, "fwd")
    ours = "VLA / GDN " + _ratios_text(ratios, r)
    why = "a different baseline (GDN); VLA / linear attention is at least this"
    return checked(Verdict(ours, INCONCLUSIVE, why), *_timer_control(r))


def ccq_cost(r: Results) -> Verdict:
    """CCQ on GDN over GDN alone at the largest T both were timed, forward + backward (a training step's cost), the
    GPU's busy time on CUDA: holds when ≤ 1.2× at every head dim (a small extra cost); partly when ≤ 2× at every head
    dim (less than a second mixer); does not hold otherwise. Positive control: KLA's and GDN's forward + backward
    within 15% in the same run."""
    ratios = _ratio_to(r, (CCQ_GDN,), GDN, "fwdbwd")
    ours = _ratios_text(ratios, r)
    worst = max(x for _, x in ratios.values())
    return checked(Verdict(ours, HOLDS if worst <= 1.2 else PARTLY if worst <= 2 else FAILS), *_timer_control(r))


# --- KLA ------------------------------------------------------------------------------------------------------------


def kla_extrapolates(r: Results) -> Verdict:
    """At the longest test length (8× the training length), the medians: holds when KLA's accuracy is above both
    GDN's and Mamba-2's, partly when above one of them, does not hold when above neither. Positive control: GDN, the
    paper's main baseline, learns the task at the training length (≥ 0.9)."""
    T, T0 = max(r.row("kla")), min(r.row("kla"))
    kla, gdn, mamba = (r.row(m)[T] for m in ("kla", "gated_deltanet", "mamba2"))
    beaten = (kla > gdn) + (kla > mamba)
    ours = f"KLA {r.cell('kla', T)} / GDN {r.cell('gated_deltanet', T)} / Mamba-2 {r.cell('mamba2', T)} at T = {T:,}"
    learnt = r.row("gated_deltanet")[T0]
    v = Verdict(ours, HOLDS if beaten == 2 else PARTLY if beaten else FAILS)
    return checked(v, learnt >= 0.9, f"GDN {learnt:.3f} at T = {T0}")


def kla_matches_gdn(r: Results) -> Verdict:
    """At the training length, the medians: holds when KLA's and GDN's accuracies are within 0.02 (the paper's:
    0.003 apart); does not hold otherwise. Positive control: one of the two learns the task (≥ 0.9)."""
    T = min(r.row("kla"))
    kla, gdn = r.row("kla")[T], r.row("gated_deltanet")[T]
    ours = f"GDN {r.cell('gated_deltanet', T)} / KLA {r.cell('kla', T)} at T = {T:,}"
    return checked(Verdict(ours, HOLDS if abs(kla - gdn) <= 0.02 else FAILS), max(kla, gdn) >= 0.9,
                    f"GDN {gdn:.3f}, KLA {kla:.3f}")  # fmt: skip


def kla_solves_sniah(r: Results) -> Verdict:
    """Holds when KLA's median is ≥ 0.99 at every length and Mamba-2's ≤ 0.5 at the longest; partly when one of the
    two holds; does not hold when neither. Positive control: GDN learns the task at the training length (≥ 0.9)."""
    kla, gdn = r.row("kla"), r.row("gated_deltanet")
    Ts = sorted(kla)
    mamba = r.row("mamba2")[Ts[-1]]
    holds = (min(kla.values()) >= 0.99) + (mamba <= 0.5)
    ours = (f"KLA {min(kla.values()):.3f} – {max(kla.values()):.3f}, GDN {min(gdn.values()):.3f} – "
            f"{max(gdn.values()):.3f} at {Ts[0] // 1024}K – {Ts[-1] // 1024}K; Mamba-2 {r.cell('mamba2', Ts[-1])} at "
            f"{Ts[-1] // 1024}K")  # fmt: skip
    v = Verdict(ours, HOLDS if holds == 2 else PARTLY if holds else FAILS)
    return checked(v, gdn[Ts[0]] >= 0.9, f"GDN {gdn[Ts[0]]:.3f} at {Ts[0]}")


def raw_keys_collapse(r: Results) -> Verdict:
    """GDN with raw keys and β = σ (the paper's ablation) at the training length: holds when its median is ≤ 0.05
    (the paper: 0.0003); partly when it is at least 0.1 below GDN's with normalised keys; does not hold otherwise.
    Positive control: GDN with normalised keys learns the task in the same protocol (≥ 0.9)."""
    T = min(r.row("kla"))
    raw, gdn = r.row("gated_deltanet-raw_keys")[T], r.row("gated_deltanet")[T]
    ours = (f"raw keys {r.cell('gated_deltanet-raw_keys', T)} (GDN {r.cell('gated_deltanet', T)}, KLA "
            f"{r.cell('kla', T)}) at T = {T:,}")  # fmt: skip
    v = Verdict(ours, HOLDS if raw <= 0.05 else PARTLY if raw <= gdn - 0.1 else FAILS)
    return checked(v, gdn >= 0.9, f"GDN {gdn:.3f}")


def _not_overfit(r: Results, mixers: tuple[str, ...]) -> tuple[bool, str]:
    """The language-modelling rules' positive control: no model read was overfit — each run's last validation loss
    within `OVERFIT` nats of its best (a corpus the models overfit measures memorising, not context)."""
    gaps = {rec["mixer"]: rec["val"]["loss"] - rec["best_val"]["loss"] for rec in r.records if rec["mixer"] in mixers}
    if not gaps:
        return False, "no run records to check"
    m, gap = max(gaps.items(), key=lambda kv: kv[1])
    best = next(rec["best_val"]["loss"] for rec in r.records if rec["mixer"] == m)
    return gap <= OVERFIT, f"{m}'s validation loss rose {gap:.2f} nats from its best ({best:.2f}): an overfit corpus"


def _unit(r: Results) -> str:
    """What a language model's loss is counted in: lm-compare's BPE models a token, the byte LMs a byte."""
    return "nats a token" if r.get("experiment") == "lm-compare" else "nats a byte"


def _kla_loss_against_gdn(at: Callable[[Iterable[int]], int], rule: str) -> Judge:
    """A judge of KLA's median test loss against GDN's at the length `at` picks among those tested (`min`: the
    training length, `max`: the longest); `rule` is its docstring (the rule printed)."""

    def judge(r: Results) -> Verdict:
        T, trained = at(r.row("kla")), min(r.row("kla"))
        gap = r.row("kla")[T] - r.row("gated_deltanet")[T]
        ours = f"KLA {r.cell('kla', T)} vs GDN {r.cell('gated_deltanet', T)} {_unit(r)} at T = {T:,}"
        ours += " (the training length)" if T == trained else f" (trained at {trained:,})"
        v = Verdict(ours, HOLDS if gap <= -LOSS_MARGIN else FAILS if gap >= LOSS_MARGIN else PARTLY)
        return checked(v, *_not_overfit(r, ("kla", "gated_deltanet")))

    judge.__doc__ = rule
    return judge


kla_lower_loss = _kla_loss_against_gdn(
    min,
    """KLA's median test loss against GDN's at the training length (in distribution, as the paper's perplexities):
    holds when lower by at least 0.01 nats a token (1% of perplexity), does not hold when higher by that much, partly
    between. Positive control: neither model overfit its corpus (each run's last validation loss within 0.05 nats
    of its best).""",
)

kla_lm_extrapolation = _kla_loss_against_gdn(
    max,
    """KLA's median test loss against GDN's at the longest test length (8× the training length): holds when lower
    by at least 0.01 nats a token, does not hold when higher by that much, partly between. Positive control: neither
    model overfit its corpus (each run's last validation loss within 0.05 nats of its best).""",
)


def kla_lowest_loss(r: Results) -> Verdict:
    """KLA's median test loss at the training length against each of the paper's baselines the run trained (DeltaNet,
    GLA, Mamba-2; Longhorn is not among our mixers): holds when lower than every one's by at least 0.01 nats a token
    (1% of perplexity) and all three were trained; does not hold when lower than none by that much and higher than
    one by that much; partly otherwise. Positive control: no model compared overfit its corpus (each run's last
    validation loss within 0.05 nats of its best)."""
    kla = r.row("kla")
    T = min(kla)
    names = {"deltanet": "DeltaNet", "gla": "GLA", "mamba2": "Mamba-2"}
    trained = [m for m in names if m in r["table"]]
    if not trained:
        raise KeyError("gla")  # not yet measured: the reading names the run that trains the baselines
    gaps = {m: kla[T] - r.row(m)[T] for m in trained}
    ours = f"KLA {r.cell('kla', T)}; " + ", ".join(f"{names[m]} {r.cell(m, T)}" for m in trained)
    ours += f" {_unit(r)} at T = {T:,} (the training length)"
    if missing := [m for m in names if m not in trained]:
        ours += f"; {', '.join(names[m] for m in missing)} not trained (`--mixers {','.join(missing)}`)"
    below, above = sum(gap <= -LOSS_MARGIN for gap in gaps.values()), sum(gap >= LOSS_MARGIN for gap in gaps.values())
    v = Verdict(ours, HOLDS if below == len(names) else FAILS if not below and above else PARTLY)
    return checked(v, *_not_overfit(r, ("kla", *trained)))


def kla_prefill(r: Results) -> Verdict:
    """One KLA layer's prefill time over one GDN layer's at the longest length measured: holds when within 10% (the
    paper: 0.6% apart at 131K); does not hold otherwise. Positive control: the ratio at the two longest lengths
    agrees within 5% (the timer is steady)."""
    Ts = sorted(int(t) for t in r["prefill_ratio"])
    ratio, before = r["prefill_ratio"][str(Ts[-1])], r["prefill_ratio"][str(Ts[-2] if len(Ts) > 1 else Ts[-1])]
    ours = f"KLA / GDN {ratio:.2f}× at T = {Ts[-1]:,}; {r['device'].upper()}"
    v = Verdict(ours, HOLDS if abs(ratio - 1) <= 0.1 else FAILS)
    return checked(v, abs(ratio / before - 1) <= 0.05, f"{before:.2f}× then {ratio:.2f}×")


HOST_BOUND_MS = 2.0  # a one-token decoding step shorter than this is the host's launch time on a GPU


def decode_against(base: str, target: float) -> Judge:
    def judge(r: Results) -> Verdict:
        """KLA's decoding speed over the base's at the context measured, one layer. The GPU's busy time of a
        recurrent step (one token's state update) decides where measured: holds when ≥ 0.8 × the paper's ratio,
        partly when ≥ 1.2×, does not hold below. A step's wall time under 2 ms is the host's kernel launches, not the
        state update, and the paper's way (running the whole context again for every token, docs/papers.md) times a
        prefill, so without the busy time the rule reads inconclusive. Positive control: KLA's and GDN's prefill
        within 10% at the longest length in the same run (the timer tells equal work as equal)."""
        rows = {d["mixer"]: d for d in r["decode"]}
        mine, theirs = rows["KLA"], rows[base]  # a KeyError names a mixer the run did not time
        wall, rerun = theirs["step_ms"] / mine["step_ms"], theirs["rerun_ms"] / mine["rerun_ms"]
        ours = (f"{wall:.2f}× recurrent ({mine['step_ms']:.2f} vs {theirs['step_ms']:.2f} ms a step), {rerun:.2f}× "
                f"re-running the context, at {r['config']['context']:,}; {r['device'].upper()}")  # fmt: skip
        if "step_gpu_ms" in mine and "step_gpu_ms" in theirs:
            busy = theirs["step_gpu_ms"] / mine["step_gpu_ms"]
            ours += f"; GPU busy time {busy:.2f}×"
            v = Verdict(ours, _speedup_verdict(busy, target))
        elif max(mine["step_ms"], theirs["step_ms"]) < HOST_BOUND_MS and r["device"] == "cuda":
            v = Verdict(ours, INCONCLUSIVE, "a step's wall time is the host's launches, not the state update; the "
                        "GPU's busy time was not measured")  # fmt: skip
        else:
            v = Verdict(ours, _speedup_verdict(wall, target))
        prefill = r["prefill_ratio"][str(max(int(t) for t in r["prefill_ratio"]))]
        return checked(v, abs(prefill - 1) <= 0.1, f"KLA / GDN prefill {prefill:.2f}×")

    return judge


def _speedup_verdict(speedup: float, target: float) -> str:
    """The speed rules' grading: holds at ≥ 0.8 × the paper's speed-up, partly at ≥ 1.2×, does not hold below."""
    return HOLDS if speedup >= 0.8 * target else PARTLY if speedup >= 1.2 else FAILS


def model_decode_against(base: str, target: float) -> Judge:
    def judge(r: Results) -> Verdict:
        """KLA's language model's decoding speed over the `base` one's (lm-throughput: the whole model, one token a
        row at a time after the context, batch 1): holds when ≥ 0.8 × the paper's ratio, partly when ≥ 1.2×, does not
        hold below; the GPU's busy time of a step decides where measured. Without it, a step whose time does not
        grow with the batch (the largest batch's tokens a second at least 0.8 × its rows times batch 1's, for both
        models) is the host's launches, not the state update, and the rule reads inconclusive. Positive control:
        KLA's and GDN's training throughput within 10% at the shortest length (the same work timed as the same)."""
        name = {"GDN": "gated_deltanet", "Mamba-2": "mamba2"}[base]
        decode = {(d["mixer"], d["B"]): d for d in r["decode"]}
        mine, theirs = decode["kla", 1], decode[name, 1]
        ratio = mine["tokens_per_s"] / theirs["tokens_per_s"]
        ours = (f"{ratio:.2f}× ({mine['tokens_per_s']:,.0f} vs {theirs['tokens_per_s']:,.0f} tokens/s at batch 1) "
                f"after {mine['context']:,} tokens; {r['environment'].get('gpu') or 'CPU'}")  # fmt: skip
        if "step_gpu_ms" in mine and "step_gpu_ms" in theirs:
            ratio = theirs["step_gpu_ms"] / mine["step_gpu_ms"]
            ours += f"; GPU busy time {ratio:.2f}× ({mine['step_gpu_ms']:.3f} vs {theirs['step_gpu_ms']:.3f} ms a step)"
        else:
            widest = max(d["B"] for d in r["decode"])
            scaling = {m: decode[m, widest].get("tokens_per_s", 0) / decode[m, 1]["tokens_per_s"]
                       for m in ("kla", name)}  # fmt: skip
            if widest > 1 and min(scaling.values()) >= 0.8 * widest:
                return Verdict(ours, INCONCLUSIVE, f"a step's time did not grow with the batch ({widest} rows: "
                               f"{scaling['kla']:.1f}× and {scaling[name]:.1f}× batch 1's tokens a second): it is "
                               "the host's launches, not the state update; the GPU's busy time was not measured: "
                               "needs `linattn run lm-throughput --device cuda --force`")  # fmt: skip
        v = Verdict(ours, _speedup_verdict(ratio, target))
        T = min(t["T"] for t in r["train"])
        train = {t["mixer"]: t["tokens_per_s"] for t in r["train"] if t["T"] == T}
        same = train["kla"] / train["gated_deltanet"]
        return checked(v, abs(same - 1) <= 0.1, f"KLA / GDN training throughput {same:.2f}× at T = {T:,}")

    return judge


def kaczmarz(r: Results) -> Verdict:
    """Each property's largest relative error over the draws (float64, our op's write): holds when every one is
    ≤ 1e-10; does not hold when one is above 1e-6; partly between. A mathematical statement: float64 arithmetic
    decides it, no seed. Positive control: a step that is not Kaczmarz's (GDN's β = 0.5 on the raw key) fails every
    property by ≥ 1e-3 in the median draw (not every draw: at ‖k‖ = √2, inside the drawn norms, it is Kaczmarz's)."""
    errors = r["errors"]
    worst = {p: errors["kla"][p]["max"] for p in r["properties"]}
    control = min(errors["control"][p]["median"] for p in r["properties"])
    ours = ", ".join(f"{p.replace('_', ' ')} {e:.0e}" for p, e in worst.items()) + " (largest relative errors)"
    top = max(worst.values())
    v = Verdict(ours, HOLDS if top <= 1e-10 else FAILS if top > 1e-6 else PARTLY)
    return checked(v, control >= 1e-3, f"the control's smallest median error {control:.0e}")


def state_tracking(r: Results) -> Verdict:
    """At every test length, the medians: holds when KLA's accuracy is at least the best of GDN's and Mamba-2's less
    0.02 (competitive or better); partly when at least one of them less 0.02; does not hold otherwise. Positive
    control: some mixer learns the task at the training length (≥ 0.9)."""
    rows = {m: r.row(m) for m in ("kla", "gated_deltanet", "mamba2")}
    Ts = sorted(rows["kla"])
    both = all(rows["kla"][T] >= max(rows["gated_deltanet"][T], rows["mamba2"][T]) - 0.02 for T in Ts)
    one = all(rows["kla"][T] >= min(rows["gated_deltanet"][T], rows["mamba2"][T]) - 0.02 for T in Ts)
    ours = "; ".join(f"{m} {', '.join(f'{a:.3f}' for a in row.values())}" for m, row in rows.items()) + f" at {Ts}"
    best = max(row[Ts[0]] for row in rows.values())
    return checked(Verdict(ours, HOLDS if both else PARTLY if one else FAILS), best >= 0.9, f"best {best:.3f}")


# --- CCQ ------------------------------------------------------------------------------------------------------------


def ccq_lifts_sniah(base: str, steps: bool = False) -> Judge:
    def judge(r: Results) -> Verdict:
        """CCQ against its base at 4K (4× the training length), the medians: holds when it adds at least 39 points
        (within 10 of the paper's +49 on GLA); partly when it adds any; does not hold when it adds none. Positive
        control: the base learns the task at the training length (≥ 0.5: a lift needs a base that reads the needle)
        and leaves room for the lift at 4K (≤ 0.61). Under a budget that stops once solved, the steps each took."""
        ccq = f"ccq-{base}"
        plain, lifted = r.row(base), r.row(ccq)
        lift = 100 * (lifted[4096] - plain[4096])
        ours = f"{lift:+.1f} points ({base} {r.cell(base, 4096)}, {ccq} {r.cell(ccq, 4096)}) at T = 4,096"
        if steps:
            T0 = min(plain)
            ours += f"; at T = {T0:,} {base} {_steps_to_solve(r, base, T0)}, {ccq} {_steps_to_solve(r, ccq, T0)}"
        v = Verdict(ours, HOLDS if lift >= 39 else PARTLY if lift > 0 else FAILS)
        learnt, room = plain[min(plain)], plain[4096] <= 0.61
        text = f"{base} {learnt:.3f} at T = {min(plain)}, {plain[4096]:.3f} at 4K"
        text += ": it did not learn the task" if learnt < 0.5 else "" if room else ": no room for a lift of 39 points"
        return checked(v, learnt >= 0.5 and room, text)

    return judge


def ccq_lowers_loss(r: Results) -> Verdict:
    """At every test length beyond the training length, the medians of CCQ-GLA's test loss against GLA's and of
    CCQ-GDN's against GDN's: holds when CCQ's is lower by at least 0.01 nats a token (1% of perplexity) in every such
    pair, partly when in some, does not hold in none. Positive control: no model overfit its corpus (each run's last
    validation loss within 0.05 nats of its best)."""
    pairs = (("gla", "ccq-gla"), ("gated_deltanet", "ccq-gated_deltanet"))
    loss = {m: r.row(m) for pair in pairs for m in pair}
    Ts = sorted(loss["gla"])[1:]
    lower = sum(loss[ccq][T] <= loss[base][T] - LOSS_MARGIN for base, ccq in pairs for T in Ts)
    last = Ts[-1]
    each = "; ".join(f"{c} {r.cell(c, last)} vs {b} {r.cell(b, last)}" for b, c in pairs)
    ours = f"{each} {_unit(r)} at T = {last:,} ({lower} of {2 * len(Ts)} lower by ≥ {LOSS_MARGIN})"
    v = Verdict(ours, HOLDS if lower == 2 * len(Ts) else PARTLY if lower else FAILS)
    return checked(v, *_not_overfit(r, tuple(loss)))


def ccq_lifts_passkey(r: Results) -> Verdict:
    """CCQ-GLA's passkey recall (`exact`, the median over seeds) against GLA's at 4K, on language models trained at
    2K (lm-compare: RULER's passkey in real text, the paper's setting): holds when it adds at least 39 points (within
    10 of the paper's +49 on S-NIAH-1), partly when it adds any, does not hold when it adds none. Positive control:
    some model recalls the key at the training length (≥ 0.5: the recipe can teach the task), and GLA leaves room
    for the lift at 4K (≤ 0.61)."""
    T0 = min(r.row("gla"))
    recall = {m: {int(n.split()[-1]): p["exact"] for n, p in r["probes"][m].items()} for m in r["probes"]}
    lift = 100 * (recall["ccq-gla"][4096] - recall["gla"][4096])
    r.judged("gla", T0), r.judged("ccq-gla", T0)  # the probes are of these runs: the seed rule reads them
    ours = f"{lift:+.1f} points (gla {recall['gla'][4096]:.3f}, ccq-gla {recall['ccq-gla'][4096]:.3f}) at T = 4,096"
    v = Verdict(ours, HOLDS if lift >= 39 else PARTLY if lift > 0 else FAILS)
    best = max(recall, key=lambda m: recall[m].get(T0, 0.0))
    learnt, room = recall[best].get(T0, 0.0), recall["gla"][4096] <= 0.61
    text = f"the best recall at T = {T0:,} is {best}'s {learnt:.3f}"
    text += ": no model learnt the task" if learnt < 0.5 else "" if room else ": GLA leaves no room for 39 points"
    return checked(v, learnt >= 0.5 and room, text)


def ccq_extrapolates(r: Results) -> Verdict:
    """Each CCQ variant against its base at the longest test length (8× the training length), the medians: holds
    when CCQ is higher by at least 0.02 for every base that learns the task, partly for some, does not hold for
    none. Positive control, per base: it learns the task at the training length (≥ 0.5); a base that does not is
    left out, and with none left the rule reads inconclusive."""
    T0 = min(r.row("gated_deltanet"))
    T = max(r.row("gated_deltanet"))
    bases = [m for m in r["table"] if not m.startswith("ccq-") and f"ccq-{m}" in r["table"]]
    learnt = [m for m in bases if r.row(m)[T0] >= 0.5]
    ours = "; ".join(f"ccq-{m} {r.cell(f'ccq-{m}', T)} vs {m} {r.cell(m, T)}" for m in bases) + f" at T = {T:,}"
    better = sum(r.row(f"ccq-{m}")[T] >= r.row(m)[T] + 0.02 for m in learnt)
    v = Verdict(ours, HOLDS if learnt and better == len(learnt) else PARTLY if better else FAILS)
    left_out = ", ".join(m for m in bases if m not in learnt) or "none"
    return checked(v, bool(learnt), f"no base learnt the task (left out: {left_out})")


def transformer_beyond(softmax: str) -> Judge:
    def judge(r: Results) -> Verdict:
        """The paper: a transformer trained at 4K scores 0.000 at 8K, where the CCQ variants keep substantial
        accuracy. At 2× the training length, the medians: holds when softmax attention is ≤ 0.05 and some CCQ
        variant ≥ 0.5; partly when one of the two; does not hold when neither. The longest length tested is shown
        beside. Positive control: softmax attention solves the training length (≥ 0.9), so a failure beyond is the
        length's."""
        soft = r.row(softmax)
        T0, T, longest = min(soft), sorted(soft)[1], max(soft)
        best = max((r.row(m)[T], m) for m in r["table"] if m.startswith("ccq-"))
        ours = (f"{softmax} {r.cell(softmax, T)} at T = {T:,} (trained at {T0:,}), {r.shown(softmax, longest)} at "
                f"{longest:,}; best CCQ {best[1]} {best[0]:.3f} at {T:,}")  # fmt: skip
        v = HOLDS if soft[T] <= 0.05 and best[0] >= 0.5 else PARTLY if soft[T] <= 0.05 or best[0] >= 0.5 else FAILS
        return checked(Verdict(ours, v), soft[T0] >= 0.9, f"{softmax} {soft[T0]:.3f} at T = {T0:,}")

    return judge
