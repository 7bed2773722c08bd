"""Writing results safely: atomically (write a temporary file, then rename) and never over an existing file
unless asked."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike, data: str | bytes, *, overwrite: bool = True) -> Path:
    """Write `data` to `path` so that readers see either the old file or the whole new one, never a part.

    With `overwrite=False` an existing file is an error (`FileExistsError`) rather than silently replaced.
    """
    path = Path(path)
    if not overwrite and path.exists():
        raise FileExistsError(f"{path} exists; refusing to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates the file 0600: give it the mode a plain `open` would (0644 under the usual umask)
        os.fchmod(fd, _new_file_mode())
        with os.fdopen(fd, mode) as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _new_file_mode() -> int:
    """`0o666` less the process's umask, the mode `open(path, "w")` gives a new file."""
    umask = os.umask(0o022)  # reading the umask means setting it: set it back at once
    os.umask(umask)
    return 0o666 & ~umask


def save_figure(fig, path: str | os.PathLike, *, dpi: int = 120) -> Path:
    """Render a matplotlib figure to PNG in memory, then `write_atomic` it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return write_atomic(path, buffer.getvalue())
