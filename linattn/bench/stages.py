"""Stage profile of the Triton delta rule: each kernel of the forward and of the backward timed on its own.

Run on a CUDA machine: `python -m linattn.bench stages [--lengths 8192,65536] [--batch B] [--heads H] [--json FILE]`
(`--op vla-gate`: VLA's chunk gate instead, `gate_stages.py`, which `--device cpu` also runs on the CPU); bf16,
B = 1 (or `--batch`), H = 16 (or `--heads`), K = V = 128, the GDN configuration (w = k, β, g), as in `ops`. Each stage
is called the way `delta_rule_fwd` and `delta_rule_bwd` call it, on the intermediates of one real forward and
backward, and timed with `linattn.bench.timing.median_ms` (`triton.testing.do_bench`, median). Beside the stages:
the end-to-end forward and forward + backward of `delta_rule(backend="triton")`; what they spend beyond the sum of
their stages is the host's time between launches (argument checks, allocations, casts). For the sequential stages
(`state_fwd`, `state_bwd`), whose programs walk the chunks one after another, the time per chunk is one step of that
walk.
`--batch B` runs B sequences of each length at once: `--batch 16 --lengths 2048` against `--lengths 32768` tells
whether a stage's time follows the length of its walk or the work of its steps.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from functools import partial

import torch
import torch.nn.functional as F

from linattn.bench.timing import median_ms
from linattn.ops import delta_rule
from linattn.ops.delta_rule.triton import segments as segmenting
from linattn.ops.delta_rule.triton import value_block as blocks
from linattn.ops.delta_rule.triton.cumsum import chunk_cumsum
from linattn.ops.delta_rule.triton.local_bwd import local_bwd
from linattn.ops.delta_rule.triton.output import output_fwd
from linattn.ops.delta_rule.triton.precision import backward_precision, forward_precision
from linattn.ops.delta_rule.triton.recompute import wy_apply
from linattn.ops.delta_rule.triton.state import state_fwd
from linattn.ops.delta_rule.triton.state_bwd import state_bwd
from linattn.ops.delta_rule.triton.wy import wy_fwd
from linattn.ops.utils.grid import cdiv
from linattn.ops.utils.layout import chunk_layout

SEQUENTIAL = ("state_fwd", "state_fwd (recompute)", "state_bwd")


def stage_bytes(B: int, T: int, H: int, K: int, V: int, fast: bool = False, BT: int = 64) -> dict[str, int]:
    """Bytes each stage of a bfloat16 GDN training step reads and writes, each tensor counted once a stage (what it
    moves to and from memory at the least: the sequential kernels' programs reread `K̃` and `w` once a value block,
    from L2). Per token and head: `e = 2` (bfloat16 tokens), `f = 4` (the float32 gates `β`, `g`, `G`, `dG`), `s` the
    dtype the forward stores `T`, `Ũ`, `K̃`, `h`, `U` in and the backward `dh`, `E_c` (4, or 2 at the fast level), `w`
    the state backward's `dU`, `W̃`, `dṼ` (4 at either level); a chunk state is `K · V / BT` elements a token."""
    e, f, w = 2, 4, 4
    s = 2 if fast else 4
    h = K * V / BT
    per_token = {
        "chunk_cumsum": 2 * f,
        "wy_fwd": e * (K + V) + 2 * f + s * (BT + V + K),
        "state_fwd": s * (K + V) + e * K + f + s * (h + V),
        "output_fwd": 2 * e * K + f + s * (h + V) + e * V,
        "wy_apply": e * (K + V) + 2 * f + s * BT + s * (V + 2 * K),
        "state_fwd (recompute)": s * (K + V) + e * K + f + s * (h + V),
        # the local pre-pass (q, w, dO, G read; dU, E_c, W̃ written), the walk (W̃, K̃ᵀ, E_c, dU, G read; dU, dh
        # written) and dṼ = Tᵀ dU
        "state_bwd": (2 * e * K + f + e * V + w * (V + K) + s * h)
        + (w * K + s * K + s * h + w * V + f + w * V + s * h)
        + (s * BT + 2 * w * V),
        "local_bwd": e * (2 * K + V) + 2 * f + 2 * s * h + s * V + w * V + e * V + e * (2 * K + V) + 2 * f,
        "chunk_cumsum (reverse)": 2 * f,
    }
    return {stage: round(n * B * T * H) for stage, n in per_token.items()}


def inputs(B: int, T: int, H: int, K: int, dtype: torch.dtype, device) -> dict[str, torch.Tensor]:
    """GDN-configuration inputs: unit keys, β ∈ (0, 1), a mild decay; `do` the gradient of the output."""
    gen = torch.Generator(device=device).manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, device=device, generator=gen)

    return {
        "q": r(B, T, H, K).to(dtype),
        "k": F.normalize(r(B, T, H, K), dim=-1).to(dtype),
        "v": r(B, T, H, K).to(dtype),
        "beta": torch.rand(B, T, H, device=device, generator=gen),
        "g": -0.1 * torch.rand(B, T, H, device=device, generator=gen),
        "do": r(B, T, H, K).to(dtype),
    }


def stage_calls(x: dict[str, torch.Tensor], fast: bool = False) -> list[tuple[str, Callable[[], object]]]:
    """`(stage, call)` for every launch of the forward, then of the backward, in order; each call repeats its
    stage on inputs computed once here (the intermediates of one forward and backward). Each stage runs in the
    precision and stores in the dtype `delta_rule` gives it without a final state (`fast`: at the fast level)."""
    q, k, v, beta, g, do = (x[n] for n in ("q", "k", "v", "beta", "g", "do"))
    B, T, _, K = q.shape
    scale = K**-0.5
    layout = chunk_layout(B, T, None, q.device)
    G = chunk_cumsum(g, layout)
    fp = forward_precision(q, k, v, k, v.dtype, False, fast)
    T_inv, u_tilde, k_tilde, _ = wy_fwd(k, v, k, beta, G, layout, None, fp.rows, fp.store)
    fwd = partial(state_fwd, k_tilde, u_tilde, k, G, None, False, layout)
    h, U, _ = fwd(fp.state, fp.store)
    bp = backward_precision((q, k, v, do), False, fast=fast)
    k_tilde_t = wy_apply(k, v, beta, G, T_inv, layout, precision=bp.wy, store=bp.store)[2]
    bwd = partial(state_bwd, q, k, G, T_inv, k_tilde_t, do, None, scale, False, layout, bp.walk, store=bp.store)
    dh, dv_tilde, _ = bwd()
    local = partial(local_bwd, q, k, v, None, beta, G, h, dh, U, dv_tilde, do, scale, layout, precision=bp.local)
    dG = local()[-1]
    return [
        ("chunk_cumsum", lambda: chunk_cumsum(g, layout)),
        ("wy_fwd", lambda: wy_fwd(k, v, k, beta, G, layout, None, fp.rows, fp.store)),
        ("state_fwd", lambda: fwd(fp.state, fp.store)),
        ("output_fwd", lambda: output_fwd(q, k, G, h, U, scale, layout, v.dtype, fp.output)),
        ("wy_apply", lambda: wy_apply(k, v, beta, G, T_inv, layout, precision=bp.wy, store=bp.store)),
        ("state_fwd (recompute)", lambda: fwd(bp.state, bp.store)),
        ("state_bwd", bwd),
        ("local_bwd", local),
        ("chunk_cumsum (reverse)", lambda: chunk_cumsum(dG, layout, reverse=True)),
    ]


def end_to_end(x: dict[str, torch.Tensor], fast: bool = False) -> dict[str, Callable[[], object]]:
    """`delta_rule(backend="triton")`'s forward, and its forward + backward through autograd."""
    leaves = {n: x[n].detach().clone().requires_grad_() for n in ("q", "k", "v", "beta", "g")}

    def forward():
        return delta_rule(**leaves, backend="triton", precision="fast" if fast else "exact")[0]

    def forward_backward():
        for t in leaves.values():
            t.grad = None
        forward().backward(x["do"])

    return {"forward": forward, "forward + backward": forward_backward}


@contextmanager
def forced(segments: int | None, value_block: int | None):
    """Every state walk inside on `segments` segments a sequence (1: the one pass) and programs of `value_block`
    value columns (`segments.FORCED`, `value_block.FORCED`; None: the library's choice)."""
    segmenting.FORCED, blocks.FORCED = segments, value_block
    try:
        yield
    finally:
        segmenting.FORCED, blocks.FORCED = None, None


def profile(
    T: int, timer: Callable[[Callable], float], *, B=1, H=16, K=128, dtype=torch.bfloat16, device="cuda", fast=False,
    segments: int | None = None, value_block: int | None = None,
):  # fmt: skip
    """Rows `{B, T, stage, ms}` (and `us_per_chunk` for the sequential stages: per chunk of the sequence), the
    end-to-end rows last; `timer(fn) -> ms`; `fast`: the fast precision level's stages; `segments`, `value_block`:
    the state walks' (`forced`), in the stages and end to end."""
    x = inputs(B, T, H, K, dtype, device)
    NT = cdiv(T, 64)
    moved = stage_bytes(B, T, H, K, K, fast)
    rows = []
    with forced(segments, value_block):
        for stage, call in stage_calls(x, fast):
            row = {"B": B, "T": T, "stage": stage, "kind": "stage", "ms": timer(call), "bytes": moved[stage]}
            if stage in SEQUENTIAL:
                row["us_per_chunk"] = row["ms"] * 1e3 / NT
            rows.append(row)
        for name, call in end_to_end(x, fast).items():
            rows.append({"B": B, "T": T, "stage": f"delta_rule {name}", "kind": "end to end", "ms": timer(call)})
    return rows


def run(
    lengths=(8192, 65536),
    op: str = "delta_rule",
    K: int = 128,
    device: str = "cuda",
    batch: int = 1,
    precision: str = "exact",
    segments: int | None = None,
    heads: int = 16,
    value_block: int | None = None,
) -> list[dict]:
    """`op`: `delta_rule` (the Triton kernels, K = V = 128, `batch` sequences of each length with `heads` heads, on
    CUDA, at `precision`, the sequential stages in `segments` segments a sequence and their programs on
    `value_block` columns, None: the library's choice) or `vla-gate` (`gate_stages`, head dim `K`, on `device`)."""
    if op == "vla-gate":
        from linattn.bench import gate_stages

        profiler = partial(gate_stages.profile, K=K, device=device)
    elif device == "cuda" and torch.cuda.is_available():
        profiler = partial(
            profile, B=batch, H=heads, fast=precision == "fast", segments=segments, value_block=value_block
        )
    else:
        raise RuntimeError("python -m linattn.bench stages needs a CUDA GPU for the delta rule's kernels")
    rows = []
    for T in lengths:
        rows += profiler(T, partial(median_ms, device=device))
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def table(rows: list[dict]) -> str:
    """Markdown: per length, each stage's time and share of the stages' total, the bytes it moves (`stage_bytes`)
    and the rate that makes, then alternatives (not in the total) and the end-to-end times."""
    lines = ["| T | stage | ms | share | µs per chunk | MB moved | GB/s |", "|---:|---|---:|---:|---:|---:|---:|"]

    def traffic(r: dict) -> str:
        return f" {r['bytes'] / 1e6:.0f} | {r['bytes'] / r['ms'] / 1e6:.0f} |" if "bytes" in r else " | |"

    for B, T in sorted({(r.get("B", 1), r["T"]) for r in rows}):
        mine = [r for r in rows if (r.get("B", 1), r["T"]) == (B, T)]
        T = T if B == 1 else f"{B} × {T}"
        stages = [r for r in mine if r["kind"] not in ("alternative", "end to end")]
        total = sum(r["ms"] for r in stages)
        for r in stages:
            per_chunk = f"{r['us_per_chunk']:.1f}" if "us_per_chunk" in r else ""
            name = r["stage"] if r["kind"] == "stage" else f"{r['kind']}: {r['stage']}"
            lines.append(f"| {T} | {name} | {r['ms']:.3f} | {r['ms'] / total:.0%} | {per_chunk} |" + traffic(r))
        moved = sum(r.get("bytes", 0) for r in stages)
        total_traffic = traffic({"bytes": moved, "ms": total}) if moved else " | |"
        lines.append(f"| {T} | **stages, total** | {total:.3f} | 100% | |" + total_traffic)
        lines += [
            f"| {T} | {r['kind']}: {r['stage']} | {r['ms']:.3f} | | | | |" for r in mine if r["kind"] == "alternative"
        ]
        lines += [f"| {T} | {r['stage']} | {r['ms']:.3f} | | | | |" for r in mine if r["kind"] == "end to end"]
    return "\n".join(lines)
