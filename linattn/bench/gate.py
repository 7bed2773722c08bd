"""VLA's gate at length: the float32 gate's `α̂` against float64, and whether it stays finite and unit-norm.

`python -m linattn.bench gate [--device cpu|cuda]`. For each head dim `d` and length `T`: inputs drawn once in
float64 (`k = ELU(x) + 1`, `u` unit rows over `√d`, as `vla-speed` draws them; B = H = 1: heads are independent),
rounded to the input dtype (float32, bfloat16); the gate `vla` runs on that device (the Triton kernel on CUDA, the
chunk path on the CPU) computes on them in float32, and the chunk path in float64 on the same rounded inputs gives
the reference: the gate's own error. (`vla_gate` then returns `α̂` in the input dtype: for bfloat16 inputs that
rounding, ~2e-3, comes on top.) Per token, both
`α̂` are unit vectors, so `‖α̂ − α̂₆₄‖` is the relative error; the rows give its maximum and RMS over the tokens,
the largest `|‖α̂‖ − 1|`, and whether `α̂` and the final `A_T` are finite. The bound it checks: relative error
≤ 1e-3 at T = 64K (d = 32 and 128), finite and unit-norm at T = 1M. `--rho` runs both gates with a forgetting
factor (`forgetting.py`'s segments).

`--conditioning`: the gate's float32 error against its conditioning `r = ‖u‖² / λ0` (`head.py`), 1e-1 … 1e6, for
the token loop (`naive`) and the device's chunked gate, each against the float64 token loop on the same rounded
inputs (T = 512, 3 seeds, the worst shown); the bound: the chunked gate within 2× the token loop's error (or 1e-6).
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from linattn.ops.vla.api import backend_gate
from linattn.ops.vla.naive import naive_vla_gate

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _chunked(device: str) -> str:
    """The chunked gate this device runs: the Triton kernel on CUDA, the PyTorch chunk path on the CPU."""
    return "triton" if device == "cuda" else "chunk"


def inputs(T: int, d: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """`(k, u): [1, T, 1, d]` float64 on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    k = F.elu(torch.randn(1, T, 1, d, generator=gen, dtype=torch.float64)) + 1
    u = F.normalize(torch.randn(1, T, 1, d, generator=gen, dtype=torch.float64), dim=-1) / math.sqrt(d)
    return k, u


@torch.no_grad()
def measure(T: int, d: int, dtype: str, device: str, *, lam0: float = 0.1, rho: float = 1.0) -> dict:
    """One row: the gate on `dtype` inputs at `(T, d)`, against float64 on the same rounded inputs."""
    k, u = inputs(T, d)
    k, u = k.to(DTYPES[dtype]).to(device), u.to(DTYPES[dtype]).to(device)
    start = time.perf_counter()
    gate = backend_gate(_chunked(device), lam0, rho)
    alpha, A = gate(k, u, None)  # float32 for float32 and bfloat16 inputs
    if device == "cuda":
        torch.cuda.synchronize()
    row = {"K": d, "T": T, "inputs": dtype, "seconds": time.perf_counter() - start}
    row["finite"] = bool(torch.isfinite(alpha).all()) and bool(torch.isfinite(A).all())
    row["max_norm_deviation"] = (alpha.norm(dim=-1) - 1).abs().max().item()
    want, _ = backend_gate("chunk", lam0, rho)(k.double(), u.double(), None)
    err = (alpha.double() - want).norm(dim=-1).flatten()  # [T]
    row["max_err"], row["rms_err"] = err.max().item(), err.pow(2).mean().sqrt().item()
    return row


def run(device: str = "cpu", head_dims=(32, 128), lengths=(65536, 1 << 20), rho: float = 1.0) -> list[dict]:
    """Every head dim, length and input dtype."""
    return [measure(T, d, dtype, device, rho=rho) for d in head_dims for T in lengths for dtype in DTYPES]


def table(rows: list[dict]) -> str:
    """Markdown, one row per (d, T, inputs)."""

    lines = [
        "| d | T | inputs | max ‖α̂ − α̂₆₄‖ | RMS | max \\|‖α̂‖ − 1\\| | finite | seconds |",
        "|---:|---:|---|---:|---:|---:|:---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['K']} | {r['T']:,} | {r['inputs']} | {r['max_err']:.2e} | {r['rms_err']:.2e} | "
            f"{r['max_norm_deviation']:.1e} | {'✓' if r['finite'] else '✗'} | {r['seconds']:.1f} |"
        )
    return "\n".join(lines)


CONDITIONS = (0.1, 1.0, 3.0, 10.0, 100.0, 1e4, 1e6)


@torch.no_grad()
def conditioning_row(d: int, r: float, device: str, *, T: int = 512, lam0: float = 0.1, seeds: int = 3) -> dict:
    """The worst over `seeds` draws of `max_t ‖α̂_t − α̂₆₄‖` for the float32 token loop and the chunked gate, at
    `‖u‖² / λ0 = r` (every `u` of norm `√(r λ0)`)."""
    chunked = _chunked(device)
    row = {"K": d, "r": r, "naive": 0.0, chunked: 0.0}
    for seed in range(seeds):
        k, u = inputs(T, d, seed)
        k, u = k.float().double().to(device), (u * math.sqrt(r * lam0 * d)).float().double().to(device)
        want, _ = naive_vla_gate(k, u, None, lam0=lam0)
        for name in ("naive", chunked):
            alpha, _ = backend_gate(name, lam0)(k.float(), u.float(), None)
            row[name] = max(row[name], (alpha.double() - want).norm(dim=-1).max().item())
    row["ratio"] = row[chunked] / max(row["naive"], 1e-6 / 2)
    return row


def conditioning_run(device: str = "cpu", head_dims=(32, 128)) -> list[dict]:
    return [conditioning_row(d, r, device) for d in head_dims for r in CONDITIONS]


def conditioning_table(rows: list[dict]) -> str:
    chunked = "triton" if "triton" in rows[0] else "chunk"
    lines = [
        f"| d | ‖u‖² / λ0 | token loop | {chunked} | {chunked} / max(token loop, 5e-7) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['K']} | {r['r']:g} | {r['naive']:.1e} | {r[chunked]:.1e} | {r['ratio']:.2f} |")
    return "\n".join(lines)
