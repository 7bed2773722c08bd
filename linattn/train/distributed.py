"""Data-parallel training under `torchrun`: process-group setup, the DDP or FSDP wrapper, whole state dicts for
checkpoints, and the few collectives the trainer needs.

A run is distributed when `WORLD_SIZE > 1` (torchrun sets it, with `RANK`, `LOCAL_RANK`, `MASTER_ADDR` and
`MASTER_PORT`). On one process every helper returns at once and `torch.distributed` is never called.

Two ways to spread a run (`sharding`): `"ddp"` keeps a whole copy of the model and optimizer on every rank and
averages gradients (`DistributedDataParallel`); `"fsdp"` shards parameters, gradients and optimizer state over the
ranks (FSDP2, `torch.distributed.fsdp.fully_shard`: each block of `model.blocks`, then the whole model), for models
that do not fit one device. The update is the same either way (up to the order of the gradient reduction).
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


SHARDINGS = ("ddp", "fsdp")


def wrap_model(model: nn.Module, info: DistInfo, device: torch.device, sharding: str = "ddp") -> nn.Module:
    """The module to call in training: `model` in `DistributedDataParallel` (which averages gradients over ranks in
    `backward`), or (`"fsdp"`) `model` itself, sharded in place; `model` itself on one process. Every rank starts
    from rank 0's weights (DDP broadcasts them; before sharding they are broadcast here). A sharded model is called
    by every rank together, also after training."""
    if not info.enabled:
        return model
    if sharding == "ddp":
        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    for tensor in [*model.parameters(), *model.buffers()]:
        dist.broadcast(tensor.data, src=0)
    mesh = init_device_mesh(device.type, (info.world_size,))
    for block in getattr(model, "blocks", ()):  # the decoder LM's layers: one all-gather each in turn
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _fsdp(info: DistInfo, sharding: str) -> bool:
    return info.enabled and sharding == "fsdp"


def whole_state_dicts(model: nn.Module, optimizer: torch.optim.Optimizer, info: DistInfo, sharding: str):
    """`(model, optimizer)` state dicts, whole, for a checkpoint: rank 0's are complete (the sharded case is a
    collective: every rank calls it; the others get empty dicts). A sharded run's optimizer state is keyed by
    parameter names, so its checkpoint resumes sharded only."""
    if not _fsdp(info, sharding):
        return model.state_dict(), optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options), get_optimizer_state_dict(model, optimizer, options=options)


def load_optimizer_state(
    model: nn.Module, optimizer: torch.optim.Optimizer, state: dict, info: DistInfo, sharding: str
) -> None:
    """Load a whole optimizer state dict (`whole_state_dicts`'s) into this rank's optimizer (its shard of it)."""
    if not _fsdp(info, sharding):
        optimizer.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))


def local(x: torch.Tensor) -> torch.Tensor:
    """A plain tensor of `x`, which under FSDP may be a replicated `DTensor` (e.g. the clipped gradient norm)."""
    return x.full_tensor() if hasattr(x, "full_tensor") else x


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
