"""The optional TensorBoard log: scalars from metrics records, a resumed run's stale events purged, and one note
without the package."""

from __future__ import annotations

import sys
from typing import ClassVar

from linattn.train.tensorboard import TensorBoardLog, open_tensorboard


class FakeWriter:
    """Stands for `torch.utils.tensorboard.SummaryWriter`."""

    made: ClassVar[list] = []

    def __init__(self, log_dir, purge_step=None):
        self.log_dir, self.purge_step, self.scalars, self.closed = log_dir, purge_step, [], False
        FakeWriter.made.append(self)

    def add_scalar(self, name, value, step):
        self.scalars.append((name, value, step))

    def flush(self):
        pass

    def close(self):
        self.closed = True


def test_records_become_scalars_and_a_resumed_log_purges_from_its_first_step(tmp_path):
    FakeWriter.made.clear()
    log = TensorBoardLog(tmp_path / "tb", FakeWriter)
    log({"step": 60, "loss": 2.5, "lr": 1e-3})
    log({"step": 60, "eval": {"val_loss": 2.4}})
    log.close()
    (writer,) = FakeWriter.made
    assert writer.purge_step == 60 and writer.closed and writer.log_dir == str(tmp_path / "tb")
    assert writer.scalars == [("train/loss", 2.5, 60), ("train/lr", 1e-3, 60), ("eval/val_loss", 2.4, 60)]
    TensorBoardLog(tmp_path / "unused", FakeWriter).close()  # nothing logged: no writer made
    assert len(FakeWriter.made) == 1


def test_without_tensorboard_one_note_and_no_log(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails as when not installed
    assert open_tensorboard(tmp_path) is None
    assert capsys.readouterr().err.count("no TensorBoard log (pip install tensorboard)") == 1
