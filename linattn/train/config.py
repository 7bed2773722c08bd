"""Training hyperparameters: one frozen dataclass, checked on construction and stored in every checkpoint."""

from __future__ import annotations

import math
from dataclasses import dataclass

AMP_MODES = ("auto", "bf16", "off")


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a training run's result; a checkpoint resumes only under an equal config.

    A step is one optimizer update. `batch_size` is per process: `train_batch` must return that many rows, so a
    run of `W` processes (DDP) updates on `W * batch_size` examples per step.

    Example: `TrainConfig(steps=200, warmup_steps=20, lr=1e-3, early_stop_metric="acc")`.
    """

    steps: int = 3000  # optimizer updates
    batch_size: int = 64  # rows of each batch, per process
    lr: float = 3e-4  # peak learning rate, reached at the end of warmup
    weight_decay: float = 0.01  # AdamW decoupled decay of ≥2-D parameters (embeddings included); 1-D ones get none
    betas: tuple[float, float] = (0.9, 0.999)  # AdamW moment decays
    warmup_steps: int = 300  # linear warmup from 0 to `lr`; at most `steps`
    min_lr_ratio: float = 0.0  # cosine decays to lr * min_lr_ratio at `steps`
    clip: float = 1.0  # max global gradient norm; 0 disables clipping
    eval_every: int = 500  # steps between evals; 0 = only at the end
    early_stop_metric: str | None = None  # e.g. "acc" (higher is better); also picks the best eval
    early_stop_threshold: float = 1.0  # stop once eval[early_stop_metric] >= this
    patience: int = 0  # >0: also stop after this many evals in a row without a new best of the metric
    amp: str = "auto"  # "auto" = bf16 autocast on CUDA, off elsewhere; "bf16" | "off"
    seed: int = 42  # data generator seed (rank r of a DDP run uses seed + r); model init is the caller's
    log_every: int = 50  # steps between metrics-log lines (mean training loss over those steps)
    checkpoint_every: int = 500  # steps between checkpoints; 0 = only at the end (there is always one at the end)

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", tuple(self.betas))  # a list would not compare equal to a stored tuple
        integers = ("steps", "batch_size", "log_every", "warmup_steps", "eval_every", "patience", "checkpoint_every")
        for name in (*integers, "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"TrainConfig.{name} must be an int, got {value!r}")
        reals = {n: getattr(self, n) for n in ("lr", "weight_decay", "clip", "min_lr_ratio", "early_stop_threshold")}
        reals |= {f"betas[{i}]": b for i, b in enumerate(self.betas)}
        for name, value in reals.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"TrainConfig.{name} must be a finite number, got {value!r}")
        for name in ("steps", "batch_size", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "eval_every", "patience", "checkpoint_every", "weight_decay", "clip"):
            if getattr(self, name) < 0:
                raise ValueError(f"TrainConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.warmup_steps > self.steps:
            raise ValueError(f"TrainConfig.warmup_steps must be <= steps={self.steps}, got {self.warmup_steps}")
        if not self.lr > 0:
            raise ValueError(f"TrainConfig.lr must be > 0, got {self.lr}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"TrainConfig.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"TrainConfig.betas must be two numbers in [0, 1), got {self.betas}")
        if self.amp not in AMP_MODES:
            raise ValueError(f"TrainConfig.amp must be one of {AMP_MODES}, got {self.amp!r}")
        if self.patience > 0 and self.early_stop_metric is None:
            raise ValueError(f"TrainConfig.patience={self.patience} needs an early_stop_metric to watch, got None")
