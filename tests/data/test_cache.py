"""The token cache: a split is tokenised once, its memory map holds each document's ids (and end-of-document id)
at the index's offsets, and a changed file, split or tokenizer tokenises it again."""

from __future__ import annotations

import json

import numpy as np
import pytest

from linattn.data import cache
from linattn.data.cache import cached_split, open_split
from linattn.data.config import DataConfig
from linattn.data.corpus import read_corpus
from linattn.data.tokenizer import ByteTokenizer, train_tokenizer
from tests.data.corpus import write_corpus


@pytest.fixture
def counted(monkeypatch):
    """How many times a split was tokenised."""
    calls = []
    tokenise = cache._tokenise
    monkeypatch.setattr(cache, "_tokenise", lambda *a: calls.append(a[2]) or tokenise(*a))
    return calls


def split_of(root, split="val", config=None):
    config = config or DataConfig(val_fraction=0.2)
    return read_corpus(root, config).split(config)[split]


def test_tokenised_once_then_reused(tmp_path, counted):
    root = write_corpus(tmp_path / "corpus", count=20)
    documents = split_of(root)
    first = cached_split(tmp_path / "cache", "val", documents, ByteTokenizer())
    again = cached_split(tmp_path / "cache", "val", split_of(root), ByteTokenizer())
    assert counted == ["val"]
    assert isinstance(again.tokens, np.memmap) and again.tokens.dtype == np.uint16
    assert np.array_equal(first.tokens, again.tokens) and np.array_equal(first.offsets, again.offsets)
    for i, d in enumerate(documents):  # document i at its offsets
        assert bytes(again.tokens[again.offsets[i] : again.offsets[i + 1]].astype(np.uint8)) == d.read()
    index = json.loads((tmp_path / "cache" / "val.json").read_text())
    assert index["tokenizer"] == "bytes" and index["tokens"] == sum(d.end - d.start for d in documents)
    assert index["documents"][0] == documents[0].describe() and len(index["documents"][0]["sha256"]) == 64
    assert np.array_equal(open_split(tmp_path / "cache", "val").tokens, again.tokens)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["val.bin", "val.json"]  # no temporary left


def test_a_changed_file_split_or_tokenizer_tokenises_again(tmp_path, counted):
    root = write_corpus(tmp_path / "corpus", count=20)
    cached_split(tmp_path / "cache", "val", split_of(root), ByteTokenizer())
    victim = split_of(root)[0].path
    victim.write_text(victim.read_text().replace("the", "THE"))  # same size, other content
    changed = cached_split(tmp_path / "cache", "val", split_of(root), ByteTokenizer())
    assert counted == ["val", "val"] and b"THE" in bytes(changed.tokens.astype(np.uint8))
    other = DataConfig(val_fraction=0.4)
    cached_split(tmp_path / "cache", "val", split_of(root, config=other), ByteTokenizer())
    assert len(counted) == 3
    bpe = train_tokenizer(root, tmp_path / "tok.json", 300)
    bpe_split = cached_split(tmp_path / "cache", "val", split_of(root, config=other), bpe)
    assert len(counted) == 4 and bpe_split.tokens[bpe_split.offsets[1] - 1] == bpe.eod_id
    (tmp_path / "cache" / "val.bin").write_bytes(b"\x00\x00")  # a token file that does not match its index
    cached_split(tmp_path / "cache", "val", split_of(root, config=other), bpe)
    assert len(counted) == 5


def test_an_empty_split_and_a_missing_cache(tmp_path):
    root = write_corpus(tmp_path / "corpus", count=5)
    empty = cached_split(tmp_path / "cache", "test", split_of(root, "test"), ByteTokenizer())
    assert len(empty.tokens) == 0 and empty.num_documents == 0
    with pytest.raises(ValueError, match="val.json: no index of tokenised text"):
        open_split(tmp_path / "cache", "val")
