"""Timing one call on its device: the median milliseconds per call, and the forward + backward step to time.

Every benchmark and the speed diagnostic time through these two functions, so a number from one is comparable with
a number from another.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.benchmark import Timer


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
