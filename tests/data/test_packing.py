"""Packed batches: windows cut at document boundaries, no target across one, drawn from the generator alone; a
packed batch's loss is the sum of its documents' losses run alone."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from linattn.data.cache import TokenSplit, cached_split
from linattn.data.config import DataConfig
from linattn.data.corpus import read_corpus
from linattn.data.packing import PackedText
from linattn.data.tokenizer import ByteTokenizer
from linattn.models import DecoderLM, preset
from linattn.tasks import IGNORE
from linattn.train import token_cross_entropy
from tests.data.corpus import write_corpus

pytestmark = pytest.mark.usefixtures("one_thread")


def synthetic(lengths: list[int]) -> TokenSplit:
    """Documents of the given lengths; every token is its document's index."""
    tokens = np.concatenate([np.full(n, i, dtype=np.uint16) for i, n in enumerate(lengths)])
    return TokenSplit("train", tokens, np.cumsum([0, *lengths]))


def test_windows_are_cut_at_document_starts():
    data = PackedText(synthetic([5, 3, 10, 2, 20]))  # starts at 5, 8, 18, 20
    batch = data.windows([0, 4, 16], 6)  # [0, 6), [4, 10), [16, 22)
    assert batch.inputs.shape == batch.targets.shape == (1, 18)
    assert batch.cu_seqlens.tolist() == [0, 5, 6, 7, 10, 12, 14, 16, 18]
    assert batch.inputs[0].tolist() == [0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 4, 4]
    N = IGNORE
    assert batch.targets[0].tolist() == [0, 0, 0, 0, N, 1, N, 1, 1, N, 2, 2, 2, N, 3, N, 4, 4]
    for a, b in itertools.pairwise(batch.cu_seqlens.tolist()):  # one document a sequence
        assert len(set(batch.inputs[0, a:b].tolist())) == 1


def test_draws_follow_the_generator_and_evals_are_fixed():
    data = PackedText(synthetic([50, 30, 100, 20]))
    a, b = (data.batch(4, 16, torch.Generator().manual_seed(3)) for _ in range(2))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.cu_seqlens, b.cu_seqlens)
    c = data.batch(4, 16, torch.Generator().manual_seed(4))
    assert not torch.equal(a.inputs, c.inputs)
    evals = list(data.eval_batches(3, 16, 100))  # ceil(100 / 16) = 7 windows from the start, 3 a batch
    assert [e.inputs.shape[1] for e in evals] == [48, 48, 16]
    assert torch.cat([e.inputs[0] for e in evals]).tolist() == data.tokens[:112].tolist()
    short = list(PackedText(synthetic([4, 3])).eval_batches(2, 16, 100))  # shorter than a window: one of all it has
    assert len(short) == 1 and short[0].inputs.shape == (1, 6)
    with pytest.raises(ValueError, match="^seq_len: the train split has 7 tokens, fewer than a window"):
        PackedText(synthetic([4, 3])).batch(2, 16, torch.Generator())


def test_a_packed_batch_is_its_documents_run_alone(tmp_path):
    root = write_corpus(tmp_path / "corpus", count=6)
    config = DataConfig(max_doc_bytes=120, val_fraction=0.0)
    documents = read_corpus(root, config).split(config)["train"]
    data = PackedText(cached_split(tmp_path / "cache", "train", documents, ByteTokenizer()))
    batch = data.batch(4, 96, torch.Generator().manual_seed(0))
    cu = batch.cu_seqlens.tolist()
    assert len(cu) > 4 + 3, "the windows cross documents"
    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer="kla", vocab_size=256, positions="none")).eval()  # short convs too
    with torch.no_grad():
        packed = model(batch.inputs, cu_seqlens=batch.cu_seqlens)[0][0]  # [B·T, V]
        total = F.cross_entropy(packed, batch.targets[0], ignore_index=IGNORE, reduction="sum")
        alone_total = 0.0
        for a, b in itertools.pairwise(cu):
            alone = model(batch.inputs[:, a:b])[0][0]
            torch.testing.assert_close(packed[a:b], alone, rtol=1e-5, atol=1e-5)
            alone_total += F.cross_entropy(alone, batch.targets[0, a:b], ignore_index=IGNORE, reduction="sum")
        torch.testing.assert_close(total, alone_total, rtol=1e-5, atol=1e-4)
        assert not torch.allclose(model(batch.inputs)[0][0], packed, atol=1e-3), "without cu_seqlens it would differ"
        mean = token_cross_entropy(model, batch)  # the trainer's loss reads cu_seqlens from the batch
        torch.testing.assert_close(mean, total / batch.supervised.sum(), rtol=1e-5, atol=1e-6)
