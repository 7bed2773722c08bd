"""CPU benchmark: the `chunk` backend against the `naive` token loop, forward and forward + backward.

Run: `python -m linattn.bench cpu`. Both backends are timed in the same process on the same inputs, and
the table reports the time ratio naive / chunk (how many times faster the chunkwise form is).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F

from linattn.bench.timing import forward_backward, median_ms
from linattn.ops import delta_rule, vla


@dataclass(frozen=True)
class Config:
    name: str
    describe: str
    run: Callable[[dict[str, torch.Tensor], str], torch.Tensor]


def _gdn(x, backend):
    o, _ = delta_rule(
        x["q"], F.normalize(x["k"], dim=-1), x["v"], beta=x["beta"].sigmoid(), g=-F.softplus(x["a"]), backend=backend
    )
    return o


def _vla(x, backend):
    K = x["k"].shape[-1]
    phi = lambda t: F.elu(t) + 1  # noqa: E731
    o, _ = vla(phi(x["q"]), phi(x["k"]), x["v"], F.normalize(x["u"], dim=-1) / K**0.5, backend=backend)
    return o


CONFIGS = [
    Config("delta_rule", "GDN: unit keys, β = σ(·), g = −softplus(·)", _gdn),
    Config("vla", "ELU+1 q/k, u unit/√K, λ0 = 0.1", _vla),
]


def _inputs(B, T, H, K, V, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    shapes = {"q": (B, T, H, K), "k": (B, T, H, K), "u": (B, T, H, K), "v": (B, T, H, V), "beta": (B, T, H)}
    x = {name: torch.randn(*s, generator=gen, dtype=dtype) for name, s in shapes.items()}
    x["a"] = torch.randn(B, T, H, generator=gen, dtype=dtype) - 2
    return {name: t.requires_grad_() for name, t in x.items()}


def run(B=1, T=2048, H=4, K=64, V=64, dtype=torch.float32, min_run_time=2.0) -> list[dict]:
    """Time every config, both backends, forward and forward + backward. Returns one row per config."""
    x = _inputs(B, T, H, K, V, dtype)
    rows = []
    for cfg in CONFIGS:
        row = {"op": cfg.name, "config": cfg.describe}
        for backend in ("chunk", "naive"):
            fn = partial(cfg.run, x, backend)
            row[f"{backend}_fwd_ms"] = median_ms(torch.no_grad()(fn), "cpu", min_run_time=min_run_time)
            row[f"{backend}_fwdbwd_ms"] = median_ms(
                forward_backward(fn, list(x.values())), "cpu", min_run_time=min_run_time
            )
        row["speedup_fwd"] = row["naive_fwd_ms"] / row["chunk_fwd_ms"]
        row["speedup_fwdbwd"] = row["naive_fwdbwd_ms"] / row["chunk_fwdbwd_ms"]
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    """Markdown table of `run`'s rows."""
    lines = [
        "| op | config | chunk fwd (ms) | naive fwd (ms) | speed-up fwd | chunk fwd+bwd (ms) | naive fwd+bwd (ms) "
        "| speed-up fwd+bwd |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| `{r['op']}` | {r['config']} | {r['chunk_fwd_ms']:.1f} | {r['naive_fwd_ms']:.1f} | "
            f"{r['speedup_fwd']:.1f}× | {r['chunk_fwdbwd_ms']:.1f} | {r['naive_fwdbwd_ms']:.1f} | "
            f"**{r['speedup_fwdbwd']:.1f}×** |"
        )
    return "\n".join(lines)
