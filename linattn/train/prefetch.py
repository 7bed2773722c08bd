"""The next update's batch drawn on a worker thread while the device runs this update's step.

A small model's graphed step on a GPU takes a few milliseconds, about what drawing a synthetic task's batch on the
host takes (`python -m linattn.bench batches`): drawn one after the other, each waits for the other. The worker
draws batch `s + 1` from the same generator, after batch `s` and before batch `s + 2`, so the batches are the ones
drawn without it, bit for bit. A checkpoint taken while batch `s + 1` is drawn ahead stores the generator's state
from before that draw (`rng_state`), so a run resumed at update `s + 1` draws it again.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from linattn.tasks.batch import Batch


class BatchPrefetch:
    """`train_batch(step, rng)` for the trainer, drawn one update ahead when `enabled` (on one worker thread).

    Usage in a loop: `batch = prefetch.get(step)`, launch the step, `prefetch.ahead(step + 1)` while the device
    works, and `prefetch.rng_state()` where the generator's state is saved. `train_batch` must draw from `rng` only
    (not from torch's global generator, which the main thread's dropout uses), as the trainer already requires."""

    def __init__(self, train_batch: Callable[[int, torch.Generator], Batch], rng: torch.Generator, enabled: bool):
        self.train_batch, self.rng = train_batch, rng
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="linattn-batch") if enabled else None
        self.pending: tuple[int, Future[Batch], torch.Tensor] | None = None  # (step, its batch, rng before it)

    def get(self, step: int) -> Batch:
        """The batch of update `step`: the one drawn ahead, or drawn now."""
        if self.pending is not None:
            ahead, future, _ = self.pending
            self.pending = None
            if ahead == step:
                return future.result()
            raise RuntimeError(f"BatchPrefetch: drew update {ahead} ahead, asked for {step}")
        return self.train_batch(step, self.rng)

    def ahead(self, step: int) -> None:
        """Start drawing the batch of update `step` (the next one) on the worker; nothing when not enabled."""
        if self.pool is not None:
            state = self.rng.get_state()
            self.pending = (step, self.pool.submit(self.train_batch, step, self.rng), state)

    def rng_state(self) -> torch.Tensor:
        """The generator's state after the batches handed out, before any drawn ahead."""
        return self.rng.get_state() if self.pending is None else self.pending[2]

    def close(self) -> None:
        """Wait for a batch drawn ahead (the run ended without it) and stop the worker."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)
        self.pending = None
