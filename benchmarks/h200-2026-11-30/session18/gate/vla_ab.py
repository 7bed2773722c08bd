"""Scratch: vla(backend="triton") forward and forward + backward, median ms (do_bench) and the fwd+bwd peak GiB,
vla-speed's inputs, bf16, B = 1, H = 16."""
import json, os, sys
import torch
from linattn.bench.timing import forward_backward, median_ms
from linattn.experiments.vla_speed import SpeedConfig, _vla, inputs
rows = []
for K in [int(x) for x in os.environ.get("KS", "128").split(",")]:
    for T in [int(x) for x in os.environ.get("TS", "16384,65536").split(",")]:
        x = inputs(SpeedConfig(Ts=(T,), head_dims=(K,), H=16, dtype="bfloat16"), T, K, "cuda")
        fn = lambda: _vla(x, "triton")
        step = forward_backward(fn, list(x.values()))
        step(); torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
        step(); torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() / 2**30
        r = dict(K=K, T=T, fwd=median_ms(torch.no_grad()(fn), "cuda"), fwdbwd=median_ms(step, "cuda"), peak_gib=peak)
        rows.append(r); print(sys.argv[1], r, flush=True)
        del x, fn, step; torch.cuda.empty_cache()
json.dump(rows, open(sys.argv[2], "w"))
