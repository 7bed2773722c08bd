"""Session 24 scratch: the host's cost of one Triton launch on the H200 (Triton 3.6), by path: `kernel[grid](...)`
(the JIT's binder, specialisation, cache key, then the C launcher), `linattn.ops.launch.FastLaunch`, the cached
`CompiledKernel` called with the bound arguments (skipping the binder and the key), and its C launcher alone with
the stream fetched once. The kernel does nothing measurable (one program, one store), so each path's time per call
is the host's. Twelve arguments (six tensors, four integers, two constexprs), as our engine's launches have.
Runs with `fast_launch.patch` applied (it adds `linattn/ops/launch.py`; not merged)."""

import json
import sys
import time

import torch
import triton
import triton.language as tl
from linattn.ops.launch import FastLaunch  # from fast_launch.patch
from triton import knobs


@triton.jit
def tiny(a, b, c, d, e, f, n1, n2, n3, n4, BLOCK: tl.constexpr, FLAG: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(a + offs)
    if FLAG:
        x += n1 + n2 + n3 + n4
    tl.store(f + offs, x)


def per_call_us(fn, calls=20000):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t) / calls * 1e6
    torch.cuda.synchronize()
    return host


ts = [torch.zeros(1024, device="cuda") for _ in range(6)]
args = (*ts, 7, 1024, 4096, 33, 128, True)
grid = (1,)
ck = tiny[grid](*args)
fast = FastLaunch(tiny)
stream = torch.cuda.current_stream().cuda_stream
rows = {
    "kernel[grid](...)": lambda: tiny[grid](*args),
    "FastLaunch(kernel)[grid](...) (linattn.ops.launch), constexprs by keyword": lambda: fast[grid](
        *args[:10], BLOCK=128, FLAG=True
    ),
    "CompiledKernel[grid](...)": lambda: ck[(1, 1, 1)](*args),
    "CompiledKernel.run, stream once": lambda: ck.run(
        1,
        1,
        1,
        stream,
        ck.function,
        ck.packed_metadata,
        None,
        knobs.runtime.launch_enter_hook,
        knobs.runtime.launch_exit_hook,
        *args,
    ),
    "torch.empty(1024) (for scale)": lambda: torch.empty(1024, device="cuda"),
    "x.add_(1) (a torch launch)": lambda: ts[0].add_(1),
}
out = {name: per_call_us(fn) for name, fn in rows.items()}
for name, us in out.items():
    print(f"| {name} | {us:.2f} µs |")
json.dump(out, open(sys.argv[1], "w"), indent=1)
