"""Every claim of the three papers that we test (docs/design.md §6 lists the papers), and how our committed results
answer it.

A claim names the experiment whose results decide it and a `judge` that reads those results and returns our value
and a verdict. Verdicts: `holds`, `partly`, `does not hold`, `not reproducible at our scale` (a claim at a model or
data scale we do not train), or `not yet measured` (its experiment has no committed result yet). Each judge's rule
is in its docstring; the thresholds are ours and are printed with the report, so a reader can disagree with them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from linattn.experiments import paper
from linattn.experiments.vla_speed import crossover_text

HOLDS, PARTLY, FAILS = "holds", "partly", "does not hold"
NOT_AT_SCALE, NOT_YET = "not reproducible at our scale", "not yet measured"


@dataclass(frozen=True)
class Verdict:
    ours: str  # our measurement, as shown in the report
    verdict: str  # HOLDS, PARTLY or FAILS


@dataclass(frozen=True)
class Claim:
    paper: str  # "VLA", "KLA" or "CCQ"
    claim: str
    source: str  # where the paper says it
    paper_value: str
    results: str | None  # results folder under results/ that decides it (None: out of reach at our scale)
    judge: Callable[[dict], Verdict] | None = None  # results.json -> verdict; None: its experiment does not exist yet

    def evaluate(self, root: Path) -> tuple[str, str]:
        """`(ours, verdict)` from the committed results under `root`."""
        if self.results is None:
            return "—", NOT_AT_SCALE
        path = root / self.results / "results.json"
        if self.judge is None or not path.exists():
            return "—", NOT_YET
        results = json.loads(path.read_text())
        try:
            v = self.judge(results)
        except KeyError as missing:  # a run of a subset (`--mixers`): the row the claim needs was not measured
            return f"— (no {missing.args[0]!r} in {self.results})", NOT_YET
        seeds = results.get("seeds", 1)
        return v.ours + (f" (means of {seeds} seeds)" if seeds > 1 else ""), v.verdict


def _row(results: dict, mixer: str) -> dict[int, float]:
    return {int(x): a for x, a in results["table"][mixer].items()}


def _mqar_row(mixer: str) -> str:
    return ", ".join(f"{n}: {a:.3f}" for n, a in sorted(paper.VLA_MQAR_CAPACITY[mixer].items()))


def _vla_solves(results: dict) -> Verdict:
    """Holds when VLA's accuracy is ≥ 0.99 at every n (the paper: 1.000)."""
    row = _row(results, "vla")
    return Verdict(f"{min(row.values()):.3f} – {max(row.values()):.3f}", HOLDS if min(row.values()) >= 0.99 else FAILS)


def _baseline_matches(mixer: str) -> Callable[[dict], Verdict]:
    def judge(results: dict) -> Verdict:
        """Holds when ours is within 0.03 of the paper's accuracy at every n both report."""
        row = _row(results, mixer)
        worst = max(abs(row[n] - p) for n, p in paper.VLA_MQAR_CAPACITY[mixer].items() if n in row)
        ours = ", ".join(f"{n}: {a:.3f}" for n, a in sorted(row.items()))
        return Verdict(ours, HOLDS if worst <= 0.03 else FAILS)

    return judge


def _softmax_cannot(results: dict) -> Verdict:
    """The paper reads softmax's row as attention failing MQAR. Under the fair protocol (batch 256, ≤ 5000 steps,
    lr swept): holds when no softmax variant of the same TinyLM (plain, or with a short convolution before it)
    exceeds 0.5 at the largest n."""
    n = max(int(x) for x in results["table"]["softmax"])
    best = {m: results["table"][m][str(n)] for m in ("softmax", "softmax-conv") if m in results["table"]}
    ours = ", ".join(f"{m} {a:.3f}" for m, a in best.items()) + f" at n = {n} (fair protocol)"
    return Verdict(ours, HOLDS if max(best.values()) <= 0.5 else FAILS)


def _deltanet_collapses(results: dict) -> Verdict:
    """Holds when DeltaNet's accuracy at the largest n is ≤ 0.1 (the paper: 0.010 at n = 24)."""
    row = _row(results, "deltanet")
    n = max(row)
    return Verdict(
        f"{row[min(row)]:.3f} at n = {min(row)} … {row[n]:.3f} at n = {n}", HOLDS if row[n] <= 0.1 else FAILS
    )


def _state_norms(results: dict) -> Verdict:
    """Holds when every mixer's last-layer norm is within 25% of the paper's; partly when the order
    (linear > VLA > DeltaNet) is the paper's."""
    ours = {m: results["final"][m]["last_layer"]["mean"] for m in paper.VLA_STATE_NORM}
    close = all(abs(ours[m] / p - 1) <= 0.25 for m, p in paper.VLA_STATE_NORM.items())
    ordered = ours["linear"] > ours["vla"] > ours["deltanet"]
    text = " / ".join(f"{ours[m]:,.4g}" for m in ("linear", "deltanet", "vla"))
    return Verdict(text, HOLDS if close else PARTLY if ordered else FAILS)


def _state_norm_ratio(results: dict) -> Verdict:
    """Holds when linear / VLA is within 25% of 109×; partly when it is larger (VLA's state even smaller)."""
    r = results["ratio_linear_over_vla"]
    close = abs(r / paper.VLA_STATE_NORM_RATIO - 1) <= 0.25
    return Verdict(f"{r:.0f}×", HOLDS if close else PARTLY if r > paper.VLA_STATE_NORM_RATIO else FAILS)


def _vla_below_15(results: dict) -> Verdict:
    """Holds when VLA's last-layer norm at T = 1000 is below 15 in every seed."""
    worst = results["final"]["vla"]["last_layer"]["max"]
    return Verdict(
        f"{results['final']['vla']['last_layer']['mean']:.1f} (max {worst:.1f})", HOLDS if worst < 15 else FAILS
    )


def _plateau(results: dict) -> Verdict:
    """Holds when the slope of log ‖S_t‖ against log t over the last decade (to 100K tokens) is below 0.05."""
    slope = results["curve"]["slope_last_decade"]["vla"]
    last = results["curve"]["mean"]["vla"][-1]
    t = results["curve"]["t"][-1]
    return Verdict(f"slope {slope:+.3f}, ‖S‖ = {last:.1f} at t = {t:,}", HOLDS if slope < 0.05 else FAILS)


def _unit_jacobian(results: dict) -> Verdict:
    """Holds when every layer's median ‖I − α̂k̂ᵀ‖₂ is within 1e-3 of 1, in the untrained models and (when
    measured) in the MQAR-trained one."""
    models = {"untrained": results["layers"]}
    if results.get("trained"):
        models["trained"] = results["trained"]["layers"]
    parts, medians = [], []
    for name, layers in models.items():
        p50 = [layer["step_norm"]["p50"] for layer in layers]
        top = [layer["step_norm"]["max"] for layer in layers]
        medians += p50
        parts.append(f"{name}: median {' / '.join(f'{m:.3f}' for m in p50)}, max {' / '.join(f'{m:.3f}' for m in top)}")
    ours = "; ".join(parts) + " by layer"
    return Verdict(ours, HOLDS if all(abs(m - 1) <= 1e-3 for m in medians) else FAILS)


def _unnormalised_growth(results: dict) -> Verdict:
    """At d_h = 96 and the smallest λ0, the median product over 25 steps: holds within two orders of magnitude of
    1e32; partly when it still explodes (> 1e10)."""
    target = paper.VLA_UNNORMALISED_GROWTH
    runs = [u for u in results["unnormalised"] if u["d_h"] == target["d_h"]]
    if not runs:
        return Verdict(f"no d_h = {target['d_h']} run", FAILS)
    run = min(runs, key=lambda u: u["lam0"])
    window = run["first_window"]  # products from the first token: t, and their median over heads at each t
    if target["steps"] not in window["t"]:
        return Verdict(f"no product over {target['steps']} steps", FAILS)
    product = window["median"][window["t"].index(target["steps"])]
    close = abs(math.log10(product) - math.log10(target["product_norm"])) <= 2
    ours = f"{product:.1e} at λ0 = {run['lam0']:g}"
    return Verdict(ours, HOLDS if close else PARTLY if product > 1e10 else FAILS)


def _gradient_flow(results: dict) -> Verdict:
    """‖∂L/∂x_0‖ of a loss on the last token against T: holds when VLA's gradient falls no faster than 1/√T over
    the last two lengths (slope ≥ −0.5); partly when it falls slower than DeltaNet's."""
    slope = results["slope_last_two"]
    T = results["T"]
    ours = ", ".join(f"{m} {slope[m]:+.2f}" for m in ("vla", "deltanet", "linear")) + f" (slope, T {T[-2]}→{T[-1]})"
    return Verdict(ours, HOLDS if slope["vla"] >= -0.5 else PARTLY if slope["vla"] > slope["deltanet"] else FAILS)


def _overload(results: dict) -> Verdict:
    """With the boundary n = d_h (the paper's 62% point): holds when VLA is ≥ 0.99 at every n < d_h and at least
    linear attention's accuracy at every n ≥ d_h; partly when one of the two holds (or linear was not run)."""
    d_h = int(next(iter(results["paper"]["vla"])))
    vla = _row(results, "vla")
    exact = all(a >= 0.99 for n, a in vla.items() if n < d_h)
    beyond = "linear" in results["table"] and all(
        vla[n] >= a for n, a in _row(results, "linear").items() if n >= d_h and n in vla
    )
    ours = f"d_h = {d_h}: VLA " + ", ".join(f"{n}: {a:.2f}" for n, a in sorted(vla.items()))
    if "linear" in results["table"]:
        ours += "; linear " + ", ".join(f"{n}: {a:.2f}" for n, a in sorted(_row(results, "linear").items()) if n >= d_h)
    else:
        ours += "; linear not run"
    return Verdict(ours, HOLDS if exact and beyond else PARTLY if exact or beyond else FAILS)


def _long_context(results: dict) -> Verdict:
    """Holds when VLA's accuracy is ≥ 0.98 at every length (the paper: 1.000 … 0.982 at T = 512)."""
    row = _row(results, "vla")
    return Verdict(
        ", ".join(f"T {t}: {a:.3f}" for t, a in sorted(row.items())), HOLDS if min(row.values()) >= 0.98 else FAILS
    )


def _copies(results: dict) -> Verdict:
    """Holds when every mixer's copy accuracy is ≥ 0.99 (the paper: all reach 1.0)."""
    best = {m: max(row.values()) for m, row in results["table"].items()}
    ours = ", ".join(f"{m} {a:.3f}" for m, a in best.items())
    return Verdict(ours, HOLDS if min(best.values()) >= 0.99 else PARTLY if max(best.values()) >= 0.99 else FAILS)


def _chunk_speedup(results: dict) -> Verdict:
    """Chunked VLA (its fastest chunked backend) against its token loop (`backend="naive"`, a Python loop over torch
    ops: the paper's "sequential Python") at the largest T both were timed (T = 4096, the paper's longest, in the
    full runs). The paper's kernel was forward-only, so the forward is the measure: holds when it is ≥ 14× at every
    head dim measured; partly when it is at some head dim, or only the forward + backward is; does not hold
    otherwise. The ratio depends on the machine (on a GPU the loop pays kernel launches at every token; a CPU run
    measures a different machine from the paper's T4), and the evidence names it."""
    target = paper.VLA_CHUNK_SPEEDUP
    measured = {K: s for K, s in results["speedup"].items() if s["fwd"] is not None}
    if not measured:
        return Verdict("the token loop and chunked VLA share no timed T", FAILS)
    forward = ", ".join(f"{s['fwd']['ratio']:.1f}× (K = {K})" for K, s in measured.items())
    both = ", ".join(f"{s['fwdbwd']['ratio']:.1f}×" if s["fwdbwd"] else "—" for s in measured.values())

    def lengths(p: str) -> str:
        return "/".join(f"{T:,}" for T in sorted({s[p]["T"] for s in measured.values() if s[p]}))

    ours = (f"forward {forward} at T = {lengths('fwd')}; forward + backward {both} at T = {lengths('fwdbwd')}; "
            f"{results['device'].upper()}")  # fmt: skip
    fast = [s["fwd"]["ratio"] >= target for s in measured.values()]
    fast_both = [s["fwdbwd"] is not None and s["fwdbwd"]["ratio"] >= target for s in measured.values()]
    return Verdict(ours, HOLDS if all(fast) else PARTLY if any(fast) or any(fast_both) else FAILS)


def _softmax_crossover(results: dict) -> Verdict:
    """Forward time (the paper's kernel was forward-only) of VLA's fastest chunked backend against softmax attention
    (SDPA, causal) at the same shape; the crossover is the T from which VLA stays faster, interpolated in log-log
    between measured lengths. Holds when a GPU run puts it within 25% of 43K at some head dim; does not hold when VLA
    is still slower at the largest T of every head dim and that T is beyond 1.25 × 43K; partly otherwise: a crossover
    elsewhere, or any CPU run (a CPU is a different machine from the paper's T4 GPU: its crossover shows that VLA
    overtakes softmax attention there, not where it does on a GPU)."""
    target = paper.VLA_SOFTMAX_CROSSOVER_T
    forward = {K: c["fwd"] for K, c in results["crossover"].items()}
    both = ", ".join(crossover_text(c["fwdbwd"]) for c in results["crossover"].values())
    ours = "forward " + ", ".join(f"{crossover_text(c)} (K = {K})" for K, c in forward.items())
    ours += f"; forward + backward {both}; {results['device'].upper()}"
    near = any(c["T"] is not None and abs(c["T"] / target - 1) <= 0.25 for c in forward.values())
    never = all(c["T"] is None and not c["from_start"] and c["T_max"] > 1.25 * target for c in forward.values())
    return Verdict(ours, HOLDS if results["device"] == "cuda" and near else FAILS if never else PARTLY)


CAPACITY = "vla-mqar-capacity/paper"
VLA_CLAIMS = (
    Claim("VLA", "VLA recalls every pair on MQAR up to n = 24", "Table (MQAR capacity)", "1.000 at every n",
          CAPACITY, _vla_solves),
    Claim("VLA", "softmax attention fails MQAR (the paper's budget)", "Table (MQAR capacity)", _mqar_row("softmax"),
          CAPACITY, _baseline_matches("softmax")),
    Claim("VLA", "softmax fails because attention cannot do it in this model", "Table (MQAR capacity), its reading",
          "0.074 at n = 24", "vla-mqar-capacity/fair", _softmax_cannot),
    Claim("VLA", "linear attention fails MQAR (the paper's budget)", "Table (MQAR capacity)", _mqar_row("linear"),
          CAPACITY, _baseline_matches("linear")),
    Claim("VLA", "DeltaNet collapses as n grows", "Table (MQAR capacity)", _mqar_row("deltanet"), CAPACITY,
          _deltanet_collapses),
    Claim("VLA", "VLA keeps recall at long context (n = 8, T to 512)", "MQAR long context", "1.000 … 0.982 at 512",
          "vla-mqar-length/paper", _long_context),
    Claim("VLA", "the same, filler after the queries (the paper's placement: queries as near their keys as at T = 25)",
          "MQAR long context", "1.000 … 0.982 at 512", "vla-mqar-length-after/paper", _long_context),
    Claim("VLA", "exact recall while n < d_h, graceful degradation beyond, better than linear attention",
          "capacity and overload", "62% at n = d_h", "vla-mqar-overload-dh16/paper", _overload),
    Claim("VLA", "the same at d_h = 32", "capacity and overload", "62% at n = d_h", "vla-mqar-overload/paper",
          _overload),
    Claim("VLA", "every mixer copies 31 tokens", "Copy", "1.0 for all", "vla-copy/paper", _copies),
    Claim("VLA", "untrained last-layer ‖S_T‖_F at T = 1000: linear / DeltaNet / VLA", "state norm",
          "1634 / 1.2 / 14.5", "vla-state-norm/default", _state_norms),
    Claim("VLA", "VLA's state is 109× smaller than linear attention's", "state norm", "109×",
          "vla-state-norm/default", _state_norm_ratio),
    Claim("VLA", "VLA's state norm stays below 15", "state norm", "< 15", "vla-state-norm/default", _vla_below_15),
    Claim("VLA", "Proposition 1: VLA's state norm converges to a plateau", "Proposition 1", "plateau",
          "vla-state-norm/default", _plateau),
    Claim("VLA", "Proposition 2: ‖I − α̂_t k̂_tᵀ‖₂ = 1", "Proposition 2", "exactly 1", "vla-jacobian/default",
          _unit_jacobian),
    Claim("VLA", "without normalising α the Jacobian products explode", "Jacobian",
          "~1e32 after 25 steps at d_h = 96", "vla-jacobian/default", _unnormalised_growth),
    Claim("VLA", "with ‖J_t‖ = 1, gradients reach early tokens over long sequences", "Proposition 2, its reading",
          "no vanishing", "vla-gradient-flow/default", _gradient_flow),
    Claim("VLA", "chunked VLA is 14× faster than sequential Python", "speed", "14×", "vla-speed/default-cuda",
          _chunk_speedup),
    Claim("VLA", "VLA crosses below softmax attention at ≈ 43K tokens", "speed (extrapolated, T4)", "≈ 43K",
          "vla-speed/default-cuda", _softmax_crossover),
)  # fmt: skip


def _kla_extrapolates(results: dict) -> Verdict:
    """At the longest test length (8× the training length): holds when KLA's accuracy is above both GDN's and
    Mamba-2's, partly when above one of them."""
    rows = [_row(results, m) for m in ("kla", "gated_deltanet", "mamba2")]
    T = max(rows[0])
    kla, gdn, mamba = (row[T] for row in rows)
    beaten = (kla > gdn) + (kla > mamba)
    return Verdict(f"KLA {kla:.3f} / GDN {gdn:.3f} / Mamba-2 {mamba:.3f} at T = {T:,}",
                   HOLDS if beaten == 2 else PARTLY if beaten else FAILS)  # fmt: skip


def _kla_matches_gdn(results: dict) -> Verdict:
    """At the training length: holds when KLA's and GDN's accuracies are within 0.02 (the paper's: 0.003 apart)."""
    kla_row, gdn_row = _row(results, "kla"), _row(results, "gated_deltanet")
    T = min(kla_row)
    kla, gdn = kla_row[T], gdn_row[T]
    return Verdict(f"GDN {gdn:.3f} / KLA {kla:.3f} at T = {T:,}", HOLDS if abs(kla - gdn) <= 0.02 else FAILS)


def _kla_solves_sniah(results: dict) -> Verdict:
    """Holds when KLA's accuracy is ≥ 0.99 at every length and Mamba-2's ≤ 0.5 at the longest; partly when one of the
    two holds."""
    kla_row, gdn_row = _row(results, "kla"), _row(results, "gated_deltanet")
    Ts = sorted(kla_row)
    kla, gdn = [kla_row[T] for T in Ts], [gdn_row[T] for T in Ts]
    mamba = _row(results, "mamba2")[Ts[-1]]
    holds = (min(kla) >= 0.99) + (mamba <= 0.5)
    ours = (f"KLA {min(kla):.3f} – {max(kla):.3f}, GDN {min(gdn):.3f} – {max(gdn):.3f} at {Ts[0] // 1024}K – "
            f"{Ts[-1] // 1024}K; Mamba-2 {mamba:.3f} at {Ts[-1] // 1024}K")  # fmt: skip
    return Verdict(ours, HOLDS if holds == 2 else PARTLY if holds else FAILS)


def _raw_keys_collapse(results: dict) -> Verdict:
    """GDN with raw keys and β = σ (the paper's ablation) at the training length: holds when its accuracy is ≤ 0.05
    (the paper: 0.0003); partly when it is at least 0.1 below GDN's with normalised keys."""
    rows = [_row(results, m) for m in ("gated_deltanet-raw_keys", "gated_deltanet", "kla")]
    T = min(rows[2])
    raw, gdn, kla = (row[T] for row in rows)
    ours = f"raw keys {raw:.3f} (GDN {gdn:.3f}, KLA {kla:.3f}) at T = {T:,}"
    return Verdict(ours, HOLDS if raw <= 0.05 else PARTLY if raw <= gdn - 0.1 else FAILS)


def _kla_prefill(results: dict) -> Verdict:
    """One KLA layer's prefill time over one GDN layer's at the longest length measured: holds when within 10% (the
    paper: 0.6% apart at 131K)."""
    T = max(int(t) for t in results["prefill_ratio"])
    r = results["prefill_ratio"][str(T)]
    return Verdict(
        f"KLA / GDN {r:.2f}× at T = {T:,}; {results['device'].upper()}", HOLDS if abs(r - 1) <= 0.1 else FAILS
    )


def _kla_lower_loss(results: dict) -> Verdict:
    """KLA's test loss against GDN's at the training length (in distribution, as the paper's perplexities): holds
    when lower by at least 0.01 nats a byte (1% of perplexity), does not hold when higher by that much, partly
    between (no difference at this scale)."""
    loss = {m: _row(results, m) for m in ("kla", "gated_deltanet")}
    T = min(loss["kla"])
    gap = loss["kla"][T] - loss["gated_deltanet"][T]
    ours = f"KLA {loss['kla'][T]:.3f} vs GDN {loss['gated_deltanet'][T]:.3f} nats a byte at T = {T:,} (byte LM)"
    return Verdict(ours, HOLDS if gap <= -LOSS_MARGIN else FAILS if gap >= LOSS_MARGIN else PARTLY)


def _kla_decode(results: dict) -> Verdict:
    """KLA's decoding speed over GDN's with the recurrent state (one step per token) at the context measured: holds
    when ≥ 1.7× (within 20% of the paper's 2.1×), partly when ≥ 1.2×."""
    s = results["decode_speedup"]
    ours = (f"{s['recurrent']:.2f}× recurrent, {s['rerun']:.2f}× re-running the context, at "
            f"{results['config']['context']:,}; {results['device'].upper()}")  # fmt: skip
    return Verdict(ours, HOLDS if s["recurrent"] >= 1.7 else PARTLY if s["recurrent"] >= 1.2 else FAILS)


KLA_CLAIMS = (
    Claim("KLA", "KLA extrapolates best on MQAR at 8× the training length", "MQAR, T = 2048",
          "KLA 73.84 / GDN 66.81 / Mamba-2 64.29", "kla-mqar/paper", _kla_extrapolates),
    Claim("KLA", "in distribution KLA ≈ GDN on MQAR", "MQAR, T = 256", "GDN 98.72 / KLA 98.39", "kla-mqar/paper",
          _kla_matches_gdn),
    Claim("KLA", "KLA solves S-NIAH at every length; Mamba-2 does not", "S-NIAH proxy, 1K–8K",
          "KLA 100 / GDN ≈ 98.5 / Mamba-2 ≈ 0", "kla-sniah/paper", _kla_solves_sniah),
    Claim("KLA", "without key normalisation MQAR collapses", "ablation", "0.03%", "kla-ablation/paper",
          _raw_keys_collapse),
    Claim("KLA", "KLA's perplexity beats GDN's at 0.4B / 1B tokens", "language modelling", "8.09 vs 8.50", None),
    Claim("KLA", "the same at our scale: a 4-layer byte-level LM (the analogue of the paper's language model)",
          "language modelling", "8.09 vs 8.50 (0.4B)", "kla-lm/paper", _kla_lower_loss),
    Claim("KLA", "prefill latency KLA ≈ GDN", "efficiency, 131K", "1220 vs 1227 ms", "kla-speed/default-cuda",
          _kla_prefill),
    Claim("KLA", "decode 2.1× GDN at 32K", "efficiency", "2.1×", "kla-speed/default-cuda", _kla_decode),
)  # fmt: skip


def _ccq_lifts_sniah(results: dict) -> Verdict:
    """CCQ on GLA against GLA at 4K (4× the training length): holds when it adds at least 39 points (within 10 of the
    paper's +49), partly when it adds any. The same pair with a short convolution, where run, is shown, not judged."""
    gla, ccq = _row(results, "gla")[4096], _row(results, "ccq-gla")[4096]
    lift = 100 * (ccq - gla)
    ours = f"{lift:+.1f} points (GLA {gla:.3f}, CCQ-GLA {ccq:.3f}) at T = 4,096"
    if {"gla-conv", "ccq-gla-conv"} <= results["table"].keys():  # shown, not judged: fla's GLA has no conv by default
        conv, ccq_conv = _row(results, "gla-conv")[4096], _row(results, "ccq-gla-conv")[4096]
        ours += f"; with a short convolution {100 * (ccq_conv - conv):+.1f} ({conv:.3f}, {ccq_conv:.3f})"
    return Verdict(ours, HOLDS if lift >= 39 else PARTLY if lift > 0 else FAILS)


LOSS_MARGIN = 0.01  # nats a byte (1% of perplexity): a smaller difference from one seed is not read as lower


def _ccq_lowers_loss(results: dict) -> Verdict:
    """At every test length beyond the training length, CCQ-GLA's test loss against GLA's and CCQ-GDN's against
    GDN's: holds when CCQ's is lower by at least 0.01 nats a byte (1% of perplexity) in every such pair, partly when
    in some."""
    loss = {m: _row(results, m) for m in ("gla", "ccq-gla", "gated_deltanet", "ccq-gated_deltanet")}
    Ts = sorted(loss["gla"])[1:]
    pairs = (("gla", "ccq-gla"), ("gated_deltanet", "ccq-gated_deltanet"))
    lower = sum(loss[ccq][T] <= loss[base][T] - LOSS_MARGIN for base, ccq in pairs for T in Ts)
    last = Ts[-1]
    each = "; ".join(f"{c} {loss[c][last]:.3f} vs {b} {loss[b][last]:.3f}" for b, c in pairs)
    ours = f"{each} nats a byte at T = {last:,} ({lower} of {2 * len(Ts)} lower by ≥ {LOSS_MARGIN})"
    return Verdict(ours, HOLDS if lower == 2 * len(Ts) else PARTLY if lower else FAILS)


CCQ_CLAIMS = (
    Claim("CCQ", "CCQ-GLA improves perplexity and downstream scores at 500M / 1.3B", "headline results",
          "WikiText 16.92, LAMBADA 47.82%, LongBench 15.77", None),
    Claim("CCQ", "CCQ lifts S-NIAH-1 at 4K by 49 points over GLA", "headline results", "+49.0 points",
          "ccq-sniah/paper", _ccq_lifts_sniah),
    Claim("CCQ", "CCQ lowers perplexity from 4K to 20K context", "headline results", "lower PPL, 4K–20K",
          "ccq-lm-length/paper", _ccq_lowers_loss),
)  # fmt: skip

CLAIMS = VLA_CLAIMS + KLA_CLAIMS + CCQ_CLAIMS
