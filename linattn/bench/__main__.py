"""`python -m linattn.bench cpu [--T 2048] [--json FILE]`: benchmarks, printed as markdown tables."""

from __future__ import annotations

import argparse
import json
import sys

from linattn.bench import cpu
from linattn.bench.environment import describe
from linattn.io import write_atomic


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m linattn.bench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_cpu = sub.add_parser("cpu", help="chunk vs naive backend on the CPU, forward and forward+backward")
    p_cpu.add_argument("--T", type=int, default=2048, help="sequence length (default 2048)")
    p_cpu.add_argument("--H", type=int, default=4, help="heads (default 4)")
    p_cpu.add_argument("--K", type=int, default=64, help="head dim, keys and values (default 64)")
    p_cpu.add_argument("--min-run-time", type=float, default=2.0, help="seconds per measurement (default 2)")
    p_cpu.add_argument("--json", metavar="FILE", help="also write the rows and environment as JSON")
    args = parser.parse_args(argv)

    env = describe("cpu")
    print(f"# linattn CPU benchmark: B=1, H={args.H}, K=V={args.K}, T={args.T}, float32")
    print("# " + ", ".join(f"{k}: {v}" for k, v in env.items()))
    rows = cpu.run(T=args.T, H=args.H, K=args.K, V=args.K, min_run_time=args.min_run_time)
    print(cpu.table(rows))
    if args.json:
        shape = {"B": 1, "H": args.H, "K": args.K, "V": args.K, "T": args.T, "dtype": "float32"}
        write_atomic(args.json, json.dumps({"environment": env, "shape": shape, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
