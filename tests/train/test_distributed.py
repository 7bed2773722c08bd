"""DDP and FSDP on CPU: two gloo processes (as torchrun would start them) train a toy model, crash, resume, and
must end with identical parameters on both ranks and equal to an uninterrupted run's; the sharded run ends where the
DDP one does (up to the order of the gradient reduction)."""

from __future__ import annotations

import faulthandler
import json
import os
import socket
import sys
from functools import partial

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

from linattn.tasks import Batch
from linattn.train import TrainConfig, train

V, T, B, WORLD = 16, 8, 8, 2


class Crash(Exception):
    """Stands for a run killed mid-way."""


def _model(seed: int) -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(nn.Embedding(V, 16), nn.Dropout(0.1), nn.Linear(16, V))


def _worker(rank: int, port: int, root: str) -> None:
    faulthandler.enable()  # a native abort prints every thread's Python stack
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD)
    )
    torch.set_num_threads(1)
    cfg = TrainConfig(steps=12, batch_size=B, lr=1e-2, warmup_steps=2, log_every=1, eval_every=4, checkpoint_every=4)
    first_batch = {}

    def copy_batch(step: int, gen: torch.Generator, crash_step: int | None = None) -> Batch:
        if step == crash_step:
            raise Crash
        x = torch.randint(0, V, (B, T), generator=gen)
        first_batch.setdefault(step, x)
        return Batch(x, x.clone())

    def evaluate(model: nn.Module) -> dict[str, float]:
        x = torch.arange(V).repeat(2, 1)
        return {"acc": (model(x).argmax(-1) == x).float().mean().item()}

    for sharding in ("ddp", "fsdp"):
        run = partial(train, progress=False, sharding=sharding)
        straight = _model(seed=rank)  # different inits: every rank must start from rank 0's
        torch.manual_seed(rank)
        run(straight, cfg, copy_batch, evaluate, f"{root}/{sharding}/straight")
        torch.manual_seed(rank)
        try:  # after step 6; the last checkpoint is step 4
            crashing = partial(copy_batch, crash_step=6)
            run(_model(seed=rank), cfg, crashing, evaluate, f"{root}/{sharding}/resumed")
        except Crash:
            pass
        resumed = _model(seed=10 + rank)
        run(resumed, cfg, copy_batch, evaluate, f"{root}/{sharding}/resumed")
        states = {"straight": _whole(straight), "resumed": _whole(resumed), "batch": first_batch[0]}
        torch.save(states, f"{root}/{sharding}/rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()
    # DDP and FSDP keep the gloo group, and its worker threads, alive past `destroy_process_group`; one of those
    # threads that takes the GIL while the interpreter shuts down aborts the process ("terminate called without an
    # active exception", seen once in CI). The results are on disk: leave without the interpreter's teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _whole(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter, whole, on every rank (a sharded model's gathered)."""
    options = StateDictOptions(full_state_dict=True)
    return {name: t.clone() for name, t in get_model_state_dict(model, options=options).items()}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_gloo_ranks_agree_and_resume_bit_identically(tmp_path):
    mp.spawn(_worker, args=(_free_port(), str(tmp_path)), nprocs=WORLD)
    for sharding in ("ddp", "fsdp"):
        ranks = [torch.load(tmp_path / sharding / f"rank{r}.pt") for r in range(WORLD)]
        for run in ("straight", "resumed"):
            for name, p0 in ranks[0][run].items():
                assert torch.equal(p0, ranks[1][run][name]), f"{sharding} {run}: {name} differs between ranks"
        for name, p0 in ranks[0]["straight"].items():
            assert torch.equal(p0, ranks[0]["resumed"][name]), f"{sharding}: {name} differs after resuming"
        assert not torch.equal(ranks[0]["batch"], ranks[1]["batch"]), "each rank draws its own data"

        for run in ("straight", "resumed"):  # rank 0 alone writes: one line per step and event
            log = [json.loads(line) for line in (tmp_path / sharding / run / "metrics.jsonl").read_text().splitlines()]
            assert [r["step"] for r in log if "loss" in r] == list(range(1, 13))
            assert [r["step"] for r in log if "eval" in r] == [4, 8, 12]
    ddp, fsdp = (torch.load(tmp_path / s / "rank0.pt")["straight"] for s in ("ddp", "fsdp"))
    for name, p in ddp.items():
        assert torch.allclose(fsdp[name], p, rtol=1e-5, atol=1e-6), f"{name}: FSDP ended away from DDP"
    checkpoint = torch.load(tmp_path / "fsdp" / "straight" / "checkpoint.pt", weights_only=True)
    assert checkpoint["sharding"] == "fsdp" and set(checkpoint["model"]) == set(ddp)  # whole, by parameter name
