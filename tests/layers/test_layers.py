"""Every layer and option: full forward == prefill + token-by-token `step`; varlen/padding == separate runs."""

from __future__ import annotations

import importlib

import pytest
import torch

from linattn.layers import CCQ_LAYERS, LAYERS, build_layer
from linattn.layers.base import Mixer
from linattn.layers.gated_conv import GatedConv
from linattn.layers.padding import map_state
from linattn.layers.positions import rotary
from linattn.models import DecoderLM, ModelConfig
from tests.ops.cases import rel_err

D, H = 32, 4
TOL = 1e-8

VARIANTS = [(name, {}) for name in LAYERS]
VARIANTS += [(name, {"ccq": True}) for name in CCQ_LAYERS]
VARIANTS += [
    ("linear", {"normalize": False}),
    ("vla", {"normalizer": "none"}),
    ("vla", {"rho": 0.95}),
    ("vla", {"lam0": 2.0, "ccq": True, "ccq_options": {"centered": False}}),
    ("vla", {"short_conv": True, "conv_bias": True, "num_v_heads": 8}),
    ("deltanet", {"short_conv": False}),
    ("gated_deltanet", {"ccq": True, "ccq_options": {"normalize_keys": False}}),
    ("gated_deltanet", {"raw_keys": True}),
    ("gated_deltanet", {"output_gate": False}),
    ("kla", {"output_gate": False}),
    ("gla", {"output_gate": False}),
    ("mamba2", {"d_state": 12}),
    ("softmax", {"short_conv": True}),
    ("softmax", {"rope": True}),
    ("gla", {"short_conv": True}),
    ("gla", {"short_conv": True, "ccq": True}),
]
IDS = [f"{n}{'-' + '-'.join(f'{k}={v}' for k, v in o.items()) if o else ''}" for n, o in VARIANTS]


def make(name, options, seed=0):
    torch.manual_seed(seed)
    return build_layer(name, D, H, **options).double()


def x_of(B, T, seed=1):
    return torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _flat(state):
    if state is None:
        return []
    out = []
    for key in sorted(state):
        v = state[key]
        out += list(v) if isinstance(v, tuple) else [v]
    return out


@pytest.mark.parametrize(("name", "options"), VARIANTS, ids=IDS)
def test_prefill_then_step_equals_forward(name, options):
    layer = make(name, options)
    x = x_of(2, 45)
    y, final = layer(x)
    y_pre, state = layer(x[:, :17])
    steps = [y_pre]
    for t in range(17, 45):
        y_t, state = layer.step(x[:, t], state)
        steps.append(y_t[:, None])
    assert rel_err(torch.cat(steps, dim=1), y) <= TOL
    for a, b in zip(_flat(state), _flat(final)):
        assert rel_err(a, b) <= TOL


@pytest.mark.parametrize(("name", "options"), VARIANTS, ids=IDS)
def test_without_output_state_the_outputs_are_the_same_and_no_state_is_formed(name, options):
    """`output_state=False` (a training step's): the same `y`, plain, packed and padded, and None for the state."""
    layer = make(name, options)
    x = x_of(2, 21)
    cu = torch.tensor([0, 9, 21])
    mask = torch.ones(2, 21, dtype=torch.bool)
    mask[0, :5] = False
    for kwargs, x_call in (({}, x), ({"cu_seqlens": cu}, x[:1]), ({"attention_mask": mask}, x)):
        y, state = layer(x_call, **kwargs, output_state=False)
        assert state is None and rel_err(y, layer(x_call, **kwargs)[0]) <= TOL
    with pytest.raises(TypeError, match="^output_state: expected a bool"):
        layer(x, output_state=None)


def test_without_output_state_the_ops_are_asked_for_none(monkeypatch):
    """What the level of their kernels reads: no final state asked, so none formed (GDN with its CCQ read)."""
    module, ccq = (importlib.import_module(f"linattn.layers.{n}") for n in ("gated_deltanet", "ccq"))
    asked = []
    for mod, op in ((module, "delta_rule"), (ccq, "ccq_query")):
        original = getattr(mod, op)
        spy = lambda *a, _op=original, **k: asked.append(k["output_final_state"]) or _op(*a, **k)
        monkeypatch.setattr(mod, op, spy)
    layer = make("gated_deltanet", {"ccq": True})
    layer(x_of(1, 5), output_state=False)
    layer(x_of(1, 5))
    assert asked == [False, False, True, True]


@pytest.mark.parametrize(("name", "options"), VARIANTS, ids=IDS)
def test_init_state_is_the_empty_state(name, options):
    layer = make(name, options)
    x = x_of(3, 20)
    state = map_state(lambda t: t.double() if t.is_floating_point() else t, layer.init_state(3))
    assert rel_err(layer(x, state)[0], layer(x)[0]) <= TOL


@pytest.mark.parametrize(("name", "options"), VARIANTS, ids=IDS)
def test_varlen_and_padding_equal_separate_runs(name, options):
    layer = make(name, options)
    lengths = [7, 30, 1, 12]
    xs = [x_of(1, n, seed=10 + i) for i, n in enumerate(lengths)]
    alone = [layer(x) for x in xs]
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    y, state = layer(torch.cat(xs, dim=1), cu_seqlens=cu)
    assert rel_err(y, torch.cat([a[0] for a in alone], dim=1)) <= TOL
    if name != "softmax":  # a packed KV cache is not returned (its sequences have different lengths)
        for i, (_, s) in enumerate(alone):
            for a, b in zip(_flat(state), _flat(s)):
                assert rel_err(a[i : i + 1], b) <= TOL
    else:  # and decoding from what the packed prefill returned says so
        with pytest.raises(ValueError, match="^state: softmax attention keeps no KV cache after a packed prefill"):
            layer(x_of(len(lengths), 1), state)
    # right padding: the real positions of a padded batch equal the separate runs
    T = max(lengths)
    padded = torch.cat([torch.nn.functional.pad(x, (0, 0, 0, T - x.shape[1])) for x in xs])
    y_pad, _ = layer(padded)
    for i, (a, _) in enumerate(alone):
        assert rel_err(y_pad[i : i + 1, : lengths[i]], a) <= TOL


def test_state_sizes():
    assert build_layer("vla", 128, 4).state_size() == 4 * (32 * 32 * 2 + 32)
    assert build_layer("gated_deltanet", 128, 4).state_size() == 4 * 32 * 32 + 3 * 128 * 3
    assert build_layer("softmax", 128, 4).state_size(1000) == 2 * 128 * 1000
    with pytest.raises(ValueError, match="^seq_len"):
        build_layer("softmax", 128, 4).state_size()
    assert GatedConv(16).state_size() == 16 * 3


def test_build_layer_errors():
    with pytest.raises(ValueError, match="^name: unknown mixer 'fast'"):
        build_layer("fast", 32, 4)
    with pytest.raises(ValueError, match="^ccq: not available for 'softmax'"):
        build_layer("softmax", 32, 4, ccq=True)
    with pytest.raises(ValueError, match=r"^mixer_options: \['lambda0'\] not options of 'vla'; expected some of"):
        build_layer("vla", 32, 4, lambda0=0.1)  # misspelt option: never silently swallowed
    with pytest.raises(ValueError, match="^mixer_options: 'ccq' of 'gated_deltanet' expected a bool, got str 'false'"):
        build_layer("gated_deltanet", 32, 4, ccq="false")  # a string from a config file would switch it on
    with pytest.raises(ValueError, match="^n_heads"):
        build_layer("vla", 32, 5)
    with pytest.raises(ValueError, match="^normalizer"):
        build_layer("vla", 32, 4, normalizer="max")
    with pytest.raises(ValueError, match="^raw_keys: KLA's keys are raw already"):
        build_layer("kla", 32, 4, raw_keys=True)
    with pytest.raises(ValueError, match="^x: expected shape"):
        build_layer("linear", 32, 4)(torch.randn(2, 5, 16))
    with pytest.raises(ValueError, match="^x_t: expected shape"):
        layer = build_layer("linear", 32, 4)
        layer.step(torch.randn(2, 1, 32), layer.init_state(2))
    with pytest.raises(ValueError, match="^rope: rotates pairs of channels, so the head dim must be even, got 5"):
        build_layer("softmax", 20, 4, rope=True)
    with pytest.raises(ValueError, match="^rope_base: expected a number > 1, got 0.5"):
        build_layer("softmax", 32, 4, rope=True, rope_base=0.5)


def test_rotary_scores_depend_on_the_distance_alone():
    """RoPE: a query at p and a key at s score as at p + shift and s + shift, and not as at another distance."""
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 1, 1, 3, 16, generator=gen, dtype=torch.float64)

    def score(p, s):
        return (rotary(q, torch.tensor([[p]])) * rotary(k, torch.tensor([[s]]))).sum(-1)

    assert rel_err(score(7, 3), score(7 + 1000, 3 + 1000)) <= 1e-10
    assert rel_err(score(7, 3), score(3, 7)) > 1e-2
    assert torch.equal(rotary(q, torch.zeros(1, 1)), q)  # position 0: no rotation


@pytest.mark.parametrize(("name", "options"), VARIANTS, ids=IDS)
def test_bad_states_and_inputs_get_clear_errors(name, options):
    """A state of the wrong batch, another layer's state, no tokens, or an unknown backend: a ValueError that names
    what is wrong, at construction for the backend."""
    layer = make(name, options)
    _, state = layer(x_of(2, 5))
    with pytest.raises(ValueError, match=r"^state\['\w+'\](\[\d\])?: expected shape \[3[,\]].*\(batch 3\)"):
        layer(x_of(3, 5), state)
    with pytest.raises(ValueError, match=r"^state\['\w+'\](\[\d\])?: expected shape \[3[,\]]"):
        layer.step(x_of(3, 1)[:, 0], state)
    other = "vla" if name != "vla" else "gla"  # entries that differ from every other layer's
    _, foreign = make(other, {})(x_of(2, 5))
    with pytest.raises(ValueError, match=r"^state: expected \w+'s entries .* \(the state of another layer\?\)"):
        layer(x_of(2, 5), foreign)
    with pytest.raises(ValueError, match=r"^x: expected at least one time step \(T >= 1\)"):
        layer(x_of(2, 0))
    with pytest.raises(ValueError, match="^backend: expected one of .* got 'bogus'"):
        build_layer(name, D, H, backend="bogus", **options)
    with pytest.raises(ValueError, match="^backend: expected one of .* got 'bogus'"):
        layer(x_of(2, 5), backend="bogus")
    with pytest.raises(TypeError, match="^x: expected a floating-point tensor"):
        layer(torch.ones(2, 5, D, dtype=torch.long))
    with pytest.raises(ValueError, match="^x: expected the layer's device cpu, got meta"):
        layer(x_of(2, 5).to("meta"))
    with pytest.raises(
        TypeError, match=r"^x: expected the layer's dtype torch.float64 \(or autocast\), got torch.float32"
    ):
        layer(x_of(2, 5).float())
    nan = x_of(2, 5)
    nan[1, 2, 3] = float("nan")
    with pytest.raises(ValueError, match="^x: expected finite values"):  # not an error about an inner gate
        layer(nan)
    with pytest.raises(TypeError, match="^cu_seqlens: expected an integer tensor"):  # before a conv reads it
        layer(x_of(1, 9), cu_seqlens=torch.tensor([0.0, 4.0, 9.0]))
    with pytest.raises(ValueError, match="^cu_seqlens: expected to end at T = 9"):
        layer(x_of(1, 9), cu_seqlens=torch.tensor([0, 4, 7]))


@pytest.mark.parametrize(("rho", "T"), [(0.9, 1500), (0.99, 10_000)])
def test_a_forgetting_vla_layer_runs_on_inputs_that_leave_directions_unvisited(rho, T):
    """One input repeated, so `u` stays in one direction a head. Plain forgetting (`refresh=False`) lets the penalty
    decay in the others until the op refuses the state (training would stop on such data); the refresh keeps it:
    finite outputs and gradients, float32, head dim 32."""
    torch.manual_seed(0)
    x = torch.randn(1, 1, 64).expand(1, T, 64).contiguous()
    with pytest.raises(ValueError, match="^rho: the inverse penalty A"):
        build_layer("vla", 64, 2, rho=rho, refresh=False)(x)
    layer = build_layer("vla", 64, 2, rho=rho)
    y, state = layer(x)
    y.square().mean().backward()
    assert y.isfinite().all() and all(p.grad.isfinite().all() for p in layer.parameters())
    assert state["position"].tolist() == [T]
    with pytest.raises(TypeError, match=r"^state\['position'\]: expected the integer count of tokens seen"):
        layer(x[:, :3], {**state, "position": state["position"].float()})
    assert layer.state_size() == build_layer("vla", 64, 2).state_size()  # the counter is not state


def test_raw_keys_reach_the_delta_rule_unnormalised(monkeypatch):
    """GDN normalises its keys and KLA divides by ‖k‖² in the op; `raw_keys` (the KLA paper's ablation) does
    neither: the op gets the keys as the convolution made them, with `β = η`."""
    import linattn.layers.gated_deltanet as module

    calls = []

    def spy(q, k, v, **options):
        calls.append((k.norm(dim=-1), options["kaczmarz_eps"]))
        return delta_rule(q, k, v, **options)

    delta_rule = module.delta_rule
    monkeypatch.setattr(module, "delta_rule", spy)
    for name, options in (("gated_deltanet", {}), ("gated_deltanet", {"raw_keys": True}), ("kla", {})):
        make(name, options)(x_of(2, 9))
    (gdn, gdn_eps), (raw, raw_eps), (kla, kla_eps) = calls
    assert torch.allclose(gdn, torch.ones_like(gdn)) and gdn_eps is None
    assert not torch.allclose(raw, torch.ones_like(raw)) and raw_eps is None
    assert not torch.allclose(kla, torch.ones_like(kla)) and kla_eps is not None


@pytest.mark.parametrize(
    ("name", "module", "op"),
    [
        ("deltanet", "deltanet", "delta_rule"),
        ("gated_deltanet", "gated_deltanet", "delta_rule"),
        ("kla", "gated_deltanet", "delta_rule"),
        ("linear", "linear", "linear_attention"),
        ("mamba2", "mamba2", "gated_linear_attention"),
        ("vla", "vla", "vla"),
    ],
)
def test_the_precision_level_reaches_the_op(name, module, op, monkeypatch):
    """A layer's `precision` (also a model config's, through `mixer_options`) is what its op is called with; a
    mixer whose ops have no fast level (GLA, whose per-channel decay has its own kernels) takes no such argument,
    and a bad level is refused when the layer is built."""
    module = importlib.import_module(f"linattn.layers.{module}")
    seen = []
    original = getattr(module, op)
    monkeypatch.setattr(module, op, lambda *a, **k: seen.append(k["precision"]) or original(*a, **k))
    make(name, {"precision": "fast"})(x_of(1, 5))
    assert seen == ["fast"]
    with pytest.raises(ValueError, match="precision: expected one of"):
        make(name, {"precision": "quick"})
    with pytest.raises(ValueError, match=r"^mixer_options: \['precision'\] not options of 'gla'"):
        make("gla", {"precision": "fast"})
    config = ModelConfig(vocab_size=16, d_model=D, n_heads=H, mixer=name, mixer_options={"precision": "fast"})
    assert {m.precision for m in DecoderLM(config).modules() if isinstance(m, Mixer)} == {"fast"}


def test_the_ccq_read_takes_the_layers_precision(monkeypatch):
    ccq = importlib.import_module("linattn.layers.ccq")
    seen = []
    original = ccq.ccq_query
    monkeypatch.setattr(ccq, "ccq_query", lambda *a, **k: seen.append(k["precision"]) or original(*a, **k))
    make("gated_deltanet", {"precision": "fast", "ccq": True})(x_of(1, 5))
    assert seen == ["fast"]


@pytest.mark.parametrize(
    ("name", "module"), [("gated_deltanet", "gated_deltanet"), ("kla", "gated_deltanet"), ("gla", "gla")]
)
def test_without_the_output_gate_the_layer_is_the_gated_one_with_its_gate_taken_out(name, module, monkeypatch):
    """`output_gate=False` drops `W_g` and gives `W_o RMSNorm(o)`: the gated layer's output with `gate_output` made
    the identity, from the same weights."""
    gated, plain = make(name, {}), make(name, {"output_gate": False})
    assert plain.g_proj is None
    weights = {k: v for k, v in gated.state_dict().items() if not k.startswith("g_proj.")}
    plain.load_state_dict(weights)  # strict: the same parameters but W_g
    x = x_of(2, 19)
    y_plain, _ = plain(x)
    monkeypatch.setattr(importlib.import_module(f"linattn.layers.{module}"), "gate_output", lambda o, g, x, h: o)
    assert rel_err(y_plain, gated(x)[0]) < TOL


@pytest.mark.parametrize(("name", "options"), VARIANTS, ids=IDS)
def test_trains_under_autocast_with_float32_norms(name, options, monkeypatch):
    """CUDA's bf16 autocast runs norms in float32 and matmuls in bfloat16: the layers must hand the ops one dtype.
    (CPU autocast keeps normalize in bfloat16, so the float32 norm is imposed here.) RMSNorm gets its input in its
    weight's dtype: torch's fused kernel needs that, and falls back with a warning otherwise."""
    normalize, rms_norm = torch.nn.functional.normalize, torch.nn.functional.rms_norm

    def same_dtype_rms_norm(x, shape, weight=None, eps=None):
        assert weight is None or x.dtype == weight.dtype, f"rms_norm of {x.dtype} with a {weight.dtype} weight"
        return rms_norm(x, shape, weight, eps)

    monkeypatch.setattr(torch.nn.functional, "normalize", lambda x, *a, **k: normalize(x.float(), *a, **k))
    monkeypatch.setattr(torch.nn.functional, "rms_norm", same_dtype_rms_norm)
    torch.manual_seed(0)
    layer = build_layer(name, D, H, **options)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, _ = layer(torch.randn(2, 40, D))
    assert torch.isfinite(y).all()
    y.float().square().sum().backward()  # outside autocast, as training loops call it
    grads = [p.grad for p in layer.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize(
    ("name", "module", "op"), [("gated_deltanet", "gated_deltanet", "delta_rule"), ("vla", "vla", "vla")]
)
def test_under_autocast_the_ops_get_the_autocast_dtype(name, module, op, monkeypatch):
    """CUDA's autocast gives float32 unit keys (`F.normalize`, imposed here as on the CPU it keeps bfloat16) beside
    bfloat16 projections: the op gets them all in bfloat16, where its kernels take their bfloat16 products."""
    module = importlib.import_module(f"linattn.layers.{module}")
    normalize = torch.nn.functional.normalize
    monkeypatch.setattr(torch.nn.functional, "normalize", lambda x, *a, **k: normalize(x.float(), *a, **k))
    seen = []
    original = getattr(module, op)
    monkeypatch.setattr(module, op, lambda *a, **k: seen.append({x.dtype for x in a[:4]}) or original(*a, **k))
    layer = build_layer(name, D, H)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        layer(torch.randn(1, 9, D))
    assert seen == [{torch.bfloat16}]


def test_a_layer_on_the_meta_device_gives_meta_outputs():
    """As the ops do (sizes without data: how accelerate and HuggingFace build a model before loading it)."""
    y, _ = build_layer("gated_deltanet", D, H).to("meta")(torch.randn(1, 8, D, device="meta"))
    assert y.is_meta and y.shape == (1, 8, D)


@pytest.mark.parametrize(("name", "options"), VARIANTS, ids=IDS)
def test_a_bfloat16_layer_runs_in_bfloat16(name, options):
    torch.manual_seed(0)
    layer = build_layer(name, D, H, **options).to(torch.bfloat16)
    y, _ = layer(torch.randn(2, 20, D, dtype=torch.bfloat16))
    assert y.dtype == torch.bfloat16 and torch.isfinite(y).all()


FUSED = [(n, o) for n, o in VARIANTS if n in ("deltanet", "gated_deltanet", "kla", "linear", "gla", "mamba2", "vla")]


@pytest.mark.parametrize(("name", "options"), FUSED, ids=[IDS[VARIANTS.index(v)] for v in FUSED])
@torch.no_grad()
def test_decoding_with_the_fused_recurrent_kernel(name, options):
    """`step` through the fused recurrent Triton kernel (the default on CUDA; here in Triton's interpreter)."""
    torch.manual_seed(0)
    layer = build_layer(name, D, H, **options)
    layer.decode_backend = "fused_recurrent"
    x = torch.randn(2, 12, D, generator=torch.Generator().manual_seed(1))
    y, _ = layer(x, backend="naive")
    _, state = layer(x[:, :5], backend="naive")
    steps = []
    for t in range(5, 12):
        y_t, state = layer.step(x[:, t], state)
        steps.append(y_t[:, None])
    assert rel_err(torch.cat(steps, dim=1), y[:, 5:]) < 1e-5
