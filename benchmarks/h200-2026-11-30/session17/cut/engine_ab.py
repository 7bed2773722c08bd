"""Scratch A/B: ours triton two-key and GDN, forward + backward median ms and peak GiB, bf16, B=1, H=16, K=V=128."""
import json, os, sys
import torch
from linattn.bench.ops import Shape, _ours
from linattn.bench.timing import forward_backward, median_ms
rows = []
for T in [int(x) for x in os.environ.get("TS", "8192,16384,32768,65536").split(",")]:
    for two_key in (True, False):
        fn, leaves = _ours("triton", two_key)(Shape(1, T), torch.bfloat16)
        step = forward_backward(fn, leaves)
        step(); torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        step(); torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() / 2**30
        r = dict(T=T, two_key=two_key, fwdbwd=median_ms(step, "cuda"), peak_gib=peak)
        rows.append(r); print(sys.argv[1], r, flush=True)
        del fn, leaves, step
        torch.cuda.empty_cache()
json.dump(rows, open(sys.argv[2], "w"))
