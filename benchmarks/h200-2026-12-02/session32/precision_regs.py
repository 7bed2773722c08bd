"""Scratch (not part of the library): DESIGN §4 for `regs.patch`'s 16-bit score tiles, on a CPU.

    TRITON_INTERPRET=1 PYTHONPATH=.variants/regs:. python benchmarks/h200-2026-12-02/session32/precision_regs.py \
        [--K 32,64] [--T 1000,1500] [--seeds 3] [--off]

(`.variants/regs` built as `screen_regs.py` says.) CCQ's one-pass bfloat16 training call (no initial or final state,
at least `ONE_PASS_TOKENS` tokens) with the patch's `SCORES_16` on (`--off`: off), the H200's tf32 and bfloat16
rounding emulated in the interpreter (`tests/ops/triton/hopper_arithmetic.py`); per case, `verify.check`'s verdict
and each quantity's error over the naive bfloat16 recurrence's (DESIGN §4 allows 2).
"""

from __future__ import annotations

import argparse

import torch

from linattn.bench.verify import Case, check
from linattn.ops.ccq.triton import local_bwd, output
from tests.ops.triton.hopper_arithmetic import hopper_arithmetic


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--K", default="32,64")
    parser.add_argument("--T", default="1000,1500")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--off", action="store_true")
    args = parser.parse_args()
    assert hasattr(output, "SCORES_16"), "run with regs.patch's package first on PYTHONPATH"
    output.SCORES_16 = local_bwd.SCORES_16 = not args.off
    for K in map(int, args.K.split(",")):
        for T in map(int, args.T.split(",")):
            for seed in range(args.seeds):
                case = Case(T, K, K, torch.bfloat16, H=1, op="ccq", initial_state=False, final_state=False)
                with hopper_arithmetic():
                    row = check(case, "triton", torch.device("cpu"), seed=seed)
                ratios = {n: round(row[n] / row[f"{n}_naive"], 2) for n in row if f"{n}_naive" in row}
                print(f"K={K} T={T} seed={seed} ok={row['ok']} error / naive's: {ratios}", flush=True)


if __name__ == "__main__":
    main()
