"""One writer a run folder: `folder_lock(out_dir)` holds an exclusive lock on `out_dir/.lock` while a training run
writes there. A second process training into the same folder would interleave its metrics log with the first's and
save the mixture into its checkpoint; it gets a `RunFolderLocked` error naming the holder instead.

The lock is the operating system's (`fcntl.flock`): it is released when its holder ends, however it ends, so a
killed run leaves no stale lock behind. The lock file keeps the holder's description for the error message.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".lock"

try:
    import fcntl
except ImportError:  # not a POSIX system: no lock (the ops' kernels need Linux anyway)
    fcntl = None


class RunFolderLocked(RuntimeError):
    """Another process is training into this run folder."""


@contextmanager
def folder_lock(folder: str | os.PathLike) -> Iterator[Path]:
    """Hold the lock of `folder` (created if missing) for the `with` block; `RunFolderLocked` if another process
    holds it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    with open(path, "a+") as f:
        if fcntl is not None:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                holder = f.read().strip() or "another process"
                raise RunFolderLocked(
                    f"{folder} is being written by {holder} (lock {path}); wait for it to end, or train into "
                    "another folder"
                ) from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        f.flush()
        try:
            yield path
        finally:
            f.seek(0)
            f.truncate()  # the lock itself goes with the file's closing
