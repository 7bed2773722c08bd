"""How a text corpus becomes training data: which files, how documents are cut and split, the window length."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

# what a folder contributes: prose, markup and source files (a FILE or the files a GLOB matches are read as given)
TEXT_EXTENSIONS = (".txt", ".md", ".rst", ".py", ".c", ".h")


@dataclass(frozen=True)
class DataConfig:
    """The corpus side of a text training run.

    A document is a file, or a stretch of at most `max_doc_bytes` of a longer file cut at a line break (so that one
    large file still splits into train / val / test). Documents are split by a hash of their name: the first
    `ceil(val_fraction · N)` in hash order are `val`, the next `ceil(test_fraction · N)` `test`, the rest `train`.
    A batch is `batch_size` windows of `seq_len` tokens packed into one row; an eval reads at most `eval_tokens`
    tokens of `val`.

    Example: `DataConfig(extensions=(".md",), val_fraction=0.1, seq_len=512)`.
    """

    extensions: tuple[str, ...] = TEXT_EXTENSIONS  # file name endings read from a folder (case-insensitive)
    val_fraction: float = 0.05  # of the documents, for validation loss / perplexity
    test_fraction: float = 0.0  # of the documents, held out and not read by training (0: no test split)
    max_doc_bytes: int = 65536  # longer files are cut at line breaks into documents of at most this many bytes
    seq_len: int = 256  # T: tokens in a training window
    eval_tokens: int = 65536  # val tokens read by one eval (the first ones, in order)

    def __post_init__(self) -> None:
        extensions = (self.extensions,) if isinstance(self.extensions, str) else tuple(self.extensions)
        object.__setattr__(self, "extensions", extensions)  # a list (from JSON) would not compare equal
        if not extensions or not all(isinstance(e, str) and e.startswith(".") and len(e) > 1 for e in extensions):
            raise ValueError(f"DataConfig.extensions must be name endings such as '.txt', got {self.extensions!r}")
        for name in ("val_fraction", "test_fraction"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ValueError(f"DataConfig.{name} must be a fraction in [0, 1), got {value!r}")
        if not math.isfinite(self.val_fraction + self.test_fraction) or self.val_fraction + self.test_fraction >= 1:
            raise ValueError(
                f"DataConfig.val_fraction + test_fraction must leave documents to train on, got "
                f"{self.val_fraction} + {self.test_fraction}"
            )
        for name in ("max_doc_bytes", "seq_len", "eval_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"DataConfig.{name} must be a positive int, got {value!r}")

    def replace(self, **changes) -> DataConfig:
        return dataclasses.replace(self, **changes)
