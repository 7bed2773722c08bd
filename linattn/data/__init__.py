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

from linattn.data.cache import TokenSplit, cached_split, open_split
from linattn.data.config import DataConfig
from linattn.data.corpus import Corpus, Document, read_corpus
from linattn.data.packing import PackedText
from linattn.data.tokenizer import ByteTokenizer, FileTokenizer, Tokenizer, load_tokenizer, train_tokenizer

__all__ = [
    "ByteTokenizer",
    "Corpus",
    "DataConfig",
    "Document",
    "FileTokenizer",
    "PackedText",
    "TokenSplit",
    "Tokenizer",
    "cached_split",
    "load_tokenizer",
    "open_split",
    "read_corpus",
    "train_tokenizer",
]
