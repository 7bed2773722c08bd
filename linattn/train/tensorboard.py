"""An optional TensorBoard log of a training run: the metrics-log records as scalars (`tensorboard` package, the
`tensorboard` extra; without it there is no log, and `open_tensorboard` says so once)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


class TensorBoardLog:
    """`on_metrics` for `linattn.train.train`: `train/<name>` scalars from a training record, `eval/<name>` from an
    eval. The writer opens at the first record, purging the events a previous, interrupted invocation logged from
    that step on (a resumed run logs them again).

    Example: `log = open_tensorboard("run/tensorboard"); train(..., on_metrics=log); log.close()`.
    """

    def __init__(self, log_dir: str | os.PathLike, summary_writer: type):
        self.log_dir = Path(log_dir)
        self._summary_writer = summary_writer
        self._writer = None

    def __call__(self, record: dict) -> None:
        step = record["step"]
        if self._writer is None:
            self._writer = self._summary_writer(str(self.log_dir), purge_step=step)
        scalars = {f"eval/{k}": v for k, v in record.get("eval", {}).items()}
        scalars |= {f"train/{k}": v for k, v in record.items() if k not in ("step", "eval")}
        for name, value in scalars.items():
            self._writer.add_scalar(name, value, step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def open_tensorboard(log_dir: str | os.PathLike) -> TensorBoardLog | None:
    """A `TensorBoardLog` into `log_dir`, or None with one note on stderr when `tensorboard` is not installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        print("linattn: note: no TensorBoard log (pip install tensorboard); metrics.jsonl has the same numbers",
              file=sys.stderr)  # fmt: skip
        return None
    return TensorBoardLog(log_dir, SummaryWriter)
