"""Session 24 scratch: `verify --backend fla` on the quick matrix's bfloat16 cases, DeltaNet (fla's forward and
backward) first, each row printed as it completes (the whole matrix ran past 540 s with fla's autotuning and printed
nothing)."""

import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed

import torch

from linattn.bench import verify

if __name__ == "__main__":
    cases = [c for c in verify.fla_matrix(verify.quick_matrix()) if c.dtype == torch.bfloat16]
    cases.sort(key=lambda c: (c.gated, -c.K, c.T))
    print(len(cases), "cases", flush=True)
    rows = []
    with ProcessPoolExecutor(int(sys.argv[1]), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(verify._check_case, (c, "fla", "cuda")) for c in cases]
        for f in as_completed(futures):
            rows.append(f.result())
            print(verify.table([rows[-1]]).splitlines()[2], flush=True)
    print(verify.table(rows))
