"""KLA paper, efficiency: a KLA layer's prefill and decoding time against a Gated DeltaNet layer's and a Mamba-2
layer's.

The paper's claims: prefill latency "KLA ≈ GDN" (1220 against 1227 ms at 131K tokens, a 0.4B model), "decode 2.1×
GDN at 32K" (3.54 against 1.65 tokens/s) and 1.7× Mamba-2, which came from a benchmark that runs the whole context
again for every generated token (the paper's protocol). With a recurrent state a generated token costs one state update
whatever the context, and KLA's update differs from GDN's only by its step `β = η / (‖k‖² + ε)`. Both measured
directly, on one layer (the whole mixer: projections, short convolutions, gates, the op, the output norm, gate and
projection; the same weights' shapes for both), batch 1, under `torch.no_grad()`:
- prefill: `layer(x)` on `T` tokens (the chunked op: the Triton kernels on CUDA, the chunked PyTorch path on a CPU);
- decode, recurrent: `layer.step(x_t, state)` for one token after a prefill of `context` tokens (on CUDA the fused
  recurrent kernel), the state carried;
- decode, re-run (the paper's benchmark): `layer(x)` on `context + 1` tokens for one new token.
On CUDA the recurrent step's GPU busy time is measured too (every kernel's self time under `torch.profiler`,
`bench.timing.kernel_times`): a step of one layer takes well under the time of its kernel launches, so its wall time
is the host's and the busy time is the state update's.
Timing: `linattn.bench.timing.median_ms` (CUDA: `do_bench`, median; CPU: `Timer.blocked_autorange`), the two layers
side by side (`measure`).

Full runs: CUDA, bfloat16, d_model 1024 in 8 heads of 128 (the paper's 0.4B width), T = 8K, 32K, 128K (131,072),
decode at a 32K context; CPU, float32, d_model 256 in 4 heads, T = 1K, 4K, 16K, decode at 4K. `--quick`: CUDA
T = 8K, 32K, decode at 8K; CPU T = 1K, 4K, decode at 1K.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch

from linattn.bench.timing import kernel_times, median_ms
from linattn.experiments.diagnostic import Diagnostic
from linattn.extras import pyplot
from linattn.io import save_figure
from linattn.layers import build_layer

MIXERS = {"GDN": "gated_deltanet", "KLA": "kla", "Mamba-2": "mamba2"}
GPU_CALLS = 5  # profiled calls of a recurrent step, for its GPU busy time
ROUNDS = 2  # each measurement, both layers in turn, this many times in alternating order
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# the paper's numbers: prefill ms at 131K (KLA, GDN), decoding tokens/s at 32K (KLA, GDN; Mamba-2's from "1.7×")
PAPER = {"prefill_T": 131_072, "prefill_ms": {"KLA": 1220.0, "GDN": 1227.0}, "decode_context": 32_768,
         "decode_tokens_per_s": {"KLA": 3.54, "GDN": 1.65, "Mamba-2": 3.54 / 1.7}}  # fmt: skip


@dataclass(frozen=True)
class KLASpeedConfig:
    Ts: tuple[int, ...]  # prefill lengths, increasing
    context: int  # tokens before the decoded one
    d_model: int = 256
    n_heads: int = 4
    dtype: str = "float32"
    min_run_time: float = 0.5  # CPU: seconds of timed calls per measurement
    seed: int = 0

    def __post_init__(self):
        if not self.Ts or any(not isinstance(t, int) or t < 1 for t in self.Ts) or list(self.Ts) != sorted(self.Ts):
            raise ValueError(f"Ts: expected increasing positive ints, got {self.Ts!r}")
        for name in ("context", "d_model", "n_heads"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {getattr(self, name)!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype: expected one of {list(DTYPES)}, got {self.dtype!r}")


PRESETS = {  # (device, quick) -> config
    ("cpu", False): KLASpeedConfig(Ts=(1024, 4096, 16384), context=4096),
    ("cpu", True): KLASpeedConfig(Ts=(1024, 4096), context=1024, min_run_time=0.2),
    ("cuda", False): KLASpeedConfig(Ts=(8192, 32768, 131072), context=32768, d_model=1024, n_heads=8, dtype="bfloat16"),
    ("cuda", True): KLASpeedConfig(Ts=(8192, 32768), context=8192, d_model=1024, n_heads=8, dtype="bfloat16"),
}


def measure(quick: bool, device: str, config: KLASpeedConfig | None = None) -> dict:
    """Prefill time at every T and one decoded token's time (recurrent and re-run) for every layer, side by side:
    each measurement is taken for the layers in turn, `ROUNDS` times in alternating order, and the lower median
    kept (a CPU's times drift between calls; one layer measured after the other would carry the drift into the
    ratio). On CUDA, the recurrent step's GPU busy time as well."""
    config = config or PRESETS[device, quick]
    dtype = DTYPES[config.dtype]
    gen = torch.Generator(device=device).manual_seed(config.seed)
    layers = {}
    for name, layer_name in MIXERS.items():
        torch.manual_seed(config.seed)  # the same initial weights for both
        layers[name] = build_layer(layer_name, config.d_model, config.n_heads).to(device=device, dtype=dtype).eval()

    def tokens(T: int) -> torch.Tensor:
        return torch.randn(1, T, config.d_model, generator=gen, device=device).to(dtype)

    def side_by_side(call) -> dict[str, float]:
        """`{mixer: ms}` of `call(mixer)()` (under `torch.no_grad()`), the lower of `ROUNDS` alternated medians."""
        best = dict.fromkeys(layers, math.inf)
        for r in range(ROUNDS):
            for name in list(layers)[:: 1 if r % 2 == 0 else -1]:
                with torch.no_grad():
                    best[name] = min(best[name], median_ms(call(name), device, min_run_time=config.min_run_time))
        return best

    prefill = []
    for T in config.Ts:
        x = tokens(T)  # the same input for both
        ms = side_by_side(lambda name: partial(layers[name], x))
        prefill += [{"mixer": name, "T": T, "ms": ms[name]} for name in layers]
        print(f"# kla-speed: prefill T = {T:,}: {ms}", file=sys.stderr, flush=True)  # progress of a minutes-long run
    context = tokens(config.context + 1)
    with torch.no_grad():
        states = {name: layer(context[:, :-1])[1] for name, layer in layers.items()}
    x_t = context[:, -1]
    step = side_by_side(lambda name: partial(layers[name].step, x_t, states[name]))
    rerun = side_by_side(lambda name: partial(layers[name], context))
    decode = [{"mixer": n, "context": config.context, "step_ms": step[n], "rerun_ms": rerun[n]} for n in layers]
    if device == "cuda":
        with torch.no_grad():
            for row in decode:
                call = partial(layers[row["mixer"]].step, x_t, states[row["mixer"]])
                row["step_gpu_ms"] = sum(k["ms"] for k in kernel_times(call, device, GPU_CALLS)[1])
    print(f"# kla-speed: decode {decode}", file=sys.stderr, flush=True)
    by = {(r["mixer"], r["T"]): r["ms"] for r in prefill}
    return {
        "config": asdict(config),
        "device": device,
        "paper": PAPER,
        "prefill": prefill,
        "decode": decode,
        "prefill_ratio": {str(T): by["KLA", T] / by["GDN", T] for T in config.Ts},  # KLA / GDN
        "decode_speedup": {"recurrent": step["GDN"] / step["KLA"], "rerun": rerun["GDN"] / rerun["KLA"]},  # over GDN
    }


def _ms(x: float) -> str:
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


def table(results: dict) -> str:
    """Prefill times per T (and KLA / GDN), then one decoded token's time both ways, every layer the run timed."""
    c, paper = results["config"], results["paper"]
    names = [d["mixer"] for d in results["decode"]]  # the layers the run timed, in order
    by = {(r["mixer"], r["T"]): r["ms"] for r in results["prefill"]}
    lines = [
        f"{results['device'].upper()}, {c['dtype']}, one layer, d_model {c['d_model']} in {c['n_heads']} heads, "
        "batch 1; milliseconds per call (median).",
        "",
        f"## Prefill (the paper: KLA {paper['prefill_ms']['KLA']:g} ms, GDN {paper['prefill_ms']['GDN']:g} ms at "
        f"{paper['prefill_T']:,} tokens, a 0.4B model)",
        "",
        "| T | " + " | ".join(f"{n} (ms)" for n in names) + " | KLA / GDN |",
        "|---:|" + "---:|" * (len(names) + 1),
    ]
    for T in c["Ts"]:
        cells = " | ".join(_ms(by[n, T]) for n in names)
        lines.append(f"| {T:,} | {cells} | {results['prefill_ratio'][str(T)]:.3f}× |")
    tps = paper["decode_tokens_per_s"]
    busy = all("step_gpu_ms" in d for d in results["decode"])
    lines += [
        "",
        f"## One decoded token after {c['context']:,} (the paper: KLA {tps['KLA']:g}, GDN {tps['GDN']:g} tokens/s at "
        f"{paper['decode_context']:,}, {tps['KLA'] / tps['GDN']:.1f}×, running the context again for every token)",
        "",
        "| mixer | recurrent step (ms) | "
        + ("recurrent step, GPU busy (ms) | " if busy else "")
        + "re-run of the context (ms) |",
        "|---|---:|" + ("---:|" if busy else "") + "---:|",
    ]
    for d in results["decode"]:
        gpu = f"{_ms(d['step_gpu_ms'])} | " if busy else ""
        lines.append(f"| {d['mixer']} | {_ms(d['step_ms'])} | {gpu}{_ms(d['rerun_ms'])} |")
    kla = next(d for d in results["decode"] if d["mixer"] == "KLA")
    lines.append("")
    for d in results["decode"]:
        if d["mixer"] != "KLA":
            over = f"KLA's decoding speed over {d['mixer']}'s: {d['step_ms'] / kla['step_ms']:.2f}× recurrent"
            over += f" ({d['step_gpu_ms'] / kla['step_gpu_ms']:.2f}× of the GPU's busy time)" if busy else ""
            lines.append(f"{over}, {d['rerun_ms'] / kla['rerun_ms']:.2f}× re-run.  ")
    return "\n".join(lines).rstrip() + "\n"


def plot(results: dict, path: Path) -> None:
    """Prefill time against T (log-log), and one decoded token's time both ways (log scale), per mixer."""
    plt = pyplot()

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = [d["mixer"] for d in results["decode"]]
    for name in names:
        rows = [r for r in results["prefill"] if r["mixer"] == name]
        left.loglog([r["T"] for r in rows], [r["ms"] for r in rows], marker="o", label=name)
    left.set_xlabel("prefill length T (tokens)")
    left.set_ylabel("prefill time (ms, median)")
    left.set_title("Prefill")
    left.grid(True, which="both", alpha=0.3)
    left.legend()
    width = 0.38
    for i, kind in enumerate(("step_ms", "rerun_ms")):
        heights = [next(r[kind] for r in results["decode"] if r["mixer"] == n) for n in names]
        label = "recurrent step" if kind == "step_ms" else "re-run of the context"
        right.bar([j + (i - 0.5) * width for j in range(len(names))], heights, width, label=label)
    right.set_xticks(range(len(names)), names)
    right.set_yscale("log")
    right.set_ylabel("time for one token (ms, median)")
    right.set_title(f"Decoding one token after {results['config']['context']:,}")
    right.legend()
    env = results["environment"]
    fig.suptitle(
        f"KLA against its baselines, one layer, on {env.get('gpu') or env.get('cpu')} ({results['config']['dtype']})"
    )
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


DIAGNOSTIC = Diagnostic(
    "kla-speed",
    "Prefill time and one decoded token's time (recurrent, and by running the context again) of a KLA layer "
    "against a GDN layer and a Mamba-2 layer",
    measure,
    table,
    plot,
    per_device=True,
)
