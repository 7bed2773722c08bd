"""A text corpus from `FILE | DIR | GLOB`: its documents, each file's content hash, and the split by document.

- `FILE`: that file; `GLOB` (`data/**/*.txt`, recursive `**`): every file it matches, read as given (a matched
  folder is walked as a `DIR`); `DIR`: every file below it whose name ends in one of `DataConfig.extensions`,
  hidden files and folders (`.git`, …) left out.
- Each file is a document; a file longer than `DataConfig.max_doc_bytes` is cut at line breaks into documents of at
  most that many bytes (named `path#0`, `path#1`, …), so that a single book still has a validation part.
- A document's name is its path relative to the corpus root (the folder, the pattern's fixed leading folders, or
  the file's folder), so a corpus moved elsewhere splits the same way.
- Splits by document: ordered by the SHA-256 of their names, the first `ceil(val_fraction · N)` documents are
  `val`, the next `ceil(test_fraction · N)` `test`, the others `train`: deterministic, disjoint, and every split
  asked for has a document.
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import math
import os
from dataclasses import dataclass
from pathlib import Path

from linattn.data.config import DataConfig
from linattn.extras import tqdm

SPLITS = ("train", "val", "test")
_GLOB_MAGIC = "*?["


@dataclass(frozen=True)
class Document:
    """Bytes `[start, end)` of the file `path` (`size` bytes, content hash `sha256`), named `name`."""

    name: str
    path: Path
    start: int
    end: int
    size: int
    sha256: str

    def read(self) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(self.start)
            return f.read(self.end - self.start)

    def describe(self) -> dict:
        """What identifies the document's text: a cache made from another description is stale."""
        return {"name": self.name, "bytes": [self.start, self.end], "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True)
class Corpus:
    """The documents of `source` below `root`, in path order (a cut file's pieces in their order)."""

    source: str
    root: Path
    documents: tuple[Document, ...]

    @property
    def num_bytes(self) -> int:
        return sum(d.end - d.start for d in self.documents)

    def split(self, config: DataConfig) -> dict[str, list[Document]]:
        """The documents of each split, `{"train": [...], "val": [...], "test": [...]}`, each in path order."""
        return split_documents(self.documents, config.val_fraction, config.test_fraction, self.source)


def read_corpus(source: str | os.PathLike, config: DataConfig | None = None, *, progress: bool = False) -> Corpus:
    """List and hash the documents of `source` (a file, a folder or a glob pattern) under `config` (default
    `DataConfig()`); reads every file once.

    Example: `read_corpus("notes/", DataConfig(extensions=(".md",))).split(DataConfig())["val"]`.
    """
    source, config = str(source), config or DataConfig()
    root, files = find_files(source, config.extensions)
    documents = []
    total = sum(f.stat().st_size for f in files)
    with tqdm(total=total, desc="read corpus", unit="B", unit_scale=True, disable=not progress) as bar:
        for path in files:
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            name = path.relative_to(root).as_posix()
            cuts = cut_points(data, config.max_doc_bytes)
            for i, (start, end) in enumerate(itertools.pairwise(cuts)):
                piece = name if len(cuts) == 2 else f"{name}#{i}"
                documents.append(Document(piece, path, start, end, len(data), digest))
            bar.update(len(data))
    return Corpus(source, root, tuple(sorted(documents, key=_file_order)))


def find_files(source: str, extensions: tuple[str, ...]) -> tuple[Path, list[Path]]:
    """`(root, files)`: the non-empty files of `source` (a file, a folder or a glob pattern), sorted."""
    path = Path(source)
    if path.is_file():
        root, files = path.parent, [path]
    elif path.is_dir():
        root, files = path, _walk(path, extensions)
    elif any(c in source for c in _GLOB_MAGIC):
        parts = Path(source).parts
        cut = next(i for i, part in enumerate(parts) if any(c in part for c in _GLOB_MAGIC))
        root = Path(*parts[:cut]) if cut else Path(".")
        files = []
        for match in map(Path, glob.glob(source, recursive=True)):
            files += _walk(match, extensions) if match.is_dir() else [match] if match.is_file() else []
    else:
        raise ValueError(f"data: {source!r} is no file, folder or glob pattern that exists")
    files = sorted({f for f in files if f.stat().st_size > 0})
    if not files:
        endings = ", ".join(extensions)
        raise ValueError(f"data: no non-empty text file in {source!r} (a folder is read for files ending in {endings})")
    return root, files


def _walk(folder: Path, extensions: tuple[str, ...]) -> list[Path]:
    """The files below `folder` with one of `extensions`, hidden files and folders left out."""
    endings = tuple(e.lower() for e in extensions)
    files = []
    for here, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        files += [Path(here, n) for n in names if not n.startswith(".") and n.lower().endswith(endings)]
    return files


def cut_points(data: bytes, max_bytes: int) -> list[int]:
    """Offsets `[0, …, len(data)]` that cut `data` into pieces of at most `max_bytes`, each ending at its last line
    break (or, in a piece without one, before a UTF-8 character that does not fit).

    Example: `cut_points(b"ab\\ncd\\nef", 4) == [0, 3, 6, 8]`."""
    cuts, start = [0], 0
    while len(data) - start > max_bytes:
        end = data.rfind(b"\n", start, start + max_bytes) + 1
        if end <= start:  # no line break: do not split a multi-byte character
            end = start + max_bytes
            while end > start + 1 and data[end] & 0xC0 == 0x80:
                end -= 1
        cuts.append(end)
        start = end
    cuts.append(len(data))
    return cuts


def split_documents(
    documents: tuple[Document, ...] | list[Document], val_fraction: float, test_fraction: float, source: str = ""
) -> dict[str, list[Document]]:
    """Split by document (see the module's docstring); `ValueError` when a split asked for would get none."""
    n = len(documents)
    n_val = math.ceil(val_fraction * n)
    n_test = math.ceil(test_fraction * n)
    if n - n_val - n_test < 1:
        raise ValueError(
            f"data: {source!r} makes {n} document(s), too few for a train split beside {n_val} val and {n_test} test; "
            "give more text, a smaller max_doc_bytes (--set max_doc_bytes=…) or smaller fractions"
        )
    order = sorted(documents, key=lambda d: (hashlib.sha256(d.name.encode()).digest(), d.name))
    parts = {"val": order[:n_val], "test": order[n_val : n_val + n_test], "train": order[n_val + n_test :]}
    return {split: sorted(parts[split], key=_file_order) for split in SPLITS}


def _file_order(document: Document) -> tuple[Path, int]:
    """Files in path order, the pieces of one in their order in it."""
    return document.path, document.start
