"""Tokenizers of a text run: `bytes` (one id a byte, 256 ids, no file) or a HuggingFace `tokenizers` JSON file,
and `train_tokenizer`, a byte-level BPE trained on a corpus's train split with an end-of-document token.

Both encode documents the same way for the cache (`encode_documents`: the ids of each, then the end-of-document id
when the tokenizer has one) and give a `tokenizers.Tokenizer` for export (`hf_tokenizer`). `bytes` reads raw bytes,
so any file is valid; a JSON tokenizer reads UTF-8 (undecodable bytes become U+FFFD).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from linattn.data.config import DataConfig
from linattn.data.corpus import read_corpus
from linattn.extras import require
from linattn.io import write_atomic

EOD_TOKEN = "<|endoftext|>"  # the end-of-document token of a trained tokenizer
EOD_NAMES = (EOD_TOKEN, "</s>", "<eos>", "<|end_of_text|>")  # looked up, in this order, in a given tokenizer
MIN_BPE_VOCAB = 257  # 256 bytes and the end-of-document token


def _tokenizers():
    return require("tokenizers", "text", "a tokenizers tokenizer")


def _numpy():
    return require("numpy", "text", "tokenised text")


class ByteTokenizer:
    """UTF-8 bytes as ids `0 … 255`; no end-of-document id (packing marks document ends).

    Example: `ByteTokenizer().encode("hé") == [104, 195, 169]`.
    """

    name = "bytes"
    vocab_size = 256
    eod_id: int | None = None
    eod_token: str | None = None
    fingerprint = "bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def decode(self, ids: Iterable[int]) -> str:
        return bytes(ids).decode(errors="replace")

    def encode_documents(self, documents: list[bytes]) -> list:
        """Each document's ids, `uint8` numpy arrays."""
        np = _numpy()
        return [np.frombuffer(d, dtype=np.uint8) for d in documents]

    def hf_tokenizer(self):
        """The same map as a `tokenizers.Tokenizer`: byte-level pre-tokenisation, one vocabulary entry a byte
        (id = the byte's value), no merges."""
        tk = _tokenizers()
        vocab = {char: byte for byte, char in bytes_to_unicode().items()}
        tokenizer = tk.Tokenizer(tk.models.BPE(vocab=vocab, merges=[]))
        tokenizer.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        tokenizer.decoder = tk.decoders.ByteLevel()
        return tokenizer


class FileTokenizer:
    """A `tokenizers` JSON file; its end-of-document id is the first of `EOD_NAMES` it has (else None).

    Example: `FileTokenizer("tokenizer.json").encode("hello")`.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not self.path.is_file():
            raise ValueError(f"tokenizer: expected 'bytes' or a tokenizers JSON file, got {str(path)!r} (no such file)")
        content = self.path.read_bytes()
        try:
            self.tokenizer = _tokenizers().Tokenizer.from_str(content.decode())
        except Exception as e:  # tokenizers raises its own Exception type for a malformed file
            raise ValueError(f"tokenizer: {str(path)!r} is not a tokenizers JSON file ({e})") from e
        self.name = str(path)
        self.fingerprint = hashlib.sha256(content).hexdigest()
        self.vocab_size = self.tokenizer.get_vocab_size(with_added_tokens=True)
        self.eod_token = next((t for t in EOD_NAMES if self.tokenizer.token_to_id(t) is not None), None)
        self.eod_id = None if self.eod_token is None else self.tokenizer.token_to_id(self.eod_token)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def encode_documents(self, documents: list[bytes]) -> list:
        """Each document's ids and then the end-of-document id (if any), numpy arrays; runs the documents in
        parallel (the tokenizers library's threads)."""
        np = _numpy()
        texts = [d.decode(errors="replace") for d in documents]
        end = [] if self.eod_id is None else [self.eod_id]
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        return [np.array(e.ids + end, dtype=np.int64) for e in encodings]

    def hf_tokenizer(self):
        return self.tokenizer


Tokenizer = ByteTokenizer | FileTokenizer


def load_tokenizer(spec: str | os.PathLike) -> Tokenizer:
    """`"bytes"`, or the path of a tokenizers JSON file."""
    return ByteTokenizer() if str(spec) == "bytes" else FileTokenizer(spec)


def train_bpe(texts: Iterable[str], vocab_size: int, *, length: int | None = None, progress: bool = False):
    """A byte-level BPE `tokenizers.Tokenizer` of at most `vocab_size` ids (fewer when the texts run out of pairs to
    merge) trained on `texts`, with `EOD_TOKEN` as a special token; `length` (the number of texts) sizes its
    progress bar."""
    _check_vocab_size(vocab_size)
    tk = _tokenizers()
    tokenizer = tk.Tokenizer(tk.models.BPE())
    tokenizer.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOD_TOKEN],
        initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),  # every byte, so no text is unknown
        show_progress=progress,
    )
    tokenizer.train_from_iterator(texts, trainer, length=length)
    return tokenizer


def _check_vocab_size(vocab_size: int) -> None:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < MIN_BPE_VOCAB:
        raise ValueError(
            f"vocab_size: expected an int >= {MIN_BPE_VOCAB} (256 bytes and {EOD_TOKEN}), got {vocab_size!r}"
        )


def train_tokenizer(
    source: str | os.PathLike,
    out: str | os.PathLike,
    vocab_size: int,
    config: DataConfig | None = None,
    *,
    overwrite: bool = False,
    progress: bool = False,
) -> FileTokenizer:
    """Train a byte-level BPE (`train_bpe`) on the train split of the corpus `source` (as `config` splits it: use
    the settings of the runs that will use it, so their validation text stays unseen; default `DataConfig()`) and
    write it to `out`.

    Example: `train_tokenizer("notes/", "tokenizer.json", 4096).encode("hello")`.
    """
    out = Path(out)
    if out.exists():
        if not _is_tokenizer_file(out):
            raise ValueError(f"out: {out} exists and is not a tokenizers JSON file: not replaced")
        if not overwrite:
            raise ValueError(f"out: {out} exists (overwrite=True, --force on the command line, replaces it)")
    _check_vocab_size(vocab_size)  # before the corpus is read
    config = config or DataConfig()
    documents = read_corpus(source, config, progress=progress).split(config)["train"]
    texts = (d.read().decode(errors="replace") for d in documents)
    tokenizer = train_bpe(texts, vocab_size, length=len(documents), progress=progress)
    write_atomic(out, tokenizer.to_str(pretty=True))
    return FileTokenizer(out)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet, the one `tokenizers`' `ByteLevel` uses: printable bytes stand for themselves,
    the others (controls, space, …) for the characters from U+0100 on, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return dict(sorted(mapping.items()))


def _is_tokenizer_file(path: Path) -> bool:
    """Whether `path` holds a file `FileTokenizer` reads: what `--force` may replace."""
    try:
        FileTokenizer(path)
    except ValueError:
        return False
    return True
