"""`make demo`: the main job on a CPU, in minutes.

1. State-norm growth of linear attention, DeltaNet and VLA at op level up to 100K tokens (table + plot).
2. A quick MQAR capacity comparison on the VLA paper's TinyLM: every mixer of the paper's comparison (plus KLA,
   Gated DeltaNet and CCQ on GDN), n ∈ {4, 8}, 500 steps — our accuracy printed beside the paper's.

Run: `python -m linattn.demo [--T 100000] [--out demo_out] [--jobs 2]`. The full experiments are
`linattn run vla-mqar-capacity --protocol paper|fair` (a GPU makes them fast).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tqdm import tqdm

from linattn.bench.environment import describe
from linattn.experiments import state_norm
from linattn.experiments.mixers import parse_mixers
from linattn.experiments.registry import EXPERIMENTS
from linattn.io import write_atomic


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m linattn.demo", description=__doc__)
    parser.add_argument("--T", type=int, default=100_000, help="tokens (default 100000)")
    parser.add_argument("--out", default="demo_out", help="output folder (default demo_out/)")
    parser.add_argument("--jobs", type=int, default=2, help="MQAR trainings at a time (default 2)")
    parser.add_argument("--mixers", help="comma-separated subset of the MQAR comparison")
    args = parser.parse_args(argv)
    if args.T < 10:
        parser.error(f"--T: expected at least 10 tokens, got {args.T}")
    if args.jobs < 1:
        parser.error(f"--jobs: expected >= 1, got {args.jobs}")
    capacity = EXPERIMENTS["vla-mqar-capacity"]
    try:  # checked before the first part runs
        mixers = parse_mixers(args.mixers, capacity.mixers)
    except ValueError as e:
        parser.error(str(e))
    out = Path(args.out)

    config = state_norm.StateNormConfig(T=args.T)
    env = describe("cpu")
    print(f"State norm ‖S_t‖_F at op level up to t = {config.T:,} (H={config.H}, K=V={config.K}, float32)")
    print("# " + ", ".join(f"{k}: {v}" for k, v in env.items()))
    start = time.perf_counter()
    points = len(state_norm.measurement_points(config.T, config.points))
    with tqdm(total=points * len(state_norm.STREAMS), desc="state norm", unit="point") as bar:
        result = state_norm.run(
            config, progress=lambda stream, t: bar.set_postfix_str(f"{stream} t={t:,}") or bar.update()
        )
    print(f"done in {time.perf_counter() - start:.1f} s")
    text = state_norm.table(result)
    print()
    print(text)
    print()
    for stream, what in state_norm.STREAMS.items():
        slopes = ", ".join(f"{m} t^{result.slope(stream, m):.2f}" for m in state_norm.MIXERS)
        print(f"{what}: {slopes} over the last decade")
    print("The paper claims O(t) for linear attention and a plateau for VLA (Proposition 1): linear attention")
    print("grows as t only when keys and values share a mean direction (E[k vᵀ] ≠ 0), else as √t.")

    header = f"# State norm at op level\n\n{', '.join(f'{k}: {v}' for k, v in env.items())}\n\n"
    table_path = write_atomic(out / "state_norm.md", header + text + "\n")
    plot_path = out / "state_norm.png"
    state_norm.plot(result, plot_path)
    print(f"\nwrote {table_path} and {plot_path} (replacing earlier demo output)")

    print(f"\nQuick MQAR capacity (VLA format, TinyLM, n in {{4, 8}}, 500 steps at lr 3e-3, {args.jobs} jobs):")
    start = time.perf_counter()
    capacity.run(
        "paper",
        quick=True,
        mixers=mixers,
        device="cpu",
        jobs=args.jobs,
        root=out / "results",
        force=True,
        command="python -m linattn.demo",
    )
    print(
        f"done in {time.perf_counter() - start:.0f} s; the paper's numbers (in parentheses) come from 3000 steps at "
        "lr 3e-4 and all n up to 24: `linattn run vla-mqar-capacity` runs that protocol."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
