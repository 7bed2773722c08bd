"""Tokenizers: bytes, a BPE trained on a corpus's train split (round trip, end-of-document token), a given JSON
file, and the byte-level `tokenizers` twin of `bytes` that an export ships."""

from __future__ import annotations

import json

import numpy as np
import pytest

from linattn.data.config import DataConfig
from linattn.data.corpus import read_corpus
from linattn.data.tokenizer import (
    EOD_TOKEN,
    ByteTokenizer,
    FileTokenizer,
    bytes_to_unicode,
    load_tokenizer,
    train_tokenizer,
)
from tests.data.corpus import write_corpus

TEXT = "Unicode: héllo, wörld — 日本語\n\tdef f(x):\n        return x ** 2  # two spaces  \x00\n"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("bpe")
    corpus = write_corpus(root / "corpus", count=30)
    return corpus, train_tokenizer(corpus, root / "tokenizer.json", 600)


def test_bytes_are_their_own_ids():
    tok = load_tokenizer("bytes")
    assert isinstance(tok, ByteTokenizer) and tok.vocab_size == 256 and tok.eod_id is None
    assert tok.encode(TEXT) == list(TEXT.encode()) and tok.decode(tok.encode(TEXT)) == TEXT
    (ids,) = tok.encode_documents([b"\xff\xfe raw"])  # any bytes, valid UTF-8 or not
    assert ids.tolist() == list(b"\xff\xfe raw")


def test_the_byte_level_twin_of_bytes_encodes_the_same_ids():
    twin = ByteTokenizer().hf_tokenizer()
    assert twin.encode(TEXT).ids == list(TEXT.encode()) and twin.decode(twin.encode(TEXT).ids) == TEXT
    assert twin.get_vocab_size() == 256 and sorted(bytes_to_unicode()) == list(range(256))


def test_trained_bpe_round_trips_and_ends_documents(trained):
    corpus, tok = trained
    assert isinstance(tok, FileTokenizer) and tok.vocab_size == 600
    assert tok.eod_token == EOD_TOKEN and tok.eod_id == 0
    for text in (TEXT, (corpus / "part0" / "assert.txt").read_text()):
        ids = tok.encode(text)
        assert tok.decode(ids) == text and EOD_TOKEN not in tok.decode(ids)
    sample = (corpus / "part1" / "atom-literals.txt").read_text()
    assert len(tok.encode(sample)) < 0.6 * len(sample.encode())  # merges learned: fewer ids than bytes
    docs = tok.encode_documents([b"one", b"two"])
    assert [d[-1] for d in docs] == [tok.eod_id, tok.eod_id] and tok.decode(docs[0][:-1]) == "one"
    assert load_tokenizer(tok.path).fingerprint == tok.fingerprint != "bytes"


def test_trained_on_the_train_split_only(trained, monkeypatch, tmp_path):
    corpus, _ = trained
    seen = []
    original = read_corpus(corpus).split(DataConfig())
    monkeypatch.setattr("linattn.data.tokenizer.train_bpe", lambda texts, *a, **k: seen.extend(texts) or _Stub())
    train_tokenizer(corpus, tmp_path / "t.json", 300)
    assert seen == [d.read().decode() for d in original["train"]] and len(original["val"]) >= 1


class _Stub:
    def to_str(self, pretty):
        return json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})


def test_bad_tokenizers_are_named(trained, tmp_path):
    corpus, tok = trained
    with pytest.raises(ValueError, match="^tokenizer: expected 'bytes' or a tokenizers JSON file, got 'nope.json'"):
        load_tokenizer("nope.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json' is not a tokenizers JSON file"):
        load_tokenizer(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="^vocab_size: expected an int >= 257"):
        train_tokenizer(corpus, tmp_path / "small.json", 100)
    with pytest.raises(ValueError, match=r"exists \(overwrite=True, --force on the command line, replaces it\)"):
        train_tokenizer(corpus, tok.path, 300)
    with pytest.raises(ValueError, match="bad.json exists and is not a tokenizers JSON file: not replaced"):
        train_tokenizer(corpus, tmp_path / "bad.json", 300, overwrite=True)  # --force replaces a tokenizer only


def test_a_large_vocabulary_is_cached_as_uint32():
    from linattn.data.cache import token_dtype

    assert token_dtype(256) == np.uint16 and token_dtype(65536) == np.uint16 and token_dtype(65537) == np.uint32
