"""Shared test fixtures: uninitialised memory is poisoned with NaN so that reading it fails loudly; `one_thread` for
tiny models. Without a GPU, Triton kernels run in Triton's interpreter (set before any kernel module is imported:
`triton.jit` reads it when a kernel is defined). Under pytest-xdist each worker keeps to its share of the cores."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# under pytest-xdist (`make test`: one worker a core) each worker takes its share of the cores, not all of them
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // _workers))


@pytest.fixture(autouse=True)
def poison_empty(monkeypatch):
    """`torch.empty` / `torch.empty_like` return NaN-filled float tensors during every test."""
    empty, empty_like = torch.empty, torch.empty_like

    def poisoned(x):
        return x.fill_(float("nan")) if x.is_floating_point() else x

    monkeypatch.setattr(torch, "empty", lambda *a, **k: poisoned(empty(*a, **k)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **k: poisoned(empty_like(*a, **k)))
    yield


@pytest.fixture
def one_thread():
    """Tiny models are too small for intra-op threads, which only spin against each other on a busy CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
