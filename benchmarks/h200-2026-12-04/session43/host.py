"""Where the host's time goes in a CCQ-GDN call (issue 5, goal 3 at 8K / 16K, K = 32, is host-bound).

python3 benchmarks/h200-2026-12-04/session43/host.py [OUT]
Prints, for GDN, CCQ alone and CCQ-GDN (vla_speed's inputs, bf16, B = 1, H = 16, K = 32):
- host ms a call (200 calls queued without a sync, at T = 1K where the GPU keeps up), and wall ms a call at 8K
  with a sync after each (as do_bench times);
- the cost of one Triton launch on this host (a trivial kernel with 2 and with 24 arguments);
- cProfile of 200 CCQ-GDN forward + backward calls (top functions by own time), into OUT/cprofile-*.txt.
"""

import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

from linattn.bench.timing import forward_backward
from linattn.experiments.vla_speed import SpeedConfig, _ccq_gdn, _gdn, inputs
from linattn.ops import ccq_query

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else ".")


def _ccq(x):
    return ccq_query(x["q"], x["k_unit"], x["beta"], g=x["g"], normalize_keys=False)[0]


def host_ms(fn, n=200):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return 1e3 * (t1 - t0) / n, 1e3 * (t2 - t0) / n


def synced_ms(fn, n=100):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return 1e3 * sorted(ts)[n // 2]


@triton.jit
def two_args(x, n):
    tl.store(x + tl.program_id(0), n)


@triton.jit
def many_args(
    x0,
    x1,
    x2,
    x3,
    x4,
    x5,
    x6,
    x7,
    x8,
    x9,
    x10,
    x11,
    n0,
    n1,
    n2,
    n3,
    n4,
    n5,
    K: tl.constexpr,
    BT: tl.constexpr,
    A: tl.constexpr,
    B: tl.constexpr,
    C: tl.constexpr,
    D: tl.constexpr,
):
    tl.store(x0 + tl.program_id(0), n0)


def launch_us():
    x = torch.zeros(1024, device="cuda")
    xs = [torch.zeros(1024, device="cuda") for _ in range(12)]
    out = {}
    for name, call in (
        ("2 args", lambda: two_args[(4,)](x, 1)),
        ("24 args", lambda: many_args[(4,)](*xs, 3, 4, 5, 6, 7, 8, K=32, BT=64, A=1, B=2, C=3, D=4)),
        ("torch.empty", lambda: torch.empty(16, 4, 4, device="cuda")),
    ):
        out[name] = 1e3 * host_ms(call, n=2000)[0]
    return out


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print("launch cost on this host (us):", {k: round(v, 1) for k, v in launch_us().items()})
    cfg = SpeedConfig(H=16, dtype="bfloat16")
    for T in (1024, 8192):
        x = inputs(cfg, T, 32, "cuda")
        leaves = list(x.values())
        for name, fn in (("GDN", _gdn), ("CCQ", _ccq), ("CCQ-GDN", _ccq_gdn)):
            f = lambda: fn(x)  # noqa: E731
            fwd = torch.no_grad()(f)
            step = forward_backward(f, leaves)
            hf, _ = host_ms(fwd)
            hb, _ = host_ms(step)
            print(
                f"T={T:5d} {name:8s} host fwd {hf:.3f} ms  fwd+bwd {hb:.3f} ms | synced fwd {synced_ms(fwd):.3f}"
                f"  fwd+bwd {synced_ms(step):.3f}"
            )
            if T == 1024 and name != "GDN":
                pr = cProfile.Profile()
                pr.enable()
                for _ in range(200):
                    step()
                torch.cuda.synchronize()
                pr.disable()
                s = io.StringIO()
                pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(45)
                s.write("\n\n")
                pstats.Stats(pr, stream=s).sort_stats("cumtime").print_stats(60)
                (OUT / f"cprofile-{name}.txt").write_text(s.getvalue())


main()
