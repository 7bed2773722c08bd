"""Scratch (not part of the library): GLA's per-channel kernels with the library's precision rule (one tf32 pass per
product in a bfloat16 training call, `linear_attention/triton/function.py`, merged in session 28 untimed) against
three passes everywhere (what they ran before), beside fla's `chunk_gla`. One GPU:

    PYTHONPATH=. python benchmarks/h200-2026-12-01/session28/screen_gla.py [--out DIR]

Why: on the H200 (session 28, `bench ops`, bf16, B = 1, H = 16, K = V = 128) our GLA with three passes took 9.25 ms
forward and 41.4 forward + backward at 64K, 2.8× our GDN's fwd+bwd (14.8), at 1.6% of the tensor cores' rate
(`fwd_mma_frac`); the engine's one-pass stages ran 1.3 – 2.2× as fast as with three (its `precision.py`). The rule's
accuracy is `verify --ops gla`'s to judge (run it first: `call.sh gla`).

Forward and forward + backward ms, bf16, no final state (`bench ops`'s GLA call), the two settings alternated over two
rounds; fla's `chunk_gla` on the same inputs (its first call autotunes: untimed warm-up).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F

from linattn.bench.timing import forward_backward, median_ms
from linattn.ops import gated_linear_attention
from linattn.ops.linear_attention.triton import function


@contextlib.contextmanager
def three_passes():
    """Every GLA product in three tf32 passes, as before the rule."""
    rules = function.state_precision, function.grad_precision
    function.state_precision = function.grad_precision = lambda *a, **k: "tf32x3"
    try:
        yield
    finally:
        function.state_precision, function.grad_precision = rules


SETTINGS = {"library": contextlib.nullcontext, "three passes": three_passes}


def _inputs(T: int, K: int, H: int = 16):
    def r():
        return torch.randn(1, T, H, K, device="cuda", dtype=torch.bfloat16).requires_grad_()

    q, k, v = r(), r(), r()
    g = (F.logsigmoid(torch.randn(1, T, H, K, device="cuda")) / 16).requires_grad_()
    return q, k, v, g


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="4096,16384,65536")
    parser.add_argument("--K", type=int, default=128)
    args = parser.parse_args()
    try:
        from fla.ops.gla import chunk_gla
    except ImportError:
        chunk_gla = None
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, fla {'found' if chunk_gla else 'missing'}")
    names = [*SETTINGS, *(["fla"] if chunk_gla else [])]
    print("| T | K | round | " + " | ".join(f"{n} fwd / fwd+bwd ms" for n in names) + " |")
    print("|---:|---:|---:|" + "---|" * len(names), flush=True)
    rows = []
    for T in map(int, args.lengths.split(",")):
        q, k, v, g = _inputs(T, args.K)
        ours = lambda: gated_linear_attention(q, k, v, g, backend="triton")[0]  # noqa: E731
        calls = {name: (ours, setting) for name, setting in SETTINGS.items()}
        if chunk_gla is not None:
            calls["fla"] = (lambda: chunk_gla(q, k, v, g)[0], contextlib.nullcontext)
        for r in range(2):
            row = {"T": T, "K": args.K, "round": r}
            for name, (fn, setting) in calls.items():
                with setting():
                    step = forward_backward(fn, [q, k, v, g])
                    step()  # compiles (fla: autotunes) outside the timing
                    row[name] = {"fwd": median_ms(fn, "cuda"), "fwdbwd": median_ms(step, "cuda")}
            rows.append(row)
            cells = " | ".join(f"{row[n]['fwd']:.3f} / {row[n]['fwdbwd']:.3f}" for n in calls)
            print(f"| {T} | {args.K} | {r} | {cells} |", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-gla.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
