"""Scratch: vla(backend="triton") forward (no grad) and forward + backward, median ms (do_bench), vla-speed's inputs."""
import json, sys
import torch
from linattn.bench.timing import forward_backward, median_ms
from linattn.experiments.vla_speed import SpeedConfig, _vla, inputs
rows = []
import os
for K in [int(x) for x in os.environ.get("KS", "32,128").split(",")]:
    for T in [int(x) for x in os.environ.get("TS", "4096,16384,65536").split(",")]:
        x = inputs(SpeedConfig(Ts=(T,), head_dims=(K,), H=16, dtype="bfloat16"), T, K, "cuda")
        fn = lambda: _vla(x, "triton")
        r = dict(K=K, T=T, fwd=median_ms(torch.no_grad()(fn), "cuda"), fwdbwd=median_ms(forward_backward(fn, list(x.values())), "cuda"))
        rows.append(r); print(sys.argv[1], r, flush=True)
json.dump(rows, open(sys.argv[2], "w"))
