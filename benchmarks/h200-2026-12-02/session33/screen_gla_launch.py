"""Scratch (not part of the library): GLA's kernels under other launch settings, one kernel at a time, each kernel's
own device time in a bf16 forward + backward (`torch.profiler`), against the library's settings; one process, one
GPU.

    PYTHONPATH=. python benchmarks/h200-2026-12-02/session33/screen_gla_launch.py [--lengths 65536] [--out DIR]

Why: session 33 timed fla's `chunk_gla` beside ours for the first time (bf16, B = 1, H = 16, K = V = 128): ours takes
2.5× fla's time from 16K on, forward and backward alike. Our GLA launches take Triton's default warps and stages (4 and
3; 8 warps for the output and `dq`, `dk` kernels), where fla autotunes both per kernel; the state walk takes `[64, 32]`
tiles. This screen says how much of the gap launch settings alone close, and in which kernel (`bench profile
--contenders "ours triton GLA (per-channel decay),fla GLA"` gives each kernel's share).

Settings: `num_warps` × `num_stages` per kernel but the cumsum (the others at the library's), then the state walk's tile
(`BK`, `BV`). A setting's gradients are compared with the library's (largest relative difference, over `q, k, v, g`):
the settings change the order of a tile's sums, not the arithmetic.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from triton.runtime.jit import JITFunction

from linattn.ops import gated_linear_attention
from linattn.ops.linear_attention.triton import state

KERNELS = ("gla_scores_kernel", "gla_state_kernel", "gla_output_kernel", "gla_qk_grad_kernel", "gla_decay_grad_kernel")
LAUNCH = [(w, s) for w in (1, 2, 4, 8) for s in (1, 2, 3)]  # fla's `chunk_fwd_h` autotunes over these warps
TILES = [(32, 32), (32, 64), (64, 64), (128, 32)]  # the state walk's (BK, BV); the library's: (64, 32)

OVERRIDE: dict[str, dict] = {}  # kernel name -> launch options added to its calls
_run = JITFunction.run


def _run_with_override(self, *args, **kwargs):
    kwargs.update(OVERRIDE.get(self.fn.__name__, {}))
    return _run(self, *args, **kwargs)


JITFunction.run = _run_with_override
_block = state.block


def state_tiles(tile: tuple[int, int] | None) -> None:
    """The state walk's `(BK, BV)`, or the library's with None."""
    state.block = _block if tile is None else (lambda dim, most=64: tile[0] if most == 64 else tile[1])


def case(T: int, K: int = 128, H: int = 16):
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, T, H, K, device="cuda", generator=gen).bfloat16().requires_grad_() for _ in range(3))
    g = (F.logsigmoid(torch.randn(1, T, H, K, device="cuda", generator=gen)) / 16).requires_grad_()
    do = torch.randn(1, T, H, K, device="cuda", generator=gen).bfloat16()
    leaves = [q, k, v, g]

    def step():
        for x in leaves:
            x.grad = None
        gated_linear_attention(q, k, v, g, backend="triton")[0].backward(do)
        return [x.grad.double() for x in leaves]

    return step


def kernel_ms(step, repeat: int = 5) -> dict[str, float]:
    """Each kernel's device time per forward + backward, ms."""
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeat):
            step()
        torch.cuda.synchronize()
    ms: dict[str, float] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            ms[e.name] = ms.get(e.name, 0.0) + e.self_device_time_total / repeat / 1e3
    return ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--lengths", default="65536")
    args = parser.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    rows = []
    for T in map(int, args.lengths.split(",")):
        step = case(T)
        ref = step()
        base = kernel_ms(step)
        print(f"\n## T = {T}: the library's settings, ms per forward + backward (all kernels {sum(base.values()):.3f})")
        for name in KERNELS:
            print(f"- {name}: {base.get(name, 0.0):.3f}", flush=True)
        rows.append({"T": T, "setting": "library", "ms": base})
        print("\n| T | kernel | num_warps | num_stages | kernel ms | library's | all kernels ms | grad diff |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|", flush=True)
        for name in KERNELS:
            for w, s in LAUNCH:
                OVERRIDE.clear()
                OVERRIDE[name] = {"num_warps": w, "num_stages": s}
                try:
                    diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(step(), ref))
                    ms = kernel_ms(step)
                except Exception as e:  # a setting that does not compile (shared memory) is a row, not the end
                    print(f"| {T} | {name} | {w} | {s} | failed: {type(e).__name__}: {str(e)[:80]} | | | |", flush=True)
                    continue
                print(f"| {T} | {name} | {w} | {s} | {ms.get(name, 0.0):.3f} | {base.get(name, 0.0):.3f} | "
                      f"{sum(ms.values()):.3f} | {diff:.1e} |", flush=True)  # fmt: skip
                rows.append({"T": T, "setting": {name: [w, s]}, "ms": ms, "grad_diff": diff})
        OVERRIDE.clear()
        print("\n| T | state tile (BK, BV) | gla_state_kernel ms | all kernels ms | grad diff |")
        print("|---:|---|---:|---:|---:|", flush=True)
        for tile in TILES:
            state_tiles(tile)
            diff = max(((a - b).norm() / b.norm()).item() for a, b in zip(step(), ref))
            ms = kernel_ms(step)
            print(f"| {T} | {tile} | {ms.get('gla_state_kernel', 0.0):.3f} | {sum(ms.values()):.3f} | {diff:.1e} |",
                  flush=True)  # fmt: skip
            rows.append({"T": T, "setting": {"state_tile": tile}, "ms": ms, "grad_diff": diff})
        state_tiles(None)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "screen-gla-launch.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
