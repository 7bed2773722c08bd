"""Training: `train(model, TrainConfig(...), train_batch, evaluate, out_dir)` runs AdamW with warmup + cosine,
clipping, bf16 autocast on CUDA, evals with early stopping, a JSONL metrics log and resumable checkpoints; under
torchrun it trains data-parallel (DDP)."""

from linattn.train.config import TrainConfig
from linattn.train.schedule import warmup_cosine
from linattn.train.trainer import (
    TrainResult,
    lm_cross_entropy,
    supervised_cross_entropy,
    supervised_logits,
    token_cross_entropy,
    train,
)

__all__ = [
    "TrainConfig",
    "TrainResult",
    "lm_cross_entropy",
    "supervised_cross_entropy",
    "supervised_logits",
    "token_cross_entropy",
    "train",
    "warmup_cosine",
]
