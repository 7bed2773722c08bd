"""Checkpoints of a training run: one file written atomically, read back on CPU with `weights_only=True`.

A checkpoint is a dict of
- `config`: `dataclasses.asdict(TrainConfig)`; resuming under another config is an error (`check_config`);
- `model`, `optimizer`, `scheduler`: their state dicts, whole (the model's unwrapped from DDP, gathered from the
  ranks under FSDP, whose optimizer state is keyed by parameter names);
- `sharding`: `"ddp"` or `"fsdp"` (`linattn.train.distributed`); a run resumes under the one that wrote it;
- `run`: the trainer's bookkeeping: `step` (updates done), `stop_reason`, `last_eval`, `best_eval`, `best_step`,
  `evals_since_best`, `wall_time_s`;
- `world_size` and `ranks`: one dict per process with its RNG states (`data_rng`, `torch_rng`, `cuda_rng` or
  None) and its partial logging window (`window_loss`, `window_steps`);
- `metrics_log`: the text of `metrics.jsonl` when it was written (a resumed run restores the log from it, then
  drops any later lines).
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import zipfile
from pathlib import Path

import torch

from linattn.io import write_atomic
from linattn.train.config import TrainConfig

CHECKPOINT_NAME = "checkpoint.pt"


def save_checkpoint(path: str | os.PathLike, checkpoint: dict) -> Path:
    """Write `checkpoint` to `path` atomically: a reader sees the previous checkpoint or this one, never a part."""
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    return write_atomic(path, buffer.getvalue())


def load_checkpoint(path: str | os.PathLike, *, mmap: bool = False) -> dict:
    """Read a checkpoint onto the CPU (tensors only, no arbitrary pickles); `load_state_dict` moves what it needs.
    `mmap`: map the tensors' storage instead of reading it (to look at `run` alone, a 46 MB file costs a few pages).
    A damaged file is a `ValueError` that names it."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except (EOFError, RuntimeError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError) as e:
        raise ValueError(
            f"{path}: not a readable checkpoint ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
            "remove it to train the run from its start"
        ) from e


def check_config(saved: dict, config: TrainConfig, path: str | os.PathLike) -> None:
    """Raise `ValueError` naming every field where `config` differs from the `saved` one of checkpoint `path`."""
    current = dataclasses.asdict(config)
    diffs = [
        f"{name}: checkpoint {_show(saved, name)}, now {_show(current, name)}"
        for name in sorted(saved.keys() | current.keys())
        if name not in saved or name not in current or saved[name] != current[name]
    ]
    if diffs:
        raise ValueError(
            f"cannot resume {path}: it was written under another TrainConfig ({'; '.join(diffs)}); "
            "resume with the same config or train into a new out_dir"
        )


def _show(fields: dict, name: str) -> str:
    return repr(fields[name]) if name in fields else "absent"
