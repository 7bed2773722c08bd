"""Writing results safely: atomically (write a temporary file, then rename) and never over an existing file
unless asked."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO


def write_atomic(path: str | os.PathLike, data: str | bytes, *, overwrite: bool = True) -> Path:
    """Write `data` to `path` so that readers see either the old file or the whole new one, never a part.

    With `overwrite=False` an existing file is an error (`FileExistsError`) rather than silently replaced.
    """
    path = Path(path)
    if not overwrite and path.exists():
        raise FileExistsError(f"{path} exists; refusing to overwrite it")
    with atomic_writer(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return path


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """A file object whose content appears at `path` only when the `with` block ends without an error (a temporary
    file beside it, then a rename): for data written piece by piece, such as a tokenised corpus.

    Example: `with atomic_writer("tokens.bin") as f: f.write(chunk)`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates the file 0600: give it the mode a plain `open` would (0644 under the usual umask)
        os.fchmod(fd, _new_file_mode())
        with os.fdopen(fd, mode) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def give_default_modes(folder: str | os.PathLike) -> None:
    """Give `folder` (made private by `tempfile.mkdtemp`) and what is in it the modes a plain `mkdir` and `open`
    would (`0755` / `0644` under the usual umask): a library writing into it may make its files `0600` too."""
    umask = _umask()
    for path in [Path(folder), *Path(folder).rglob("*")]:
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)


def _new_file_mode() -> int:
    """`0o666` less the process's umask, the mode `open(path, "w")` gives a new file."""
    return 0o666 & ~_umask()


def _umask() -> int:
    umask = os.umask(0o022)  # reading the umask means setting it: set it back at once
    os.umask(umask)
    return umask


def check_replaceable(out: Path, *, force: bool, what: str, is_one: Callable[[Path], bool], name: str = "out") -> None:
    """`ValueError` unless `out` may be written: it is new or an empty folder, or (with `force`) `what` as `is_one`
    recognises it, never anything else, and never a folder that holds the current one."""
    if not out.exists():
        return
    if out.resolve() in (Path.cwd(), *Path.cwd().parents):  # the current folder, even empty, is never replaced
        raise ValueError(f"{name}: {out} holds the current folder: not replaced")
    if out.is_dir() and not any(out.iterdir()):
        return
    if not is_one(out):
        raise ValueError(f"{name}: {out} exists and is not {what}: not replaced")
    if not force:
        raise ValueError(f"{name}: {out} holds {what} already (--force replaces it)")


def save_figure(fig, path: str | os.PathLike, *, dpi: int = 120) -> Path:
    """Render a matplotlib figure to PNG in memory, then `write_atomic` it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return write_atomic(path, buffer.getvalue())
