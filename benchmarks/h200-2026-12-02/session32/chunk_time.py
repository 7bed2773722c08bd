"""The chunk backend's CPU time, forward + backward, for GDN, scalar-decay GLA and CCQ (session 32: the decay factors
from float64 cost this much). From the repository root, in the project's venv:

    PYTHONPATH=. python benchmarks/h200-2026-12-02/session32/chunk_time.py

float32, B = 8, T = 512, H = 4, K = V = 64; the minimum of 5 calls after one warm-up, ms. For a before / after,
check the chunk files of the earlier commit out into the tree and back (the editable install ignores PYTHONPATH):
`F="linattn/ops/chunking.py linattn/ops/linear_attention/chunk.py linattn/ops/delta_rule/chunk.py
linattn/ops/ccq/chunk.py"; git checkout 9175ca5 -- $F`, run, `git checkout HEAD -- $F`.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from linattn.ops import ccq_query, delta_rule, gated_linear_attention


def main() -> None:
    torch.manual_seed(0)
    B, T, H, K = 8, 512, 4, 64
    q, v = (torch.randn(B, T, H, K).requires_grad_() for _ in range(2))
    k = F.normalize(torch.randn(B, T, H, K), dim=-1).requires_grad_()
    beta = torch.rand(B, T, H).requires_grad_()
    g = (-0.1 * torch.rand(B, T, H)).requires_grad_()
    calls = {
        "GDN": lambda: delta_rule(q, k, v, beta=beta, g=g, backend="chunk")[0],
        "GLA (scalar decay)": lambda: gated_linear_attention(q, k, v, g, backend="chunk")[0],
        "CCQ": lambda: ccq_query(q, k, beta, g=g, backend="chunk")[0],
    }
    for name, call in calls.items():
        times = []
        for _ in range(6):
            start = time.perf_counter()
            call().sum().backward()
            times.append(time.perf_counter() - start)
        print(f"{name}: {1e3 * min(times[1:]):.1f} ms")


if __name__ == "__main__":
    main()
