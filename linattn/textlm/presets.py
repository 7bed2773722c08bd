"""Named recipes for training a language model on a text corpus: a model, its training and its data settings.

| preset | model (d_model × layers, heads, MLP) | window × batch | steps | tokens seen | meant for |
|---|---|---|---|---|---|
| `tiny` | 64 × 2, 2 heads, 256 | 128 × 8 | 500 | 0.5 M | a CPU: about a minute on two cores |
| `small` | 256 × 4, 4 heads, 1024 | 512 × 16 | 5,000 | 41 M | one GPU (or a long CPU run) |
| `medium` | 512 × 8, 8 heads, 2048 | 1024 × 32 | 20,000 | 655 M | one GPU |
| `large` | 1024 × 16, 16 heads, 4096 | 2048 × 32 | 50,000 | 3.3 B | several GPUs (torchrun) |

Every preset has transformer blocks (mixer, then a GELU MLP) and no position embeddings: the recurrent mixers carry
order through their state and short convolutions, and a model without learned positions reads contexts of any
length. The vocabulary size comes from the tokenizer. `batch_size` is per process.
"""

from __future__ import annotations

from dataclasses import dataclass

from linattn.data.config import DataConfig
from linattn.models.config import ModelConfig
from linattn.train.config import TrainConfig


@dataclass(frozen=True)
class TextPreset:
    model: ModelConfig
    train: TrainConfig
    data: DataConfig


def warmup_steps(steps: int) -> int:
    """Every preset's warmup: 5% of the steps (at least one), so that a run of any length also decays."""
    return max(1, steps // 20)


def _preset(d: int, layers: int, heads: int, seq_len: int, batch: int, steps: int, lr: float, **train) -> TextPreset:
    model = ModelConfig(
        d_model=d, n_layers=layers, n_heads=heads, mlp_hidden=4 * d, positions="none", max_seq_len=seq_len
    )
    train = TrainConfig(
        steps=steps, batch_size=batch, lr=lr, warmup_steps=warmup_steps(steps), min_lr_ratio=0.1, weight_decay=0.1,
        betas=(0.9, 0.95), **train,
    )  # fmt: skip
    return TextPreset(model, train, DataConfig(seq_len=seq_len, eval_tokens=max(8192, 16 * seq_len * batch)))


PRESETS: dict[str, TextPreset] = {
    "tiny": _preset(64, 2, 2, 128, 8, 500, 3e-3, eval_every=100, log_every=10, checkpoint_every=100),
    "small": _preset(256, 4, 4, 512, 16, 5000, 1e-3, eval_every=500, log_every=50, checkpoint_every=500),
    "medium": _preset(512, 8, 8, 1024, 32, 20000, 6e-4, eval_every=1000, log_every=50, checkpoint_every=1000),
    "large": _preset(1024, 16, 16, 2048, 32, 50000, 3e-4, eval_every=2000, log_every=100, checkpoint_every=2000),
}


def text_preset(name: str) -> TextPreset:
    """A preset by name (`PRESETS`)."""
    if name not in PRESETS:
        raise ValueError(f"preset: unknown preset {name!r}; expected one of {list(PRESETS)}")
    return PRESETS[name]
