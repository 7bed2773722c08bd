"""Where one contender's time and memory go: its kernels by device time, and what is alive at its memory peak.

The contenders and inputs are `vla-speed`'s (bf16 on CUDA, float32 on CPU; `B = 1`, `H = 16`, `K = V`), so a row here
explains a cell there, or on CUDA `bench ops`' (its GLA and fla's, say, at `B = 1`), so one there. Time:
`torch.profiler` over `repeat` calls after a warm-up, every kernel (CUDA) or operator (CPU) with its calls and self
time per call of the contender, beside the wall time per call; wall time well above the device's busy time means the
host (launches, Python, synchronisations) bounds the call. Memory (CUDA): the allocator's history over one call,
replayed to the peak; the tensors alive there, grouped by the line of `linattn` that allocated them. Host
(`host=True`): `cProfile` over `repeat` calls, the Python functions by their own time per call (a Triton launch shows
as `jit.py:run`; cProfile slows Python, so these times are upper bounds), and on CUDA whether any call waits for the
GPU (`torch.cuda.set_sync_debug_mode("error")` raises where one does)."""

from __future__ import annotations

import cProfile
import pstats
import traceback
from collections import defaultdict
from collections.abc import Callable

import torch

from linattn.bench import ops
from linattn.bench.contenders import CONTENDERS, DTYPES, SpeedConfig, inputs
from linattn.bench.timing import forward_backward, kernel_times

PASSES = ("fwd", "fwdbwd")


def _dtype(device: str) -> str:
    """`vla-speed`'s input dtype on this device."""
    return "bfloat16" if device == "cuda" else "float32"


def _call(contender: str, T: int, K: int, pass_: str, device: str) -> Callable[[], object]:
    """One call of the contender on its inputs, run once here (compilation, caches, fla's autotuning) and
    synchronised. A `vla-speed` contender, or on CUDA one of `bench ops` (with its inputs: bf16, B = 1, H = 16)."""
    speed = {c.name: c for c in CONTENDERS}
    op = {c.name: c for c in ops.CONTENDERS}
    if contender not in speed and not (device == "cuda" and contender in op):
        names = sorted(speed) + (sorted(op) if device == "cuda" else [])
        raise ValueError(f"contender: expected one of {names} on {device}, got {contender!r}")
    if pass_ not in PASSES:
        raise ValueError(f"pass_: expected one of {PASSES}, got {pass_!r}")
    if contender in speed:
        x = inputs(SpeedConfig(Ts=(T,), head_dims=(K,), H=16, dtype=_dtype(device)), T, K, device)
        fn, leaves = (lambda: speed[contender].run(x)), list(x.values())
    else:
        fn, leaves = op[contender].build(ops.Shape(B=1, T=T, K=K), DTYPES[_dtype(device)])
    call = torch.no_grad()(fn) if pass_ == "fwd" else forward_backward(fn, leaves)
    call()
    _sync(device)
    return call


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def kernels(contender: str, T: int, K: int, pass_: str, device: str, repeat: int = 5) -> dict:
    """`{wall_ms, busy_ms, rows}`: per call of the contender, the wall time, the device's summed self time, and
    `rows` = `{name, calls, ms}` per kernel (operator on CPU), largest first."""
    wall_ms, rows = kernel_times(_call(contender, T, K, pass_, device), device, repeat)
    return {"wall_ms": wall_ms, "busy_ms": sum(r["ms"] for r in rows), "rows": rows}


def _site(frames: list[dict]) -> str:
    """The innermost `linattn` line of an allocation's Python stack, or its innermost frame."""
    for f in frames:
        if "/linattn/" in f["filename"] and "/bench/" not in f["filename"]:
            return f"{f['filename'].split('/linattn/')[-1]}:{f['line']} ({f['name']})"
    return f"{frames[0]['filename'].split('/')[-1]}:{frames[0]['line']}" if frames else "?"


def memory(contender: str, T: int, K: int, pass_: str) -> dict:
    """CUDA: `{before_gib, peak_gib, rows}`: memory allocated before one call, the call's peak, and `rows` =
    `{site, gib, tensors}` alive at the peak per allocating line (allocations before the call are not listed)."""
    fn = _call(contender, T, K, pass_, "cuda")
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    fn()
    torch.cuda.synchronize()
    trace = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
    torch.cuda.memory._record_memory_history(enabled=None)
    live, at_peak, now, peak = {}, {}, 0, 0
    for ev in trace:
        if ev["action"] == "alloc":
            live[ev["addr"]] = ev
            now += ev["size"]
            if now > peak:
                peak, at_peak = now, dict(live)
        elif ev["action"] == "free_completed" and ev["addr"] in live:
            now -= live.pop(ev["addr"])["size"]
    sites, counts = defaultdict(int), defaultdict(int)
    for ev in at_peak.values():
        site = _site(ev.get("frames", []))
        sites[site] += ev["size"]
        counts[site] += 1
    rows = [{"site": s, "gib": b / 2**30, "tensors": counts[s]} for s, b in sites.items()]
    rows.sort(key=lambda r: -r["gib"])
    return {"before_gib": before / 2**30, "peak_gib": torch.cuda.max_memory_allocated() / 2**30, "rows": rows}


def host(contender: str, T: int, K: int, pass_: str, device: str, repeat: int = 20) -> dict:
    """`{rows, sync}`: `rows` = `{function, calls, ms}` by own host time per call of the contender, largest first;
    `sync` (CUDA) None when no call waits for the GPU, else the innermost lines of the call that does."""
    fn = _call(contender, T, K, pass_, device)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(repeat):
        fn()
    prof.disable()
    _sync(device)
    stats = pstats.Stats(prof).stats  # {(file, line, name): (calls, primitive calls, own s, cumulative s, callers)}
    rows = [{"function": f"{f.split('/')[-1]}:{line}({name})", "calls": c / repeat, "ms": 1e3 * own / repeat}
            for (f, line, name), (_, c, own, _, _) in stats.items()]  # fmt: skip
    rows.sort(key=lambda r: -r["ms"])
    sync = None
    if device == "cuda":
        torch.cuda.set_sync_debug_mode("error")
        try:
            fn()
        except RuntimeError:
            sync = traceback.format_exc(limit=-4)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return {"rows": rows, "sync": sync}


def run(contender: str, T: int, K: int, pass_: str, device: str, top: int = 15, with_host: bool = False) -> dict:
    """The kernel table, on CUDA the memory table, and with `with_host` the host table, of one contender at one
    shape."""
    result = {"contender": contender, "T": T, "K": K, "pass": pass_, "dtype": str(DTYPES[_dtype(device)]),
              "time": kernels(contender, T, K, pass_, device)}  # fmt: skip
    result["time"]["rows"] = result["time"]["rows"][:top]
    if device == "cuda":
        result["memory"] = memory(contender, T, K, pass_)
        result["memory"]["rows"] = result["memory"]["rows"][:top]
    if with_host:
        result["host"] = host(contender, T, K, pass_, device)
        result["host"]["rows"] = result["host"]["rows"][:top]
    return result


def table(result: dict) -> str:
    """Markdown: the kernels, then (CUDA) the live tensors at the peak."""
    t = result["time"]
    head = f"{result['contender']}, {result['pass']}, T = {result['T']:,}, K = V = {result['K']}, {result['dtype']}"
    lines = [
        f"## {head}",
        f"\nPer call: wall {t['wall_ms']:.3f} ms; busy {t['busy_ms']:.3f} ms, the self time of every kernel (operator"
        " on CPU), the rows below and the rest.\n",
        "| kernel / operator | calls | ms | share of busy |",
        "|---|---:|---:|---:|",
    ]
    for r in t["rows"]:
        lines.append(f"| `{r['name'][:90]}` | {r['calls']:g} | {r['ms']:.3f} | {r['ms'] / t['busy_ms']:.0%} |")
    if "memory" in result:
        m = result["memory"]
        lines += [
            f"\nMemory: {m['before_gib']:.2f} GiB before the call, peak {m['peak_gib']:.2f} GiB. Alive at the peak:\n",
            "| allocated at | GiB | tensors |",
            "|---|---:|---:|",
        ]
        lines += [f"| `{r['site']}` | {r['gib']:.3f} | {r['tensors']} |" for r in m["rows"]]
    if "host" in result:
        h = result["host"]
        lines += [
            "\nHost, Python functions by own time per call (cProfile):\n",
            "| function | calls | ms |",
            "|---|---:|---:|",
        ]
        lines += [f"| `{r['function'][:90]}` | {r['calls']:g} | {r['ms']:.3f} |" for r in h["rows"]]
        if "memory" in result:  # CUDA: the synchronisation check ran
            lines.append(
                "\nNo call waits for the GPU." if h["sync"] is None else f"\nWaits for the GPU:\n```\n{h['sync']}```"
            )
    return "\n".join(lines)
