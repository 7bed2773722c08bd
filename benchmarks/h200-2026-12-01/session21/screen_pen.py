"""Session 21 scratch: VLA's group penalties in one Triton launch (group_penalties.py) against PyTorch's path
(chunk.group_penalties), alone and inside `vla`'s forward and forward + backward (bf16, B = 1, H = 16, K = V), each
pair side by side in one process. Prints a table, writes JSON to argv[1]. DEV=cpu with TRITON_INTERPRET=1: dry run."""
import importlib
import json
import os
import sys

import torch

from linattn.bench.timing import forward_backward, median_ms
from linattn.experiments.vla_speed import CONTENDERS, SpeedConfig, inputs
from linattn.ops.vla.chunk import group_penalties
from linattn.ops.vla.group_penalties import triton_group_penalties

vla_triton = importlib.import_module("linattn.ops.vla.triton")  # `linattn.ops.vla` is also the op
DEV = os.environ.get("DEV", "cuda")
CASES = [(int(a), int(b)) for a, b in (c.split("x") for c in os.environ.get("CASES", "32x4096,128x4096,32x65536,128x65536").split(","))]
VARIANTS = {"pytorch": group_penalties, "triton": triton_group_penalties}
vla = next(c for c in CONTENDERS if c.name == "VLA triton")
rows = []
for K, T in CASES:
    x = inputs(SpeedConfig(Ts=(T,), head_dims=(K,), H=16, dtype="bfloat16"), T, K, DEV)
    u = x["u"].detach()
    want = group_penalties(u, 0.1, 512)
    for name, fn in VARIANTS.items():
        got = fn(u, 0.1, 512)
        err = ((got.double() - want.double()).norm() / want.double().norm()).item()
        vla_triton.triton_group_penalties = fn
        row = {"K": K, "T": T, "variant": name, "err": err, "alone_ms": median_ms(lambda: fn(u, 0.1, 512), DEV)}
        row["fwd_ms"] = median_ms(torch.no_grad()(lambda: vla.run(x)), DEV)
        if T > 4096:
            row["fwdbwd_ms"] = median_ms(forward_backward(lambda: vla.run(x), list(x.values())), DEV)
        rows.append(row)
        print(row, flush=True)
with open(sys.argv[1] if len(sys.argv) > 1 else "/dev/null", "w") as f:
    json.dump(rows, f, indent=1)
