"""The fla-style layer classes: fla's arguments build the `build_layer` mixers; fla's call; a cache; GVA; errors."""

from __future__ import annotations

import re

import pytest
import torch

from linattn.layers import GLA, KLA, VLA, DeltaNet, GatedDeltaNet, LinearAttention, Mamba2, build_layer
from linattn.layers.base import DECODE
from linattn.ops import ccq_query, delta_rule, gated_linear_attention, linear_attention, vla, vla_gate
from tests.ops.cases import rel_err

D = 32
TOL = 1e-8

# each class at a tiny size, with its own head sizes: K ≠ V where the class allows it
CASES = {
    "GatedDeltaNet": (GatedDeltaNet, {"num_heads": 2, "head_dim": 8}),  # fla's expand_v = 2: V = 16
    "KLA": (KLA, {"num_heads": 2, "head_dim": 8, "expand_v": 1, "num_v_heads": 4}),
    "DeltaNet": (DeltaNet, {"num_heads": 4, "use_gate": True}),
    "GLA": (GLA, {"num_heads": 4, "use_short_conv": True}),  # fla's expand_k = 0.5: K = 4, V = 8
    "LinearAttention": (LinearAttention, {"num_heads": 4, "expand_v": 0.5}),
    "VLA": (VLA, {"num_heads": 4, "expand_v": 2, "num_v_heads": 8}),
    "VLA-conv": (VLA, {"num_heads": 2, "use_short_conv": True, "conv_size": 3}),
    "Mamba2": (Mamba2, {"head_dim": 8, "state_size": 4}),  # expand 2: 8 heads
}


class StandInCache:
    """The two methods a layer calls on `past_key_values` (the HF cache offers them)."""

    def __init__(self):
        self.states = {}

    def get_layer_state(self, layer_idx):
        return self.states.get(layer_idx)

    def set_layer_state(self, layer_idx, state):
        self.states[layer_idx] = state


def make(name, seed=0, **options):
    cls, kwargs = CASES[name]
    torch.manual_seed(seed)
    return cls(hidden_size=D, layer_idx=3, **{**kwargs, **options}).double()


def x_of(B, T, seed=1):
    return torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def flat(state):
    out = []
    for key in sorted(state):
        out += list(state[key]) if isinstance(state[key], tuple) else [state[key]]
    return out


@pytest.mark.parametrize("name", CASES)
def test_builds_with_fla_arguments_and_trains(name):
    torch.manual_seed(0)
    cls, kwargs = CASES[name]
    layer = cls(hidden_size=D, **kwargs)
    x = torch.randn(2, 9, D, requires_grad=True)
    o, attentions, cache = layer(x)
    assert o.shape == x.shape and attentions is None and cache is None
    o.square().mean().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    for param_name, p in layer.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), param_name


# (class, fla-style arguments, build_layer name, n_heads, the mixer options they amount to)
SAME = [
    (GatedDeltaNet, {"num_heads": 4, "head_dim": 8, "expand_v": 1}, "gated_deltanet", 4, {}),
    (
        GatedDeltaNet,
        {"num_heads": 2, "head_dim": 8, "num_v_heads": 4, "use_gate": False, "conv_bias": True},
        "gated_deltanet",
        2,
        {"head_dim": 8, "expand_v": 2, "num_v_heads": 4, "output_gate": False, "conv_bias": True},
    ),
    (KLA, {"num_heads": 4, "head_dim": 8, "expand_v": 1}, "kla", 4, {}),
    (DeltaNet, {"num_heads": 4}, "deltanet", 4, {}),
    (GLA, {"num_heads": 4, "expand_k": 1}, "gla", 4, {}),
    (GLA, {"num_heads": 4}, "gla", 4, {"head_dim": 4, "expand_v": 2}),
    (LinearAttention, {"num_heads": 4}, "linear", 4, {}),
    (VLA, {"num_heads": 4}, "vla", 4, {}),
    (Mamba2, {"head_dim": 8, "state_size": 8, "expand": 1, "use_conv_bias": False}, "mamba2", 4, {}),
    (
        Mamba2,
        {"head_dim": 4, "state_size": 8, "n_groups": 2},
        "mamba2",
        16,
        {"head_dim": 4, "d_state": 8, "n_groups": 2, "conv_bias": True},
    ),
]


@pytest.mark.parametrize(("cls", "fla_args", "name", "n_heads", "options"), SAME)
def test_is_the_build_layer_mixer_it_configures(cls, fla_args, name, n_heads, options):
    """Same parameters (a strict load) and, with the same weights, the same output; an empty `options` says that fla's
    sizes here are `build_layer`'s defaults."""
    layer = cls(hidden_size=D, **fla_args).double()
    mixer = build_layer(name, D, n_heads, norm_eps=1e-5, **options).double()
    mixer.load_state_dict(layer.mixer.state_dict())
    x = x_of(2, 11)
    assert rel_err(layer(x)[0], mixer(x)[0]) <= TOL


@pytest.mark.parametrize("name", CASES)
def test_decoding_through_a_cache_equals_the_full_forward(name):
    """Prefill, then one token at a time with `use_cache`: the decode path (`backend=DECODE`) from the cached state
    gives the full forward's outputs, and the cache holds its final state."""
    layer = make(name)
    x = x_of(2, 12)
    y, _, _ = layer(x)
    backends = []
    forward = layer.mixer.forward
    layer.mixer.forward = lambda *args, **kwargs: backends.append(kwargs.get("backend")) or forward(*args, **kwargs)
    cache = StandInCache()
    outputs = [layer(x[:, :5], past_key_values=cache, use_cache=True)[0]]
    for t in range(5, 12):
        o, _, returned = layer(x[:, t : t + 1], past_key_values=cache, use_cache=True)
        assert returned is cache
        outputs.append(o)
    assert backends == [None] + [DECODE] * 7
    assert rel_err(torch.cat(outputs, dim=1), y) <= TOL
    _, final = layer.mixer(x)
    for a, b in zip(flat(cache.states[3]), flat(final), strict=True):
        assert rel_err(a, b) <= TOL


def test_without_use_cache_a_token_runs_the_chunked_form_and_mode_fused_recurrent_always_steps():
    layer = make("GatedDeltaNet")
    recurrent = make("GatedDeltaNet", mode="fused_recurrent")
    x = x_of(2, 7)
    assert rel_err(recurrent(x)[0], layer(x)[0]) <= TOL
    backends = []
    for lay in (layer, recurrent):
        forward = lay.mixer.forward
        lay.mixer.forward = lambda *a, f=forward, **k: backends.append(k.get("backend")) or f(*a, **k)
    layer(x[:, :1])
    recurrent(x)
    assert backends == [None, DECODE]


def test_packed_sequences_through_cu_seqlens():
    layer = make("KLA")
    x = x_of(1, 15)
    o, _, _ = layer(x, cu_seqlens=torch.tensor([0, 6, 15]))
    assert rel_err(o[:, :6], layer(x[:, :6])[0]) <= TOL
    assert rel_err(o[:, 6:], layer(x[:, 6:])[0]) <= TOL


def test_gva_shapes():
    layer = GatedDeltaNet(hidden_size=D, num_heads=2, head_dim=8, expand_v=2, num_v_heads=4)
    mixer = layer.mixer
    assert mixer.qkv.proj["q"].weight.shape == (2 * 8, D) and mixer.qkv.proj["v"].weight.shape == (4 * 16, D)
    assert mixer.b_proj.weight.shape == (4, D) and mixer.decay.A_log.shape == (4,)
    assert mixer.init_state(3)["S"].shape == (3, 4, 8, 16)
    assert layer(torch.randn(2, 5, D))[0].shape == (2, 5, D)


QK = re.compile(r"qkv\.(proj|convs)\.[qk]\..*|[qk]_proj\.weight|W_u")


@pytest.mark.parametrize("cls", [GatedDeltaNet, KLA, DeltaNet, GLA, LinearAttention, VLA], ids=lambda c: c.__name__)
def test_gva_is_the_op_run_with_query_and_key_heads_repeated(cls):
    """`num_heads=2, num_v_heads=4` equals 4 heads whose query / key weights (projections and convolutions) repeat
    each of the 2 heads for its 2 value heads, fla's grouping: value head j reads query / key head j // 2."""
    torch.manual_seed(0)
    gva = cls(hidden_size=D, num_heads=2, head_dim=8, expand_v=1, num_v_heads=4).double()
    plain = cls(hidden_size=D, num_heads=4, head_dim=8, expand_v=1).double()
    weights = {
        n: w.unflatten(0, (2, -1)).repeat_interleave(2, dim=0).flatten(0, 1) if QK.fullmatch(n) else w
        for n, w in gva.mixer.state_dict().items()
    }
    assert any(QK.fullmatch(n) for n in weights)
    plain.mixer.load_state_dict(weights)
    x = x_of(2, 13)
    assert rel_err(gva(x)[0], plain(x)[0]) <= TOL


def _head_first_calls():
    B, T, H, K, V = 2, 10, 3, 4, 5
    q, v = torch.randn(B, H, T, K), torch.randn(B, H, T, V)  # head-first
    gate, S, A = torch.rand(B, T, H), torch.zeros(B, H, K, V), torch.eye(K).expand(B, H, K, K)
    return {
        "delta_rule-beta": lambda: delta_rule(q, q, v, beta=gate),
        "delta_rule-g": lambda: delta_rule(q, q, v, g=-gate),
        "delta_rule-state": lambda: delta_rule(q, q, v, initial_state=S),
        "gla-g": lambda: gated_linear_attention(q, q, v, -torch.rand(B, T, H, K)),
        "linear-state": lambda: linear_attention(q, q, v, normalize=True, initial_state=(S, torch.zeros(B, H, K))),
        "vla-state": lambda: vla(q, q, v, q, initial_state=(S, A)),
        "vla_gate-state": lambda: vla_gate(q, q, initial_state=A),
        "ccq-lam": lambda: ccq_query(q, q, gate),
    }


@pytest.mark.parametrize("case", list(_head_first_calls()))
def test_head_first_inputs_get_the_clear_error(case):
    call = _head_first_calls()[case]
    arg = "k" if case.startswith("vla_gate") else "q"
    # the error names the argument whose shape gave it away, and both readings
    with pytest.raises(ValueError, match=rf"^\w+(\[0\])?: shape .* {arg} and the other token inputs are head-first"):
        call()


def test_bad_arguments_are_named():
    for build, argument in [
        (lambda: GatedDeltaNet(hidden_size=D, num_heads=4, head_dim=8, num_v_heads=6), "num_v_heads"),
        (lambda: KLA(hidden_size=D, num_heads=4, head_dim=8, num_v_heads=2), "num_v_heads"),
        (lambda: DeltaNet(hidden_size=D, num_heads=2, head_dim=8, num_v_heads=3), "num_v_heads"),
        (lambda: GatedDeltaNet(hidden_size=D, num_heads=4, head_dim=0), "head_dim"),
        (lambda: DeltaNet(hidden_size=D, num_heads=4, head_dim=-8), "head_dim"),
        (lambda: GatedDeltaNet(hidden_size=D, num_heads=0, head_dim=8), "num_heads"),
        (lambda: GatedDeltaNet(hidden_size=0, num_heads=4, head_dim=8), "hidden_size"),
        (lambda: GatedDeltaNet(hidden_size=D, num_heads=4, head_dim=8, expand_v=0.3), "expand_v"),
        (lambda: GLA(hidden_size=D, num_heads=4, expand_v=0), "expand_v"),
        (lambda: DeltaNet(hidden_size=D, num_heads=3), "expand_k: hidden_size · expand_k = 32 must be"),
        (lambda: DeltaNet(hidden_size=D, num_heads=4, head_dim=8, expand_k=1), "expand_k: give head_dim or expand_k"),
        (lambda: GLA(hidden_size=D, num_heads=4, mode="fused_chunk"), "mode"),
        (lambda: LinearAttention(hidden_size=D, num_heads=4, layer_idx=-1), "layer_idx"),
        (lambda: VLA(hidden_size=D, num_heads=5), "num_heads"),
        (lambda: Mamba2(hidden_size=D, head_dim=12), "head_dim"),
        (lambda: Mamba2(hidden_size=D, head_dim=8, num_heads=4), "num_heads: expected None or .* = 8"),
        (lambda: Mamba2(hidden_size=D, head_dim=8, n_groups=3), "n_groups"),
    ]:
        with pytest.raises(ValueError, match=f"^{argument}"):
            build()
    with pytest.raises(TypeError):
        GatedDeltaNet(hidden_size=D, num_heads=4, head_dim=8, use_gates=False)  # misspelt: never swallowed
    layer = DeltaNet(hidden_size=D, num_heads=4)
    with pytest.raises(ValueError, match=r"^hidden_states: expected shape \[B, T, hidden_size=32\]"):
        layer(torch.randn(2, 5, 16))
    with pytest.raises(ValueError, match="^output_attentions"):
        layer(torch.randn(2, 5, D), output_attentions=True)
    with pytest.raises(ValueError, match="^layer_idx: DeltaNet reads and writes its state in past_key_values"):
        layer(torch.randn(2, 5, D), past_key_values=StandInCache())


def _padded(lengths, T, left):
    xs = [x_of(1, n, seed=10 + i) for i, n in enumerate(lengths)]
    pad = [(0, 0, T - n, 0) if left else (0, 0, 0, T - n) for n in lengths]
    x = torch.cat([torch.nn.functional.pad(xi, p) for xi, p in zip(xs, pad)])
    mask = torch.stack([torch.arange(T) >= T - n if left else torch.arange(T) < n for n in lengths]).long()
    return xs, x, mask


@pytest.mark.parametrize("left", [False, True], ids=["right", "left"])
@pytest.mark.parametrize("name", CASES)
def test_a_padded_batch_with_its_mask_equals_the_sequences_alone(name, left):
    """The tokens' outputs and the cached states equal each sequence run alone; then a decode step with HF's mask
    (past and new columns) continues each sequence."""
    layer = make(name)
    lengths, T = [5, 9, 2], 9
    xs, x, mask = _padded(lengths, T, left)
    cache = StandInCache()
    o, _, _ = layer(x, attention_mask=mask, past_key_values=cache, use_cache=True)
    x_next = x_of(3, 1, seed=5)
    hf_mask = torch.cat([mask, mask.new_ones(3, 1)], dim=1)
    o_next, _, _ = layer(x_next, attention_mask=hf_mask, past_key_values=cache, use_cache=True)
    for i, (xi, n) in enumerate(zip(xs, lengths)):
        alone = StandInCache()
        y, _, _ = layer(xi, past_key_values=alone, use_cache=True)
        real = o[i, T - n :] if left else o[i, :n]
        assert rel_err(real, y[0]) <= TOL
        y_next, _, _ = layer(x_next[i : i + 1], past_key_values=alone, use_cache=True)
        assert rel_err(o_next[i], y_next[0]) <= TOL
        for a, b in zip(flat(cache.states[3]), flat(alone.states[3]), strict=True):
            assert rel_err(a[i : i + 1], b) <= TOL
