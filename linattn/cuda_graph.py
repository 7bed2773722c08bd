"""Capturing a step as a CUDA graph, as the training step (`linattn.train.graph`) and the decoding step
(`linattn.models.decode_graph`) are: warm-up calls first, then one capture, the random numbers both drew given back."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

WARMUP_CALLS = 2  # eager calls before a capture: Triton compiles and autotunes, cuBLAS sets up its workspace

Out = TypeVar("Out")


def capture(
    warm_up: Callable[[], object], step: Callable[[], Out], device: torch.device, instead: str
) -> tuple[torch.cuda.CUDAGraph, Out]:
    """`(graph, out)`: `warm_up()` called `WARMUP_CALLS` times on a side stream, then `step()` captured into `graph`
    (`out` its result, tensors the graph rewrites at every replay), both on `device`. The generator's state is put
    back as it was, so a replay draws from where eager code would. A failed capture is said with what causes one and
    what to do `instead`."""
    rng = torch.cuda.get_rng_state(device)
    with torch.cuda.device(device):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_CALLS):
                warm_up()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                out = step()
        except RuntimeError as e:
            raise RuntimeError(
                f"a CUDA graph could not capture the step (an op read a device value on the host, or copied one from "
                f"it); {instead}. {e}"
            ) from e
    torch.cuda.set_rng_state(rng, device)
    return graph, out
