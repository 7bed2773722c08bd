"""Data-parallel training under `torchrun`: process-group setup, the DDP wrapper and the few collectives the
trainer needs.

A run is distributed when `WORLD_SIZE > 1` (torchrun sets it, with `RANK`, `LOCAL_RANK`, `MASTER_ADDR` and
`MASTER_PORT`). On one process every helper returns at once and `torch.distributed` is never called.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

T = TypeVar("T")


@dataclass(frozen=True)
class DistInfo:
    """This process's place in the run: `rank` in `[0, world_size)`, and `local_rank` on its host."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the only process that writes files and shows progress."""
        return self.rank == 0


def env_info() -> DistInfo:
    """`DistInfo` from torchrun's environment variables; one process (`DistInfo()`) when `WORLD_SIZE` is unset or 1."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistInfo()
    missing = [name for name in ("RANK", "LOCAL_RANK") if name not in os.environ]
    if missing:
        raise RuntimeError(f"WORLD_SIZE={world_size} but {', '.join(missing)} unset; launch with torchrun")
    return DistInfo(int(os.environ["RANK"]), world_size, int(os.environ["LOCAL_RANK"]))


def init(device: str | torch.device) -> tuple[DistInfo, torch.device]:
    """Join the process group of a multi-process run (nccl on CUDA, gloo on CPU) unless already joined.

    Returns this process's `DistInfo` and its device: on CUDA each process takes `cuda:LOCAL_RANK`, whatever
    index `device` names. The caller may `torch.distributed.destroy_process_group()` when done.
    """
    info, device = env_info(), torch.device(device)
    if not info.enabled:
        return info, device
    if device.type == "cuda":
        device = torch.device("cuda", info.local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return info, device


def wrap_model(model: nn.Module, info: DistInfo, device: torch.device) -> nn.Module:
    """`model` in `DistributedDataParallel` (which averages gradients over ranks in `backward`); `model` itself
    on one process. Wrapping broadcasts rank 0's parameters, so every rank starts from the same weights."""
    if not info.enabled:
        return model
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def all_reduce_sum(x: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """`x` summed over ranks, in place."""
    if info.enabled:
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
    return x


def barrier(info: DistInfo) -> None:
    """Wait until every rank gets here (e.g. until rank 0 has written a checkpoint that others may read)."""
    if info.enabled:
        dist.barrier()


def gather_objects(obj: T, info: DistInfo) -> list[T]:
    """Every rank's `obj` (picklable), in rank order, on every rank."""
    if not info.enabled:
        return [obj]
    gathered: list = [None] * info.world_size
    dist.all_gather_object(gathered, obj)
    return gathered


def broadcast_from_main(obj: T, info: DistInfo) -> T:
    """Rank 0's `obj` (picklable) on every rank."""
    if not info.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]
