"""Reading a corpus from a file, a folder or a glob; long files cut at line breaks; the split by document is
deterministic, disjoint, complete and independent of where the corpus lies."""

from __future__ import annotations

import itertools
import shutil

import pytest

from linattn.data.config import DataConfig
from linattn.data.corpus import cut_points, read_corpus, split_documents
from tests.data.corpus import write_corpus


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"))


def largest_file(corpus_dir):
    return max(corpus_dir.glob("part*/*.txt"), key=lambda p: p.stat().st_size)


def test_a_folder_is_walked_for_text_files_hidden_ones_left_out(corpus_dir):
    corpus = read_corpus(corpus_dir)
    names = [d.name for d in corpus.documents]
    assert len(names) >= 79 and corpus.root == corpus_dir
    assert all(n.startswith("part") and (n.endswith(".txt") or ".txt#" in n) for n in names)
    assert corpus.num_bytes == sum(p.stat().st_size for p in corpus_dir.glob("part*/*.txt"))
    first = corpus.documents[0]
    assert first.read() == (corpus_dir / first.name.split("#")[0]).read_bytes()[first.start : first.end]


def test_a_file_and_a_glob(corpus_dir):
    big = largest_file(corpus_dir)
    one = read_corpus(big, DataConfig(max_doc_bytes=1000))
    assert [d.name for d in one.documents][:2] == [f"{big.name}#0", f"{big.name}#1"] and one.root == big.parent
    assert all(d.end - d.start <= 1000 and d.read().endswith(b"\n") for d in one.documents[:-1])
    assert b"".join(d.read() for d in one.documents) == big.read_bytes()
    matched = read_corpus(f"{corpus_dir}/part*/a*.txt")
    assert matched.root == corpus_dir and matched.documents
    assert all(d.name.split("/")[1].startswith("a") for d in matched.documents)
    with pytest.raises(ValueError, match="^data: .* no file, folder or glob pattern"):
        read_corpus(corpus_dir / "missing")
    with pytest.raises(ValueError, match="^data: no non-empty text file"):
        read_corpus(corpus_dir, DataConfig(extensions=(".tex",)))


def test_cut_points_end_at_line_breaks_and_keep_characters_whole():
    assert cut_points(b"ab\ncd\nef", 4) == [0, 3, 6, 8]
    assert cut_points(b"short", 10) == [0, 5]
    text = "ééééé".encode()  # 2 bytes a character, no line break
    cuts = cut_points(text, 3)
    assert cuts == [0, 2, 4, 6, 8, 10]
    assert all(text[a:b].decode() for a, b in itertools.pairwise(cuts))


def test_split_by_document_is_deterministic_disjoint_and_complete(corpus_dir, tmp_path):
    config = DataConfig(val_fraction=0.1, test_fraction=0.05)
    splits = read_corpus(corpus_dir).split(config)
    names = {s: [d.name for d in docs] for s, docs in splits.items()}
    n = sum(len(v) for v in names.values())
    assert len(names["val"]) == -(-n // 10) and len(names["test"]) == -(-n // 20)
    every = sorted(d.name for d in read_corpus(corpus_dir).documents)
    assert sorted(name for split in names.values() for name in split) == every
    assert not set(names["train"]) & set(names["val"]) and not set(names["val"]) & set(names["test"])
    # the same names, wherever the corpus lies and however often it is read
    moved = shutil.copytree(corpus_dir, tmp_path / "elsewhere")
    again = read_corpus(moved).split(config)
    assert {s: [d.name for d in docs] for s, docs in again.items()} == names
    # a new document joins a split without moving the others much: at most the boundary documents change split
    (moved / "part0" / "zzz-new.txt").write_text("a new document\n")
    grown = read_corpus(moved).split(config)
    assert len(set(names["train"]) - {d.name for d in grown["train"]}) <= 2


def test_too_few_documents_is_a_clear_error(corpus_dir):
    one = read_corpus(corpus_dir / "part0" / "assert.txt")  # one document: no train split beside a val one
    with pytest.raises(ValueError, match="makes 1 document.*too few for a train split.*max_doc_bytes"):
        one.split(DataConfig())
    assert split_documents(one.documents, 0.0, 0.0)["train"] == list(one.documents)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"val_fraction": 1.0}, "val_fraction must be a fraction"),
        ({"val_fraction": 0.6, "test_fraction": 0.4}, "must leave documents to train on"),
        ({"extensions": ("txt",)}, "extensions must be name endings"),
        ({"seq_len": 0}, "seq_len must be a positive int"),
    ],
)
def test_config_rejects_bad_values(changes, message):
    with pytest.raises(ValueError, match=message):
        DataConfig(**changes)
