"""CCQ's host time by part (issue 5, goal 3 at 8K / 16K): T = 1K, K = 32, bf16, B = 1, H = 16, vla_speed's inputs.

PYTHONPATH=. python3 benchmarks/h200-2026-12-04/session43/host_parts.py
Each row: host microseconds a call, 500 calls queued without a sync (the GPU keeps up at this T).
"""

import time

import torch

from linattn.experiments.vla_speed import SpeedConfig, inputs
from linattn.ops import ccq_query
from linattn.ops.ccq.triton.function import Options, ccq_query_triton
from linattn.ops.ccq.triton.local_bwd import local_bwd, rows_kept
from linattn.ops.ccq.triton.output import output_fwd
from linattn.ops.ccq.triton.state import state_bwd, state_fwd
from linattn.ops.delta_rule.triton.cumsum import chunk_layout


def host_us(fn, n=500):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return 1e6 * (t1 - t0) / n


class Noop(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, lam, g):
        return q.clone()

    @staticmethod
    def backward(ctx, dy):
        return dy, None, None, None


def main():
    x = inputs(SpeedConfig(H=16, dtype="bfloat16"), 1024, 32, "cuda")
    q, k, lam, g = x["q"], x["k_unit"], x["beta"], x["g"]
    qd, kd, lamd, gd = (t.detach() for t in (q, k, lam, g))
    dy = torch.randn_like(qd)
    layout = chunk_layout(1, 1024, None, q.device)
    rows = {}

    def api():
        return ccq_query(q, k, lam, g=g, normalize_keys=False)[0]

    rows["api fwd, no grad"] = host_us(torch.no_grad()(api))
    rows["ccq_query_triton fwd, no grad"] = host_us(
        torch.no_grad()(lambda: ccq_query_triton(qd, kd, lamd, gd, None, True, False, None))
    )
    rows["api fwd, grad (keeps)"] = host_us(api)

    def fb():
        for t in (q, k, lam, g):
            t.grad = None
        api().backward(dy)

    rows["api fwd+bwd"] = host_us(fb)
    y = api()
    rows["y.backward alone (retain_graph)"] = host_us(lambda: y.backward(dy, retain_graph=True))
    leaves = [t.detach().requires_grad_() for t in (qd, kd, lamd, gd)]

    def noop():
        for t in leaves:
            t.grad = None
        Noop.apply(*leaves).backward(dy)

    rows["no-op Function fwd+bwd (4 leaves, a clone)"] = host_us(noop)
    h, _ = state_fwd(kd, gd, None, False, layout, "tf32")
    rows["state_fwd (2 launches)"] = host_us(lambda: state_fwd(kd, gd, None, False, layout, "tf32"))
    rows["output_fwd keep (1 launch)"] = host_us(
        lambda: output_fwd(qd, kd, lamd, gd, h, True, layout, "tf32", keep=True)
    )
    _, read = output_fwd(qd, kd, lamd, gd, h, True, layout, "tf32", keep=True)
    rows["rows_kept (1 launch)"] = host_us(lambda: rows_kept(lamd, read, dy, True))
    r, _ = rows_kept(lamd, read, dy, True)
    rows["state_bwd (2 launches)"] = host_us(lambda: state_bwd(qd, dy, gd, r, None, False, layout, "tf32"))
    dh, _ = state_bwd(qd, dy, gd, r, None, False, layout, "tf32")
    rows["local_bwd (1 launch)"] = host_us(lambda: local_bwd(qd, kd, gd, h, dh, dy, r, layout, "tf32"))
    rows["chunk_layout"] = host_us(lambda: chunk_layout(1, 1024, None, q.device))
    rows["Options + 7 contiguous"] = host_us(
        lambda: (Options(True, False, None, True), [t.contiguous() for t in (q, k, lam, g, q, k, lam)])
    )
    for name, us in rows.items():
        print(f"{us:8.1f} us  {name}")


main()
