"""`Batch.by_length`: a mixture's rows grouped by length and cut to it, the same examples without the padding;
`Batch.packed` and packed batches."""

from __future__ import annotations

import pytest
import torch

from linattn.tasks import IGNORE, Batch, MQARMixtureConfig, ZoologyMQARConfig, generate, zoology_mix


def test_by_length_cuts_each_row_to_its_length():
    task = MQARMixtureConfig(tuple(zoology_mix(((8, 1), (16, 2), (32, 4)), vocab_size=32)))
    batch = generate(task, 40, torch.Generator().manual_seed(0))
    parts = batch.by_length()
    assert [p.inputs.shape[1] for p in parts] == [8, 16, 32]
    assert sum(p.inputs.shape[0] for p in parts) == 40
    for part in parts:
        L = part.inputs.shape[1]
        assert (part.slices["seq_len"] == L).all() and part.targets.shape == part.inputs.shape
        rows = (batch.slices["seq_len"] == L).nonzero().squeeze(1)
        assert torch.equal(part.inputs, batch.inputs[rows, :L]) and torch.equal(part.targets, batch.targets[rows, :L])
        assert torch.equal(part.slices["n_pairs"], batch.slices["n_pairs"][rows])
        assert (batch.targets[rows, L:] == IGNORE).all()  # what was cut is padding
    # every target is kept
    assert sum(int(p.supervised.sum()) for p in parts) == int(batch.supervised.sum())


def test_one_length_or_no_lengths_is_the_batch_itself():
    batch = generate(ZoologyMQARConfig(n_pairs=2, seq_len=16, vocab_size=32), 4, torch.Generator().manual_seed(0))
    assert batch.by_length() == [batch]
    bare = Batch(batch.inputs, batch.targets)
    assert bare.by_length() == [bare]


def test_by_length_refuses_lengths_that_would_drop_targets():
    targets = torch.tensor([[IGNORE, 1, IGNORE, 2], [IGNORE, 3, IGNORE, IGNORE]])
    inputs = torch.zeros_like(targets)
    with pytest.raises(ValueError, match=r"^targets: a row has a target past its length"):
        Batch(inputs, targets, {"seq_len": torch.tensor([3, 4])}).by_length()
    with pytest.raises(ValueError, match=r"^slices\['seq_len'\]: expected row lengths in \[1, 4\], got 2 – 5"):
        Batch(inputs, targets, {"seq_len": torch.tensor([5, 2])}).by_length()
    parts = Batch(inputs, targets, {"seq_len": torch.tensor([4, 2])}).by_length()
    assert [p.targets.tolist() for p in parts] == [[[IGNORE, 3]], [[IGNORE, 1, IGNORE, 2]]]


def test_packed_puts_the_rows_back_to_back_without_their_padding():
    task = MQARMixtureConfig(tuple(zoology_mix(((8, 1), (16, 2), (32, 4)), vocab_size=32)))
    batch = generate(task, 12, torch.Generator().manual_seed(0))
    inputs, targets, cu = batch.packed()
    lengths = batch.slices["seq_len"]
    assert cu.tolist() == [0, *lengths.cumsum(0).tolist()] and inputs.shape == targets.shape == (1, int(lengths.sum()))
    for i, n in enumerate(lengths.tolist()):
        assert torch.equal(inputs[0, cu[i] : cu[i + 1]], batch.inputs[i, :n])
        assert torch.equal(targets[0, cu[i] : cu[i + 1]], batch.targets[i, :n])
    bare = Batch(batch.inputs, batch.targets)  # no lengths: every row is T long
    inputs, _, cu = bare.packed()
    assert torch.equal(inputs[0], batch.inputs.flatten()) and cu.tolist() == list(range(0, 12 * 32 + 1, 32))


def test_a_packed_batch_keeps_its_cu_seqlens_and_is_not_packed_again():
    x = torch.arange(6)[None]
    batch = Batch(x, x.clone(), cu_seqlens=torch.tensor([0, 2, 6])).to("cpu")
    assert batch.cu_seqlens.tolist() == [0, 2, 6] and batch.by_length() == [batch]
    with pytest.raises(ValueError, match="^packed: this batch is packed already"):
        batch.packed()


def test_row_groups_keep_every_row_and_slice_within_the_tokens():
    batch = Batch(torch.arange(40).view(5, 8), torch.arange(40).view(5, 8), {"seq_len": torch.full((5,), 8)})
    groups = batch.row_groups(16)
    assert [g.inputs.shape[0] for g in groups] == [2, 2, 1]
    assert torch.equal(torch.cat([g.inputs for g in groups]), batch.inputs)
    assert torch.equal(torch.cat([g.slices["seq_len"] for g in groups]), batch.slices["seq_len"])
    assert batch.row_groups(3)[0].inputs.shape == (1, 8) and batch.row_groups(100) == [batch]
