"""GPU op benchmark: our backends beside SDPA (flash), flash-linear-attention and the naive token loop (the
definition, timed up to B·T = 4096 tokens), measured in one run.

Run on a CUDA machine: `python -m linattn.bench ops [--json FILE]`. For every shape and contender it times the
forward and the forward + backward with `triton.testing.do_bench` (median), records the peak memory of the
forward + backward, and converts times into fractions of the machine's own ceilings, measured at the start of
the run: device-to-device copy bandwidth and the bf16 matrix rate of a large `torch.matmul`. The byte and FLOP
counts are the minimal ones of each algorithm (each input read once, each output written once; the chunked
delta rule's matmuls at chunk size 64), so the fractions are lower bounds on how close a kernel is to its floor.
Forward + backward: the inputs read twice, `o`'s gradient read and the inputs' gradients written, `3 n + 2`
tensors for `n` inputs; three times the forward's FLOPs (each forward product has two in the backward).
`python -m linattn.bench ops --table-from FILE` prints a saved run's table again, fractions recomputed.

fla is a benchmark-only dependency: when it is missing (or refuses to run, like its gated backward on Hopper
with Triton < 3.7.1) its rows say so instead of a time.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from linattn.bench.timing import forward_backward, median_ms
from linattn.ops import delta_rule, gated_linear_attention

C = 64  # chunk size the FLOP model assumes


@dataclass(frozen=True)
class Shape:
    B: int
    T: int
    H: int = 16
    K: int = 128

    @property
    def label(self) -> str:
        return f"B={self.B} T={self.T // 1024}K"


@dataclass(frozen=True)
class Contender:
    name: str
    build: Callable[[Shape, torch.dtype], tuple[Callable[[], torch.Tensor], list[torch.Tensor]]]  # fn, leaves
    flops: Callable[[Shape], float]  # forward FLOPs
    n_in: int  # [B, T, H, K] tensors the forward reads (beside o, the one it writes)
    backward: bool = True
    max_tokens: int | None = None  # B·T beyond which it is not timed (the token loop would take minutes)


def _sdpa_flops(s: Shape) -> float:
    return 2 * 2 * s.B * s.H * s.T * s.T * s.K / 2  # QKᵀ and PV, causal half


def _delta_flops(s: Shape) -> float:
    K = V = s.K
    per_token = 2 * C * (3 * K + 2 * V) + 6 * K * V  # intra-chunk products, UT solve rhs, state in and out
    return s.B * s.H * s.T * per_token


def fractions(contender: Contender, row: dict, limits: dict[str, float], size: int = 2) -> dict[str, float]:
    """The row's times as fractions of the ceilings: `{pass}_bw_frac` (minimal bytes over time against the copy
    bandwidth) and `{pass}_mma_frac` (FLOPs over time against the bf16 matrix rate), for each pass timed."""
    s = Shape(row["B"], row["T"])
    tensor = s.B * s.T * s.H * s.K * size
    work = {"fwd": ((contender.n_in + 1) * tensor, contender.flops(s)),
            "fwdbwd": ((3 * contender.n_in + 2) * tensor, 3 * contender.flops(s))}  # fmt: skip
    out = {}
    for name, (nbytes, flops) in work.items():
        if f"{name}_ms" in row:
            seconds = row[f"{name}_ms"] * 1e-3
            out[f"{name}_bw_frac"] = nbytes / seconds / limits["bandwidth"]
            out[f"{name}_mma_frac"] = flops / seconds / limits["bf16_flops"]
    return out


def _gla_flops(s: Shape) -> float:
    K = V = s.K
    per_token = 2 * C * (K + V) + 4 * K * V  # intra-chunk scores and their values, state in and out
    return s.B * s.H * s.T * per_token


def _randn(s: Shape, dtype, *, unit=False, grad=True):
    x = torch.randn(s.B, s.T, s.H, s.K, device="cuda", dtype=torch.float32)
    if unit:
        x = F.normalize(x, dim=-1)
    return x.to(dtype).requires_grad_(grad)


def _gates(s: Shape):
    beta = torch.rand(s.B, s.T, s.H, device="cuda").requires_grad_()
    g = (-0.1 * torch.rand(s.B, s.T, s.H, device="cuda")).requires_grad_()
    return beta, g


def _sdpa(s, dtype):
    q, k, v = (_randn(s, dtype) for _ in range(3))

    def fn():
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)

    return fn, [q, k, v]


def _ours(backend: str, two_key: bool, precision: str = "exact", gated: bool = True):
    """Our delta rule: GDN (or without the decay DeltaNet, or the two-key rule) at a precision level."""

    def build(s, dtype):
        q, v = _randn(s, dtype), _randn(s, dtype)
        k = _randn(s, dtype, unit=True)
        w = _randn(s, dtype, unit=True) if two_key else None
        beta, g = _gates(s)
        if not gated:
            g = None
        leaves = [x for x in (q, k, v, beta, g, w) if x is not None]
        return (lambda: delta_rule(q, k, v, w=w, beta=beta, g=g, backend=backend, precision=precision)[0]), leaves

    return build


def _fla(kind: str):
    def build(s, dtype):
        q, k, v = _randn(s, dtype), _randn(s, dtype, unit=True), _randn(s, dtype)
        beta, g = _gates(s)
        if kind == "gdn":
            from fla.ops.gated_delta_rule import chunk_gated_delta_rule

            return (lambda: chunk_gated_delta_rule(q, k, v, g, beta)[0]), [q, k, v, beta, g]
        if kind == "deltanet":
            from fla.ops.delta_rule import chunk_delta_rule

            return (lambda: chunk_delta_rule(q, k, v, beta)[0]), [q, k, v, beta]
        from fla.ops.generalized_delta_rule import chunk_dplr_delta_rule

        # the two-key rule as a DPLR one: (I − β w kᵀ) S + (β w) vᵀ, i.e. a = −β w, b = k, key = β w
        w = _randn(s, dtype, unit=True)
        gk = torch.zeros(s.B, s.T, s.H, s.K, device="cuda", dtype=dtype)
        bw = lambda: beta[..., None].to(dtype) * w  # noqa: E731
        return (lambda: chunk_dplr_delta_rule(q, bw(), v, -bw(), k, gk)[0]), [q, k, v, w, beta]

    return build


def _gla(backend: str):
    """GLA with GLA's gate, `g = logsigmoid(·) / 16` per key channel: ours on `backend`, or fla's `chunk_gla`."""

    def build(s, dtype):
        q, k, v = _randn(s, dtype), _randn(s, dtype), _randn(s, dtype)
        g = (F.logsigmoid(torch.randn(s.B, s.T, s.H, s.K, device="cuda")) / 16).requires_grad_()
        if backend == "fla":
            from fla.ops.gla import chunk_gla

            return (lambda: chunk_gla(q, k, v, g)[0]), [q, k, v, g]
        return (lambda: gated_linear_attention(q, k, v, g, backend=backend)[0]), [q, k, v, g]

    return build


CONTENDERS = [
    Contender("sdpa (flash)", _sdpa, _sdpa_flops, 3),
    Contender("ours triton GDN", _ours("triton", False), _delta_flops, 3),
    Contender("ours triton GDN fast", _ours("triton", False, "fast"), _delta_flops, 3),
    Contender("ours triton DeltaNet", _ours("triton", False, gated=False), _delta_flops, 3),
    Contender("ours triton DeltaNet fast", _ours("triton", False, "fast", gated=False), _delta_flops, 3),
    Contender("ours triton two-key", _ours("triton", True), _delta_flops, 4),
    Contender("ours triton two-key fast", _ours("triton", True, "fast"), _delta_flops, 4),
    Contender("ours chunk GDN (PyTorch)", _ours("chunk", False), _delta_flops, 3),
    Contender("naive token loop GDN (PyTorch)", _ours("naive", False), _delta_flops, 3, max_tokens=4096),
    Contender("fla GDN", _fla("gdn"), _delta_flops, 3),
    Contender("fla DeltaNet", _fla("deltanet"), _delta_flops, 3),
    Contender("ours triton GLA (per-channel decay)", _gla("triton"), _gla_flops, 4),
    Contender("ours chunk GLA (PyTorch)", _gla("chunk"), _gla_flops, 4, max_tokens=16384),
    Contender("fla GLA", _gla("fla"), _gla_flops, 4),
    Contender("fla DPLR two-key", _fla("dplr"), _delta_flops, 4),
]


def ceilings() -> dict[str, float]:
    """This GPU's copy bandwidth (bytes/s, read + write) and bf16 matmul rate (FLOP/s), measured now."""
    x = torch.randn(512 * 2**20 // 4, device="cuda")  # 512 MiB
    y = torch.empty_like(x)
    copy_ms = median_ms(lambda: y.copy_(x), "cuda")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    mm_ms = median_ms(lambda: a @ a, "cuda")
    return {"bandwidth": 2 * x.numel() * 4 / (copy_ms * 1e-3), "bf16_flops": 2 * 8192**3 / (mm_ms * 1e-3)}


def measure(contender: Contender, shape: Shape, dtype: torch.dtype, limits: dict[str, float]) -> dict:
    """Forward and forward+backward medians (ms), peak memory of forward+backward (GiB), roofline fractions."""
    row = {"contender": contender.name, "shape": shape.label, "B": shape.B, "T": shape.T}
    if contender.max_tokens is not None and shape.B * shape.T > contender.max_tokens:
        row["error"] = f"not timed beyond B·T = {contender.max_tokens}"
        return row
    try:
        fn, leaves = contender.build(shape, dtype)
        row["fwd_ms"] = median_ms(fn, "cuda")
        if contender.backward:
            fwd_bwd = forward_backward(fn, leaves)
            torch.cuda.reset_peak_memory_stats()
            fwd_bwd()
            row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
            row["fwdbwd_ms"] = median_ms(fwd_bwd, "cuda")
    except Exception as e:  # a contender that cannot run here says why (keeping its forward time), the others go on
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    finally:
        torch.cuda.empty_cache()
    return {**row, **fractions(contender, row, limits, dtype.itemsize)}


BATCH_SWEEP = ((4, 16384), (16, 4096), (64, 1024))  # B·T = 64K: the GPU full (with B = 1, T = 64K)


def run(
    lengths=(2048, 4096, 8192, 16384, 32768, 65536),
    batch_sweep=BATCH_SWEEP,
    dtype=torch.bfloat16,
    only: tuple[str, ...] = (),
) -> tuple[dict[str, float], list[dict]]:
    """Every contender (or those whose name contains one of `only`, plus SDPA, the reference of every ratio) at
    every shape: `(ceilings, rows)`."""
    if not torch.cuda.is_available():
        raise RuntimeError("python -m linattn.bench ops needs a CUDA GPU")
    limits = ceilings()
    shapes = [Shape(1, T) for T in lengths] + [Shape(B, T) for B, T in batch_sweep if B != 1]
    contenders = [c for c in CONTENDERS if not only or any(o in c.name for o in only) or c.name.startswith("sdpa")]
    rows = []
    # contender by contender, so that a run cut short has whole rows; fla's DPLR is last in CONTENDERS: on a
    # fresh machine its first forward + backward compiles and autotunes for minutes
    for c in contenders:
        for s in shapes:
            rows.append(measure(c, s, dtype, limits))
            print(f"# measured {s.label} {c.name}: {rows[-1]}", file=sys.stderr, flush=True)  # progress, and a record
    return limits, rows


def table(rows: list[dict]) -> str:
    """Markdown: one row per shape and contender, times and ratios to SDPA in the same run, and each time's
    fractions of the ceilings (`fractions`)."""
    sdpa = {r["shape"]: r for r in rows if r["contender"].startswith("sdpa")}
    lines = [
        "| shape | contender | fwd ms | fwd+bwd ms | fwd+bwd / SDPA | peak GiB | fwd %BW / %MMA | fwd+bwd %BW / %MMA |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]

    def pct(r: dict, name: str) -> str:
        if f"{name}_bw_frac" not in r:
            return "—"
        return f"{100 * r[f'{name}_bw_frac']:.0f}% / {100 * r[f'{name}_mma_frac']:.0f}%"

    shapes = list(dict.fromkeys(r["shape"] for r in rows))  # in the order measured
    for r in sorted(rows, key=lambda r: shapes.index(r["shape"])):  # by shape, contenders in their order
        if "fwd_ms" not in r:
            lines.append(f"| {r['shape']} | {r['contender']} | {r['error']} ||||||")
            continue
        ref = sdpa.get(r["shape"], {}).get("fwdbwd_ms")
        ratio = f"{r['fwdbwd_ms'] / ref:.2f}×" if ref and "fwdbwd_ms" in r else "—"
        lines.append(
            f"| {r['shape']} | {r['contender']} | {r['fwd_ms']:.3f} | {r.get('fwdbwd_ms', float('nan')):.3f} | "
            f"{ratio} | {r.get('peak_gib', float('nan')):.2f} | {pct(r, 'fwd')} | {pct(r, 'fwdbwd')} |"
            + (f" backward: {r['error']}" if "error" in r else "")
        )
    return "\n".join(lines)


def table_from(saved: dict) -> str:
    """`table` of a run saved by `--json` (its `ceilings` and `rows`), every fraction recomputed by `fractions`
    (runs saved before the forward + backward fractions existed get them too)."""
    by_name = {c.name: c for c in CONTENDERS}
    rows = []
    for r in saved["rows"]:
        if r["contender"] not in by_name:
            raise ValueError(f"--table-from: unknown contender {r['contender']!r} (known: {sorted(by_name)})")
        rows.append({**r, **fractions(by_name[r["contender"]], r, saved["ceilings"])})
    return table(rows)
