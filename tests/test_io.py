"""Results are written atomically, with the mode a plain `open` gives a new file, and never silently over an
existing one when the caller says so."""

from __future__ import annotations

import os
import stat

import pytest

from linattn.io import atomic_writer, write_atomic


def test_written_files_are_readable_by_others(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_atomic(tmp_path / "a" / "result.json", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 and path.read_text() == "{}"
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]  # no temporary file left behind


def test_overwrite_is_refused_when_asked(tmp_path):
    path = write_atomic(tmp_path / "table.md", b"first")
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        write_atomic(path, b"second", overwrite=False)
    assert path.read_bytes() == b"first"


def test_atomic_writer_shows_the_file_only_when_complete(tmp_path):
    path = tmp_path / "tokens.bin"
    with atomic_writer(path) as f:
        f.write(b"part one, ")
        assert not path.exists()
        f.write(b"part two")
    assert path.read_bytes() == b"part one, part two"
    with pytest.raises(RuntimeError), atomic_writer(path) as f:
        f.write(b"torn")
        raise RuntimeError("killed mid-way")
    assert path.read_bytes() == b"part one, part two" and [p.name for p in tmp_path.iterdir()] == ["tokens.bin"]


def test_an_older_dependency_than_linattn_needs_is_named(monkeypatch):
    """`require` refuses a release below `MINIMUM`, naming it and the extra that brings the right one."""
    from linattn.extras import require

    transformers = pytest.importorskip("transformers")

    assert require("transformers", "hf", "x") is transformers
    monkeypatch.setattr(transformers, "__version__", "5.17.0")
    with pytest.raises(ImportError, match=r"x needs transformers>=5.25, found 5.17.0: pip install 'linattn\[hf\]'"):
        require("transformers", "hf", "x")
