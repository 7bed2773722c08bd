"""VLA paper, speed: chunked VLA against its token loop, and against softmax attention, as T grows.

The paper's two claims: "chunked VLA is 14× faster than sequential Python" and "VLA crosses below softmax attention
at ≈ 43K tokens" (extrapolated from T ≤ 4096 on a T4 GPU, with a forward-only kernel). Both are measured directly.

Contenders, each one op call on prepared inputs (no projections, feature maps or norms inside the timed call):
- `VLA chunk`: `vla(q, k, v, u, backend="chunk")` (chunk-parallel gate, then the chunked two-key delta rule);
- `VLA triton`: `vla(..., backend="triton")`, on CUDA only: the gate's Triton kernel, then the two-key delta rule
  on the Triton engine; a contender that cannot run records why;
- `VLA token loop`: `vla(..., backend="naive")`, the token-by-token Sherman–Morrison gate and delta rule in a Python
  loop over torch ops: the paper's "sequential Python". Timed only up to `loop_max_T` tokens;
- `softmax (SDPA)`: `softmax_attention(q, k, v)`, causal `scaled_dot_product_attention` (flash on a GPU);
- `linear attention`: `linear_attention(q, k, v, normalize=True)`, the ratio of recurrences VLA's output is (the
  paper's "≈ 5× the operations of linear attention" is set against it);
- `GDN (delta_rule)`: `delta_rule` in the Gated DeltaNet configuration (unit keys, `β`, `g ≤ 0`), `backend="auto"`
  (the Triton kernels on CUDA, chunk on CPU): the reference line of a linear mixer with fused kernels;
- `KLA (delta_rule)`: the same with raw keys `k` and the Kaczmarz step `β = η / (‖k‖² + ε)`, `ε = 1e-6`, formed
  inside the op (`delta_rule(..., beta=η, kaczmarz_eps=ε)`; the Triton kernels take `‖k‖²` from the key rows they
  load), `η` = GDN's `β`;
- `CCQ-GDN`: `ccq_query(q, k_unit, λ, g, normalize_keys=False)` (the covariance read over GDN's unit keys, which
  need no second normalisation; `λ` = GDN's `β`), then GDN reading with `q'`;
- `GDN fast`, `CCQ-GDN fast`, `VLA fast`: GDN, CCQ-GDN and `VLA triton` at `precision="fast"`, on CUDA only (the
  level changes the Triton kernels).

Inputs, drawn once per (K, T) from a generator seeded with `seed` on the device: `q, k = ELU(x)+1` of standard
normal `x`, `v` standard normal, `u` unit rows / √K (the paper's penalty directions), `k_unit = k / ‖k‖` (GDN),
`β ~ U(0, 1)`, `g ~ −0.1·U(0, 1)`; `[B, T, H, K]` with `V = K` (gates `[B, T, H]`, float32), in `dtype`. Softmax
attention reads the same `q, k, v`. λ0 = 0.1, `scale = K^-½`.

Timing (`linattn.bench.timing`, shared with the op benchmarks): the forward under `torch.no_grad()`, and the forward +
backward of a fixed random cotangent into every input (gradients cleared before each call); on CUDA also the peak
memory of one forward + backward (inputs included, the same for every contender) and, for GDN and the contenders
compared with it, the GPU's busy time per call (every kernel's self time under `torch.profiler`, summed, over
`GPU_CALLS` calls): a short call is bound by the host's launches and Python (on a Hopper GPU up to 8 – 16K tokens at
K = 32), which the wall time counts and the busy time leaves out. CUDA: `triton.testing.do_bench`, median. CPU: one
warm-up call, then the median of `Timer.blocked_autorange` over at least `min_run_time` seconds, on all of torch's
threads (a call slower than that is timed once, after a calibration call).

Derived, per head dim and pass (forward; forward + backward), with VLA's time the fastest of its chunked backends
(`VLA chunk`, `VLA triton`) at each T:
- against GDN: VLA, KLA and CCQ-GDN time (and peak memory) over GDN's at each T, the ratios our speed targets are set
  on, on CUDA of the wall time and of the GPU's busy time; on CUDA also at `precision="fast"` (`GDN fast`,
  `CCQ-GDN fast`, `VLA fast`: the same calls at that level);
- speed-up (claim 1): token loop / chunked VLA at the largest T both were timed (`loop_max_T` in the full runs, the
  paper's longest T = 4096);
- crossover (claim 2): the T from which VLA stays faster than softmax attention. With `r(T) = t_VLA / t_softmax` at
  the measured T and `T_i` the last one with `r ≥ 1`, `log T* = log T_i + log r_i · (log T_{i+1} − log T_i) /
  (log r_i − log r_{i+1})`, i.e. both times interpolated linearly in log-log (exact for power laws). "none up to T"
  (with `r` there) when VLA is slower at the largest T; "from the shortest T" when it is never slower.

Full runs: CPU, float32, B = 1, H = 4, K = V ∈ {32, 128}, T = 256 … 8192 (powers of 2), the loop to T = 4096
(3.5 minutes on 2 idle cores); CUDA, bf16, B = 1, H = 16, K = V ∈ {32, 128}, T = 1K … 64K, the loop to T = 4096
(its forward + backward to 1024).
`--quick`: CPU T = 512, 2048, 8192, the loop to 512 (35 s); CUDA T = 1K, 4K, 16K, the loop to 1024.
On a CPU shared with other work, intra-op threads stall at their barriers whenever another process takes a core
(calls 10–100× slower): time on an idle machine.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict
from functools import partial
from pathlib import Path

import torch

from linattn.bench.contenders import (
    CCQ_GDN,
    CCQ_GDN_FAST,
    CONTENDERS,
    GDN,
    GDN_FAST,
    KLA,
    LINEAR,
    LOOP,
    SOFTMAX,
    VLA_CHUNKED,
    VLA_FAST,
    Contender,
    SpeedConfig,
    inputs,
)
from linattn.bench.timing import forward_backward, kernel_times, median_ms
from linattn.experiments import paper
from linattn.experiments.blocks import FinishedBlocks
from linattn.experiments.diagnostic import Diagnostic
from linattn.extras import pyplot
from linattn.io import save_figure

PASSES = {"fwd": "forward", "fwdbwd": "forward + backward"}


PRESETS = {  # (device, quick) -> config
    ("cpu", False): SpeedConfig(),
    ("cpu", True): SpeedConfig(Ts=(512, 2048, 8192), loop_max_T=512, min_run_time=0.2),
    # on the GPU the loop's forward + backward takes seconds a call (≈ 7 s at T = 4096), and do_bench makes ~8 calls
    ("cuda", False): SpeedConfig(
        Ts=tuple(2**i for i in range(10, 17)), H=16, loop_backward_max_T=1024, dtype="bfloat16"
    ),
    ("cuda", True): SpeedConfig(Ts=(1024, 4096, 16384), H=16, loop_max_T=1024, dtype="bfloat16"),
}


AGAINST_GDN = (KLA, CCQ_GDN)  # and VLA, whose time is its fastest chunked backend's
# CUDA: their GPU busy time too, for the ratios
GPU_TIMED = (GDN, *AGAINST_GDN, LINEAR, "VLA triton", GDN_FAST, CCQ_GDN_FAST, VLA_FAST)
GPU_CALLS = 3  # profiled calls a busy time


def time_contender(contender: Contender, x: dict[str, torch.Tensor], K: int, config: SpeedConfig, device: str) -> dict:
    """`{contender, K, T, fwd_ms, fwdbwd_ms}`, or a `note` saying why it was not timed."""
    T = x["q"].shape[1]
    row = {"contender": contender.name, "K": K, "T": T}
    if contender.loop and T > config.loop_max_T:
        return {**row, "note": f"not timed beyond T = {config.loop_max_T:,}"}
    fn = partial(contender.run, x)
    forward = torch.no_grad()(fn)
    try:
        row["fwd_ms"] = median_ms(forward, device, min_run_time=config.min_run_time)
        if contender.loop and T > config.loop_backward_max_T:
            return {**row, "note": f"forward + backward not timed beyond T = {config.loop_backward_max_T:,}"}
        step = forward_backward(fn, list(x.values()))
        row["fwdbwd_ms"] = median_ms(step, device, min_run_time=config.min_run_time)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            step()
            row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        if device == "cuda" and contender.name in GPU_TIMED:
            for p, call in (("fwd", forward), ("fwdbwd", step)):
                row[f"{p}_gpu_ms"] = sum(k["ms"] for k in kernel_times(call, device, GPU_CALLS)[1])
    except (ValueError, RuntimeError) as e:  # a backend `vla` does not have (yet), or out of memory: say which
        return {**row, "note": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
    return row


def times(rows: list[dict], names: tuple[str, ...], K: int, pass_: str) -> dict[int, float]:
    """`T -> ms` of the fastest of the contenders `names` at each T where one of them was timed."""
    out: dict[int, float] = {}
    for r in rows:
        if r["contender"] in names and r["K"] == K and f"{pass_}_ms" in r:
            out[r["T"]] = min(out.get(r["T"], math.inf), r[f"{pass_}_ms"])
    return out


def speedup(fast: dict[int, float], slow: dict[int, float]) -> dict | None:
    """`slow / fast` at the largest T both were timed: `{T, ratio}`, or None when they share no T."""
    common = set(fast) & set(slow)
    if not common:
        return None
    T = max(common)
    return {"T": T, "ratio": slow[T] / fast[T]}


def crossover(ours: dict[int, float], reference: dict[int, float]) -> dict:
    """The T from which `ours` stays faster than `reference`, interpolated in log-log between the measured T.

    Returns `{T, from_start, T_max, ratio_at_T_max}`: `T` is None when `ours` is still slower at the largest common T
    (`from_start` False) or never slower (`from_start` True); `ratio_at_T_max = ours / reference` there."""
    Ts = sorted(set(ours) & set(reference))
    if not Ts:
        raise ValueError("ours, reference: expected times at one T at least in common")
    r = [ours[T] / reference[T] for T in Ts]
    slower = [i for i, ri in enumerate(r) if ri >= 1]
    found = {"T": None, "from_start": not slower, "T_max": Ts[-1], "ratio_at_T_max": r[-1]}
    if slower and slower[-1] < len(Ts) - 1:
        i = slower[-1]
        a, b = math.log(r[i]), math.log(r[i + 1])
        found["T"] = math.exp(math.log(Ts[i]) + a / (a - b) * (math.log(Ts[i + 1]) - math.log(Ts[i])))
    return found


def crossover_text(c: dict) -> str:
    """`T ≈ 5.3K`, `from the shortest T`, or `none up to T = 8,192 (VLA / softmax 1.4×)`."""
    if c["T"] is not None:
        return f"T ≈ {c['T'] / 1000:.1f}K" if c["T"] >= 1000 else f"T ≈ {c['T']:.0f}"
    if c["from_start"]:
        return "from the shortest T"
    return f"none up to T = {c['T_max']:,} (VLA / softmax {c['ratio_at_T_max']:.2g}×)"


def _block(contenders: list[Contender], K: int, T: int, config: SpeedConfig, device: str) -> list[dict]:
    """Every contender at one head dim and T, on the same inputs."""
    x = inputs(config, T, K, device)
    rows = []
    for c in contenders:
        rows.append(time_contender(c, x, K, config, device))
        print(f"# vla-speed: {rows[-1]}", file=sys.stderr, flush=True)  # progress of a minutes-long run
    del x
    if device == "cuda":
        torch.cuda.empty_cache()
    return rows


def measure(quick: bool, device: str, config: SpeedConfig | None = None, work: Path | None = None) -> dict:
    """Every contender at every head dim and T, then the speed-ups and crossovers; the JSON body of results.json.
    `work`: each (K, T) block's rows are kept there as it ends, and a run cut short resumes from them."""
    config = config or PRESETS[device, quick]
    contenders = [c for c in CONTENDERS if device == "cuda" or not c.cuda_only]
    finished = FinishedBlocks(work, device, {"config": asdict(config), "contenders": [c.name for c in contenders]})
    rows = []
    for K in config.head_dims:
        for T in config.Ts:
            rows += finished.rows(f"K={K} T={T}", partial(_block, contenders, K, T, config, device))
    summary = {"speedup": {}, "crossover": {}}
    for K in config.head_dims:
        for name in summary:
            summary[name][str(K)] = {}
        for p in PASSES:
            chunked = times(rows, VLA_CHUNKED, K, p)
            summary["speedup"][str(K)][p] = speedup(chunked, times(rows, (LOOP,), K, p))
            summary["crossover"][str(K)][p] = crossover(chunked, times(rows, (SOFTMAX,), K, p))
    return {
        "config": asdict(config),
        "device": device,
        "contenders": [c.name for c in contenders],
        "paper": {"speedup": paper.VLA_CHUNK_SPEEDUP, "crossover_T": paper.VLA_SOFTMAX_CROSSOVER_T},
        "rows": rows,
        **({"resumed": finished.resumed} if finished.resumed else {}),
        **summary,
    }


def _ms(x: float) -> str:
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


def table(results: dict) -> str:
    """Times per head dim and pass (one column per contender), then the two claims' numbers."""
    c, rows = results["config"], results["rows"]
    cell = {(r["contender"], r["K"], r["T"]): r for r in rows}
    lines = [
        f"{results['device'].upper()}, {c['dtype']}, B = {c['B']}, H = {c['H']}, V = K; milliseconds per call "
        "(median). VLA's chunked time in the claims below is its fastest chunked backend at each T.",
    ]
    for K in c["head_dims"]:
        for p, label in PASSES.items():
            lines += [
                "",
                f"## {label.capitalize()}, K = V = {K} (ms)",
                "",
                "| T | " + " | ".join(results["contenders"]) + " |",
                "|---:|" + "---:|" * len(results["contenders"]),
            ]
            for T in c["Ts"]:
                cells = []
                for name in results["contenders"]:
                    r = cell[name, K, T]
                    cells.append(_ms(r[f"{p}_ms"]) if f"{p}_ms" in r else r["note"])
                lines.append(f"| {T:,} | " + " | ".join(cells) + " |")
    lines += against_gdn(results)
    target = results["paper"]
    lines += [
        "",
        "## The paper's claims",
        "",
        f"Speed-up: token loop / chunked VLA at the largest T both were timed (paper: {target['speedup']:g}×). "
        f"Crossover: the T from which VLA stays faster than softmax attention, log-log interpolation (paper: "
        f"≈ {target['crossover_T'] / 1000:g}K, extrapolated from T ≤ 4096 on a T4, forward only).",
        "",
        "| K = V | pass | chunked VLA / token loop | VLA below softmax from |",
        "|---:|---|---:|---|",
    ]
    for K in c["head_dims"]:
        for p, label in PASSES.items():
            s = results["speedup"][str(K)][p]
            faster = f"{s['ratio']:.1f}× at T = {s['T']:,}" if s else "not both timed"
            lines.append(f"| {K} | {label} | {faster} | {crossover_text(results['crossover'][str(K)][p])} |")
    return "\n".join(lines) + "\n"


def _fastest(rows: list[dict], names: tuple[str, ...], K: int, T: int) -> dict | None:
    """The row of the fastest (forward + backward) of the contenders `names` at `(K, T)`, or None."""
    timed = [r for r in rows if r["contender"] in names and r["K"] == K and r["T"] == T and "fwdbwd_ms" in r]
    return min(timed, key=lambda r: r["fwdbwd_ms"], default=None)


def against_gdn(results: dict) -> list[str]:
    """Markdown lines: VLA's (fastest chunked backend), KLA's and CCQ-GDN's time and peak memory over GDN's; where
    the fast level was timed (CUDA), VLA's and CCQ-GDN's at it over GDN's at it."""
    lines = [
        "",
        "## Against GDN",
        "",
        "Time over GDN's at the same T: forward / forward + backward; on CUDA the same of the GPU's busy time (the "
        "kernels' time, without the host's: where the wall's ratio is above it, the host's time bounds a call) and "
        "the peak memory of the forward + backward over GDN's; — where one of them was not timed.",
    ]
    lines += _ratio_tables(results, GDN, (("VLA", VLA_CHUNKED), *((name, (name,)) for name in AGAINST_GDN)))
    if any(r["contender"] == GDN_FAST for r in results["rows"]):
        lines += ["", '### At `precision="fast"`', "", "The same over GDN's time at the fast level:"]
        lines += _ratio_tables(results, GDN_FAST, (("VLA", (VLA_FAST,)), ("CCQ-GDN", (CCQ_GDN_FAST,))))
    return lines


def _ratio_tables(results: dict, reference: str, others: tuple[tuple[str, tuple[str, ...]], ...]) -> list[str]:
    """One table a head dim: each of `others` (a column's name, the contenders whose fastest it takes) over
    `reference` at each T."""
    c, rows, lines = results["config"], results["rows"], []
    for K in c["head_dims"]:
        header = f"| T (K = V = {K}) | " + " | ".join(n for n, _ in others) + " |"
        lines += ["", header, "|---:|" + "---:|" * len(others)]
        for T in c["Ts"]:
            ref, cells = _fastest(rows, (reference,), K, T), []
            for _, names in others:
                r = _fastest(rows, names, K, T)
                if r is None or ref is None:
                    cells.append("—")
                    continue
                cell = f"{r['fwd_ms'] / ref['fwd_ms']:.2f}× / {r['fwdbwd_ms'] / ref['fwdbwd_ms']:.2f}×"
                if "fwdbwd_gpu_ms" in r and "fwdbwd_gpu_ms" in ref:
                    gpu = [r[f"{p}_gpu_ms"] / ref[f"{p}_gpu_ms"] for p in PASSES]
                    cell += f" (GPU {gpu[0]:.2f}× / {gpu[1]:.2f}×)"
                if "peak_gib" in r and "peak_gib" in ref:
                    cell += f" · {r['peak_gib'] / ref['peak_gib']:.2f}× memory"
                cells.append(cell)
            lines.append(f"| {T:,} | " + " | ".join(cells) + " |")
    return lines


def plot(results: dict, path: Path) -> None:
    """Log-log time against T: one panel per pass (rows) and head dim (columns), one line per contender, the
    measured crossover (its T in the panel's title) and the paper's 43K as vertical lines; one legend below the
    panels, where it hides no line."""
    plt = pyplot()

    c, rows = results["config"], results["rows"]
    heads = c["head_dims"]
    fig, axes = plt.subplots(len(PASSES), len(heads), figsize=(6 * len(heads), 4.4 * len(PASSES)), squeeze=False)
    for (i, (p, label)), (j, K) in ((a, b) for a in enumerate(PASSES.items()) for b in enumerate(heads)):
        ax = axes[i][j]
        for name in results["contenders"]:
            t = times(rows, (name,), K, p)
            if t:
                ax.loglog(list(t), list(t.values()), marker="o", ms=4, label=name)
        cross = results["crossover"][str(K)][p]
        title = f"{label}, K = V = {K}"
        if cross["T"] is not None:
            ax.axvline(cross["T"], color="k", lw=0.8, label="VLA below softmax from here (measured)")
            title += f": crossover {crossover_text(cross)}"
        ax.axvline(results["paper"]["crossover_T"], color="grey", ls=":", label="paper: ≈ 43K (T4, extrapolated)")
        ax.set_xlabel("sequence length T (tokens)")
        ax.set_ylabel(f"{label} time (ms, median)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    env = results["environment"]
    fig.suptitle(
        f"VLA speed on {env.get('gpu') or env.get('cpu')}: {c['dtype']}, B = {c['B']}, H = {c['H']}, V = K",
    )
    # the legend of the panel with the most entries (every panel has the same contenders' colours)
    handles, labels = max((ax.get_legend_handles_labels() for ax in axes.flat), key=lambda hl: len(hl[1]))
    fig.legend(handles, labels, loc="lower center", ncol=min(5, len(labels)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    save_figure(fig, path)
    plt.close(fig)


DIAGNOSTIC = Diagnostic(
    "vla-speed",
    "Forward and forward + backward time of chunked VLA, its token loop, softmax attention (SDPA) and GDN against "
    "the sequence length: the chunk/loop speed-up and the T where VLA drops below softmax attention",
    measure,
    table,
    plot,
    per_device=True,
    resumable=True,
)
