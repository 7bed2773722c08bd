"""Text corpora as training data (the `text` extra: numpy, tokenizers): read `FILE | DIR | GLOB` into documents
split by document (`corpus`), tokenise with `bytes` or a `tokenizers` JSON file, or train a byte-level BPE
(`tokenizer`), cache each split as a memory-mapped token file (`cache`), and draw packed batches whose
`cu_seqlens` keep documents apart (`packing`).

Example:
    >>> config = DataConfig(seq_len=256)
    >>> splits = read_corpus("notes/", config).split(config)
    >>> train = PackedText(cached_split("cache", "train", splits["train"], load_tokenizer("bytes")))
    >>> batch = train.batch(8, config.seq_len, torch.Generator().manual_seed(0))  # [1, 2048] + cu_seqlens
"""

import importlib

# what each name is imported from, on first use: `linattn.data.config` (and the corpus reader) need no numpy, so the
# experiments that name a corpus import without the `text` extra
_FROM = {
    "TokenSplit": "cache",
    "cached_split": "cache",
    "open_split": "cache",
    "DataConfig": "config",
    "Corpus": "corpus",
    "Document": "corpus",
    "read_corpus": "corpus",
    "PackedText": "packing",
    "ByteTokenizer": "tokenizer",
    "FileTokenizer": "tokenizer",
    "Tokenizer": "tokenizer",
    "load_tokenizer": "tokenizer",
    "train_tokenizer": "tokenizer",
}

__all__ = sorted(_FROM)


def __getattr__(name: str):
    if name not in _FROM:
        raise AttributeError(f"module 'linattn.data' has no attribute {name!r}")
    return getattr(importlib.import_module(f"linattn.data.{_FROM[name]}"), name)
