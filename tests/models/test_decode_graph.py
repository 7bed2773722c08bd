"""Decoding from a CUDA graph: the state's bookkeeping on any machine, and on a GPU the same tokens and logits as
the eager step."""

from __future__ import annotations

import pytest
import torch

from linattn.models import DecoderLM, preset
from linattn.models.decode_graph import (
    GraphedDecoder,
    check_fixed_size,
    clone_state,
    has_growing_state,
    state_tensors,
)


def test_state_tensors_walk_nested_states_in_a_fixed_order():
    a, b, c = torch.zeros(1), torch.ones(2), torch.full((3,), 2.0)
    state = {"pos": a, "layers": [(b, None), {"S": c}]}
    assert [t.numel() for t in state_tensors(state)] == [2, 3, 1]  # "layers" sorts before "pos"
    copy = clone_state(state)
    assert all(x is not y and torch.equal(x, y) for x, y in zip(state_tensors(copy), state_tensors(state)))
    assert isinstance(copy["layers"][0], tuple)
    with pytest.raises(TypeError, match="state: expected tensors in dicts, lists and tuples, got a str"):
        list(state_tensors({"x": "y"}))


def test_a_growing_state_cannot_be_replayed():
    model = DecoderLM(preset("debug", mixer="softmax")).eval()
    _, state = model(torch.randint(0, 32, (2, 5)))
    _, after = model.step(torch.zeros(2, dtype=torch.long), state)
    with pytest.raises(ValueError, match="a step must keep the state's size to be replayed"):
        check_fixed_size(state, after)
    recurrent = DecoderLM(preset("debug", mixer="gated_deltanet")).eval()
    _, state = recurrent(torch.randint(0, 32, (2, 5)))
    check_fixed_size(state, recurrent.step(torch.zeros(2, dtype=torch.long), state)[1])
    assert has_growing_state(model) and not has_growing_state(recurrent)


def test_a_state_on_the_cpu_is_refused():
    model = DecoderLM(preset("debug", mixer="gated_deltanet")).eval()
    _, state = model(torch.randint(0, 32, (2, 5)))
    with pytest.raises(ValueError, match="GraphedDecoder: needs a state on a CUDA device, got one on cpu"):
        GraphedDecoder(model, state)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("autocast_dtype", [None, torch.bfloat16])
@pytest.mark.parametrize("mixer", ["gated_deltanet", "vla", "mamba2"])
def test_graphed_decoding_is_eager_decoding(mixer, autocast_dtype):
    """The same kernels on the same inputs, replayed: the same logits and states (to the last bit, here checked to
    float32's rounding), also under bf16 autocast as lm-throughput decodes."""
    torch.manual_seed(0)
    model = DecoderLM(preset("debug", mixer=mixer)).cuda().eval()
    autocast = torch.autocast("cuda", torch.bfloat16, enabled=autocast_dtype is not None)
    with torch.no_grad(), autocast:
        logits, state = model(torch.randint(0, 32, (3, 40), device="cuda"))
        decoder = GraphedDecoder(model, state, autocast_dtype)
        token = logits[:, -1].argmax(-1)
        for _ in range(12):
            eager_logits, state = model.step(token, state)
            torch.testing.assert_close(decoder(token), eager_logits, rtol=1e-5, atol=1e-5)
            token = eager_logits.argmax(-1)
    for graphed, eager in zip(state_tensors(decoder.state), state_tensors(state)):
        torch.testing.assert_close(graphed, eager, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"token: expected shape \[3\], got \[1\]"):
        decoder(token[:1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_graphed_decoding_refuses_a_kv_cache():
    model = DecoderLM(preset("debug", mixer="softmax")).cuda().eval()
    with torch.no_grad():
        _, state = model(torch.randint(0, 32, (2, 5), device="cuda"))
    with pytest.raises(ValueError, match="this model's state grows with the context"):
        GraphedDecoder(model, state)
