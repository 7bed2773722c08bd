"""Timing one call on its device: the median milliseconds per call, the forward + backward step to time, and the
device's own time of a call by kernel.

Every benchmark and the speed diagnostic time through these functions, so a number from one is comparable with a
number from another.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile


def median_ms(fn: Callable[[], object], device: torch.device | str, *, min_run_time: float = 2.0) -> float:
    """Median milliseconds per call of `fn` on `device`.

    CUDA: `triton.testing.do_bench` (its own warm-up, synchronisation and L2 flush; `min_run_time` is not used).
    CPU: one warm-up call, then `torch.utils.benchmark.Timer.blocked_autorange` for at least `min_run_time` seconds,
    on all of torch's threads (Timer's default is one). A call slower than `min_run_time` is timed once more after
    Timer's own calibration call, so a slow `fn` costs about three calls.
    """
    if torch.device(device).type == "cuda":
        from triton.testing import do_bench

        return do_bench(fn, return_mode="median")
    # imported here: `torch.utils.benchmark` imports `torch.utils.cpp_extension`, which on a machine without CUDA
    # warns "No CUDA runtime is found" (with a CUDA build of torch) at every command that imports this module
    from torch.utils.benchmark import Timer

    fn()
    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return 1e3 * timer.blocked_autorange(min_run_time=min_run_time).median


def forward_backward(fn: Callable[[], torch.Tensor], leaves: list[torch.Tensor]) -> Callable[[], None]:
    """A step to time: clear the gradients of `leaves`, call `fn`, back-propagate a fixed random cotangent of its
    output (drawn once here, from one call of `fn`)."""
    cotangent = torch.randn_like(fn())

    def step() -> None:
        for x in leaves:
            x.grad = None
        fn().backward(cotangent)

    return step


def kernel_times(fn: Callable[[], object], device: torch.device | str, repeat: int = 5) -> tuple[float, list[dict]]:
    """`(wall_ms, rows)` of `repeat` calls of `fn` under `torch.profiler` (after the caller's warm-up): the wall time
    per call, and `rows` = `{name, calls, ms}` per kernel (CUDA) or operator (CPU), its calls and self time per call
    of `fn`, largest first. On CUDA the rows' sum is the device's busy time per call: with the host's launches,
    Python and allocations left out, where the wall time is above it the host bounds the call."""
    cuda = torch.device(device).type == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
    on_device = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
    totals, calls = defaultdict(float), defaultdict(int)
    for e in prof.events():
        if e.device_type == on_device:
            totals[e.name] += e.self_device_time_total if cuda else e.self_cpu_time_total
            calls[e.name] += 1
    rows = [{"name": n, "calls": calls[n] / repeat, "ms": us / repeat / 1e3} for n, us in totals.items()]
    rows.sort(key=lambda r: -r["ms"])
    return 1e3 * wall / repeat, rows
