"""The decoder LM: presets, decoding equals the full forward, packed sequences, errors."""

from __future__ import annotations

import pytest
import torch

from linattn.models import PRESETS, DecoderLM, ModelConfig, preset
from tests.ops.cases import rel_err


@pytest.mark.parametrize("mixer", ["softmax", "vla", "gated_deltanet", "mamba2"])
@pytest.mark.parametrize("block", ["transformer", "zoology"])
def test_step_decoding_equals_forward(mixer, block):
    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer=mixer, block=block)).double()
    ids = torch.randint(0, 32, (2, 30))
    full, final = model(ids)
    logits, state = model(ids[:, :11])
    outs = [logits]
    for t in range(11, 30):
        logits_t, state = model.step(ids[:, t], state)
        outs.append(logits_t[:, None])
    assert rel_err(torch.cat(outs, dim=1), full) < 1e-8
    assert state["pos"].tolist() == [30, 30] == final["pos"].tolist()


@pytest.mark.parametrize("mixer", ["softmax", "gated_deltanet"])
def test_without_output_state_the_logits_are_the_same_and_no_state_is_formed(mixer):
    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer=mixer, block="zoology")).double()
    ids = torch.randint(0, 32, (2, 12))
    for kwargs in ({}, {"attention_mask": torch.tensor([[0] * 3 + [1] * 9, [1] * 12])}):
        logits, state = model(ids, output_state=False, **kwargs)
        assert state is None and rel_err(logits, model(ids, **kwargs)[0]) < 1e-12


@pytest.mark.parametrize("mixer", ["vla", "gated_deltanet"])
def test_gradient_checkpointing_gives_the_same_gradients(mixer):
    """The LM's own checkpointing (non-reentrant), under which a backward may unpack its saved tensors only once."""
    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer=mixer)).double()
    ids = torch.randint(0, 32, (2, 12))

    def grads():
        model.zero_grad()
        model(ids, output_state=False)[0].square().sum().backward()
        return [p.grad.clone() for p in model.parameters()]

    plain = grads()
    model.gradient_checkpointing = True
    for a, b in zip(grads(), plain):
        assert rel_err(a, b) < 1e-12


def test_packed_sequences_equal_separate_runs():
    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer="kla")).double()
    seqs = [torch.randint(0, 32, (1, n)) for n in (5, 17, 9)]
    cu = torch.tensor([0, 5, 22, 31])
    packed, state = model(torch.cat(seqs, dim=1), cu_seqlens=cu)
    want = torch.cat([model(s)[0] for s in seqs], dim=1)
    assert rel_err(packed, want) < 1e-10
    assert state["pos"].tolist() == [5, 17, 9]


@pytest.mark.parametrize("mixer", ["softmax", "vla", "gated_deltanet", "mamba2"])
def test_a_packed_mixture_gives_the_padded_batchs_logits_at_its_targets(mixer):
    """`Batch.packed()` into `cu_seqlens`: the rows' logits at their targets are the right-padded batch's."""
    from linattn.tasks import IGNORE, MQARMixtureConfig, generate, zoology_mix

    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer=mixer, block="zoology", vocab_size=32)).double()
    task = MQARMixtureConfig(tuple(zoology_mix(((8, 1), (12, 2), (16, 3)), vocab_size=32)))
    batch = generate(task, 6, torch.Generator().manual_seed(0))
    inputs, targets, cu = batch.packed()
    packed, _ = model(inputs, cu_seqlens=cu, logits_at=targets != IGNORE)
    padded, _ = model(batch.inputs, logits_at=batch.supervised)
    assert rel_err(packed, padded) < 1e-10


@pytest.mark.parametrize("mixer", ["softmax", "vla", "gated_deltanet", "mamba2"])
@pytest.mark.parametrize("block", ["transformer", "zoology"])
def test_a_padded_batch_gives_each_rows_real_tokens_their_own_logits_and_state(mixer, block, one_thread):
    """Left, right and inner padding: positions count real tokens, and decoding continues each row as if alone."""
    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer=mixer, block=block)).double()
    ids = torch.randint(0, 32, (3, 10))
    mask = torch.ones(3, 10, dtype=torch.bool)
    mask[0, :4], mask[1, 7:], mask[2, 3] = False, False, False
    logits, state = model(ids, attention_mask=mask)
    token = torch.randint(0, 32, (3,))
    next_logits, _ = model.step(token, state)
    assert state["pos"].tolist() == mask.sum(1).tolist()
    for b in range(3):
        alone, alone_state = model(ids[b : b + 1, mask[b]])
        assert rel_err(logits[b, mask[b]], alone[0]) < 1e-10
        assert rel_err(next_logits[b], model.step(token[b : b + 1], alone_state)[0][0]) < 1e-10
    with pytest.raises(ValueError, match="^attention_mask: not with cu_seqlens"):
        model(ids[:1], cu_seqlens=torch.tensor([0, 4, 10]), attention_mask=mask[:1])


def test_logits_at_selects_positions_of_the_full_call():
    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer="gated_deltanet", block="zoology")).double()
    ids = torch.randint(0, 32, (3, 14))
    mask = torch.rand(3, 14) < 0.3
    full, _ = model(ids)
    some, state = model(ids, logits_at=mask)
    assert some.shape == (int(mask.sum()), full.shape[-1])
    assert rel_err(some, full[mask]) < 1e-12
    assert state["pos"].tolist() == [14, 14, 14]
    with pytest.raises(ValueError, match=r"^logits_at: expected a bool tensor of input_ids' shape \[3, 14\]"):
        model(ids, logits_at=mask.long())
    with pytest.raises(ValueError, match="^logits_at: expected a bool tensor"):
        model(ids, logits_at=mask[:, :5])


def test_presets_build_and_tie():
    for name, config in PRESETS.items():
        model = DecoderLM(config.replace(vocab_size=64, max_seq_len=64))
        assert model.head.weight is model.embed.weight, name
    tiny = preset("vla-tinylm")
    assert (tiny.n_layers, tiny.d_model, tiny.n_heads, tiny.mlp_hidden, tiny.vocab_size) == (2, 128, 4, 256, 128)


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="^mixer"):
        ModelConfig(mixer="transformer")
    with pytest.raises(ValueError, match="^block"):
        ModelConfig(block="mamba")
    with pytest.raises(ValueError, match="^preset"):
        preset("huge")
    model = DecoderLM(preset("debug", max_seq_len=8))
    with pytest.raises(ValueError, match="^input_ids: position 8 exceeds max_seq_len"):
        model(torch.zeros(1, 9, dtype=torch.long))
    _, state = model(torch.zeros(1, 8, dtype=torch.long), model.init_state(1))
    with pytest.raises(ValueError, match="^input_ids: position 8 exceeds max_seq_len"):  # decoding past the table
        model.step(torch.zeros(1, dtype=torch.long), state)
    with pytest.raises(ValueError, match="^input_ids: expected an int64"):
        model(torch.zeros(1, 4))
    with pytest.raises(ValueError, match=r"^state\['pos'\]: expected shape \[3\] .*, got \[1\]"):  # another batch's
        model.step(torch.zeros(3, dtype=torch.long), model.init_state(1))
    with pytest.raises(TypeError, match="^state: expected a dict with 'pos' and 'layers'"):
        model(torch.zeros(1, 4, dtype=torch.long), state={"layers": []})
    for bad in (model.config.vocab_size, -1):  # out of the vocabulary: not the embedding's IndexError
        with pytest.raises(ValueError, match=r"^input_ids: expected token ids in \[0, vocab_size = \d+\), got min"):
            model(torch.tensor([[1, bad, 2]]))
