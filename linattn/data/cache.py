"""A split tokenised once into a memory-mapped token file, reused while its corpus and tokenizer stay the same.

Files in the cache folder, per split (`train`, `val`, `test`):
- `<split>.bin`: the split's documents' token ids back to back (each followed by the end-of-document id when the
  tokenizer has one), `uint16` (vocabularies up to 65,536) or `uint32`, native byte order, no header;
- `<split>.json`: the index: `format`, `tokenizer` (its fingerprint: `"bytes"` or the SHA-256 of its JSON file),
  `dtype`, `tokens`, `documents` (each one's name, byte range, file size and file SHA-256) and `offsets` (document
  `d` is tokens `[offsets[d], offsets[d + 1])`).

The split is tokenised again when the index is missing or describes other documents (a file added, removed or
changed; other split fractions) or another tokenizer, or the token file's size disagrees. Both files are written
atomically, the index last (and removed first), so a crash leaves the cache stale, never wrong.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from linattn.data.corpus import Document
from linattn.data.tokenizer import Tokenizer
from linattn.extras import require, tqdm
from linattn.io import atomic_writer, write_atomic

np = require("numpy", "text", "linattn.data")

FORMAT = 1
_GROUP_BYTES = 8 << 20  # text handed to the tokenizer at once (its threads split it by document)


@dataclass(frozen=True)
class TokenSplit:
    """`tokens: [N]` (a read-only memory map, empty for an empty split) and `offsets: [D + 1]` int64, document `d`
    being `tokens[offsets[d]:offsets[d + 1]]`."""

    name: str
    tokens: np.ndarray
    offsets: np.ndarray

    @property
    def num_documents(self) -> int:
        return len(self.offsets) - 1


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype of the cache that holds ids `< vocab_size`."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def cached_split(
    cache_dir: str | os.PathLike,
    split: str,
    documents: list[Document],
    tokenizer: Tokenizer,
    *,
    progress: bool = False,
) -> TokenSplit:
    """The tokens of `documents` (one split of a corpus) from `cache_dir`, tokenised first if the cache is stale.

    Example: `cached_split("run/cache", "val", corpus.split(config)["val"], ByteTokenizer()).tokens[:10]`.
    """
    cache_dir = Path(cache_dir)
    index_path, bin_path = cache_dir / f"{split}.json", cache_dir / f"{split}.bin"
    dtype = token_dtype(tokenizer.vocab_size)
    described = [d.describe() for d in documents]
    index = _read_index(index_path)
    current = (
        index is not None
        and index.get("format") == FORMAT
        and index.get("tokenizer") == tokenizer.fingerprint
        and index.get("dtype") == dtype.name
        and index.get("documents") == described
        and bin_path.is_file()
        and bin_path.stat().st_size == index["tokens"] * dtype.itemsize
    )
    if not current:
        _tokenise(index_path, bin_path, split, documents, described, tokenizer, dtype, progress)
    return open_split(cache_dir, split)


def open_split(cache_dir: str | os.PathLike, split: str) -> TokenSplit:
    """The cached tokens of `split` as they are, unchecked: for the other processes of a run once its first has
    made the cache current (`cached_split`)."""
    index_path, bin_path = Path(cache_dir) / f"{split}.json", Path(cache_dir) / f"{split}.bin"
    index = _read_index(index_path)
    if index is None:
        raise ValueError(f"{index_path}: no index of tokenised text")
    offsets = np.asarray(index["offsets"], dtype=np.int64)
    dtype = np.dtype(index["dtype"])
    tokens = np.memmap(bin_path, dtype=dtype, mode="r") if index["tokens"] else np.zeros(0, dtype=dtype)
    return TokenSplit(split, tokens, offsets)


def _read_index(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # missing or torn: tokenise again
        return None


def _tokenise(index_path, bin_path, split, documents, described, tokenizer, dtype, progress) -> None:
    """Write the split's token file, then its index."""
    index_path.unlink(missing_ok=True)
    offsets = [0]
    total = sum(d.end - d.start for d in documents)
    bar = tqdm(total=total, desc=f"tokenise {split}", unit="B", unit_scale=True, disable=not progress)
    with bar, atomic_writer(bin_path, "wb") as f:
        for group in _groups(documents):
            texts = [d.read() for d in group]
            for ids in tokenizer.encode_documents(texts):
                f.write(np.asarray(ids).astype(dtype).tobytes())
                offsets.append(offsets[-1] + len(ids))
            bar.update(sum(len(t) for t in texts))
    index = {
        "format": FORMAT,
        "split": split,
        "tokenizer": tokenizer.fingerprint,
        "tokenizer_name": tokenizer.name,
        "vocab_size": tokenizer.vocab_size,
        "dtype": dtype.name,
        "tokens": offsets[-1],
        "documents": described,
        "offsets": offsets,
    }
    write_atomic(index_path, json.dumps(index))


def _groups(documents: list[Document]) -> list[list[Document]]:
    """Consecutive documents in groups of about `_GROUP_BYTES` of text."""
    groups, size = [[]], 0
    for d in documents:
        if size >= _GROUP_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(d)
        size += d.end - d.start
    return [g for g in groups if g]
