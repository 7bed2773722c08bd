"""Scratch (not part of the library): session 34 merged GLA launch settings screened at K = 128 (2 warps and 2 stages
for the output and `dq, dk` kernels, `[32, 32]` state tiles); this times each kernel at smaller head dims under the
merged settings and under the ones they replaced (8 warps, Triton's 3 stages; `[64, 32]` tiles), bf16 forward +
backward, B = 1, H = 16, T = 64K.

    PYTHONPATH=. python benchmarks/h200-2026-12-02/session34/check_gla_small_k.py
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("screen", HERE.parent / "session33" / "screen_gla_launch.py")
screen = importlib.util.module_from_spec(spec)
sys.modules["screen"] = screen
spec.loader.exec_module(screen)

OLD = {"gla_output_kernel": {"num_warps": 8, "num_stages": 3}, "gla_qk_grad_kernel": {"num_warps": 8, "num_stages": 3}}


def main() -> None:
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; T = 65536, ms per forward + backward")
    print("| K | kernel | merged ms | replaced ms | grad diff |")
    print("|---:|---|---:|---:|---:|", flush=True)
    for K in (32, 64, 128):
        step = screen.case(65536, K=K)
        ref = step()
        new = screen.kernel_ms(step)
        for name, setting in OLD.items():
            screen.OVERRIDE.clear()
            screen.OVERRIDE[name] = setting
            diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(step(), ref))
            old = screen.kernel_ms(step)
            print(f"| {K} | {name} | {new[name]:.3f} | {old[name]:.3f} | {diff:.1e} |", flush=True)
        screen.OVERRIDE.clear()
        # the launcher now asks `block(K, 32)` then `block(V, 32)`: answer 64 then 32 (capped by the dims) in turn
        widths = itertools.cycle((64, 32))
        screen.state.block = lambda dim, most=64: min(next(widths), max(16, 1 << (dim - 1).bit_length()))
        diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(step(), ref))
        old = screen.kernel_ms(step)
        screen.state_tiles(None)
        name = "gla_state_kernel"
        print(f"| {K} | {name} | {new[name]:.3f} | {old[name]:.3f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
