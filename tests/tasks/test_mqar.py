"""MQAR generators: token layout of each format, determinism by seed, config validation, the mixture."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from linattn.tasks import (
    IGNORE,
    ZOOLOGY_TEST_MIX,
    ZOOLOGY_TRAIN_MIX,
    Batch,
    CopyConfig,
    KLAMQARConfig,
    SNIAHConfig,
    VLAMQARConfig,
    ZoologyMQARConfig,
    generate,
    generate_mixture,
    mqar,
    zoology_mix,
)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def check_recall(batch: Batch, keys: torch.Tensor, values: torch.Tensor) -> None:
    """Every supervised position holds a key as input and that key's value as target."""
    mask = batch.supervised
    for b in range(batch.inputs.shape[0]):
        table = dict(zip(keys[b].tolist(), values[b].tolist()))
        for q, t in zip(batch.inputs[b][mask[b]].tolist(), batch.targets[b][mask[b]].tolist()):
            assert table[q] == t


def pairs(batch: Batch, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return batch.inputs[:, 0 : 2 * n : 2], batch.inputs[:, 1 : 2 * n : 2]


def assert_distinct_rows(x: torch.Tensor) -> None:
    assert (x.sort(dim=1).values.diff(dim=1) != 0).all()


# ---------------------------------------------------------------------------------------------------------------------
# VLA format
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 8, 24])
def test_vla_paper_layout(n):
    batch = generate(VLAMQARConfig(n_pairs=n), 64, gen())
    B, T, sep = 64, 3 * n + 1, 127
    assert batch.inputs.shape == batch.targets.shape == (B, T)
    assert batch.inputs.dtype == batch.targets.dtype == torch.int64
    keys, values = pairs(batch, n)
    assert_distinct_rows(keys)
    assert keys.max() <= 126 and values.max() <= 126 and keys.min() >= 0 and values.min() >= 0
    assert (batch.inputs[:, 2 * n] == sep).all() and (batch.inputs[:, : 2 * n] != sep).all()
    queries = batch.inputs[:, 2 * n + 1 :]
    assert (queries.unsqueeze(2) == keys.unsqueeze(1)).any(dim=2).all()  # every query is one of the keys
    expected_mask = torch.zeros(B, T, dtype=torch.bool)
    expected_mask[:, 2 * n + 1 :] = True
    assert torch.equal(batch.supervised, expected_mask)
    check_recall(batch, keys, values)
    assert (batch.slices["n_pairs"] == n).all() and (batch.slices["seq_len"] == T).all()


def test_vla_values_share_the_key_vocabulary_and_repeat():
    batch = generate(VLAMQARConfig(n_pairs=24), 256, gen())
    _, values = pairs(batch, 24)
    assert values.unique().numel() == 127  # every token of 0..126 shows up as a value
    assert (values.sort(dim=1).values.diff(dim=1) == 0).any()  # drawn with replacement


@pytest.mark.parametrize("filler", ["between", "after"])
def test_vla_long_context_filler(filler):
    n, T = 8, 128
    config = VLAMQARConfig(n_pairs=n, seq_len=T, filler=filler)
    assert config.filler_len == T - 3 * n - 1
    batch = generate(config, 32, gen())
    F = config.filler_len
    keys, values = pairs(batch, n)
    sep_at = 2 * n + F if filler == "between" else 2 * n
    queries_at = slice(sep_at + 1, sep_at + 1 + n)
    filler_at = slice(2 * n, 2 * n + F) if filler == "between" else slice(3 * n + 1, T)
    assert (batch.inputs[:, sep_at] == 127).all()
    assert (batch.inputs != 127).sum(dim=1).eq(T - 1).all()  # a single SEP
    fill = batch.inputs[:, filler_at]
    assert not (fill.unsqueeze(2) == keys.unsqueeze(1)).any()  # filler never repeats a key
    assert fill.max() <= 126
    mask = torch.zeros(32, T, dtype=torch.bool)
    mask[:, queries_at] = True
    assert torch.equal(batch.supervised, mask)
    check_recall(batch, keys, values)
    assert (batch.slices["seq_len"] == T).all()


def test_vla_all_queries_variant():
    n, T = 8, 64
    batch = generate(VLAMQARConfig(n_pairs=n, seq_len=T, n_queries=T - 2 * n - 1), 8, gen())
    assert batch.supervised[:, 2 * n + 1 :].all() and batch.supervised.sum() == 8 * (T - 2 * n - 1)
    check_recall(batch, *pairs(batch, n))


# ---------------------------------------------------------------------------------------------------------------------
# Zoology format
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("T", "n"), [(10, 2), *ZOOLOGY_TRAIN_MIX, (1024, 256)])
def test_zoology_layout(T, n):
    V, B = 8192, 16
    batch = generate(ZoologyMQARConfig(n_pairs=n, seq_len=T, vocab_size=V), B, gen())
    assert batch.inputs.shape == (B, T)
    keys, values = pairs(batch, n)
    assert_distinct_rows(keys)
    assert_distinct_rows(values)
    assert keys.min() >= 1 and keys.max() < V // 2 and values.min() >= V // 2 and values.max() < V
    mask = batch.supervised
    assert (mask.sum(dim=1) == n).all()
    assert not mask[:, : 2 * n].any()
    positions = mask.nonzero()[:, 1]
    assert (positions % 2 == 0).all()  # queries sit on even slots
    queried = batch.inputs[mask].view(B, n)  # in position order
    assert torch.equal(queried.sort(dim=1).values, keys.sort(dim=1).values)  # each key exactly once
    check_recall(batch, keys, values)
    assert (batch.slices["n_pairs"] == n).all() and (batch.slices["seq_len"] == T).all()


def test_zoology_non_query_tokens():
    config = ZoologyMQARConfig(n_pairs=4, seq_len=64, vocab_size=64)
    noisy = generate(config, 64, gen())
    rest = noisy.inputs[:, 8:][~noisy.supervised[:, 8:]]
    assert rest.unique().numel() > 32  # random tokens from the whole vocabulary
    quiet = generate(dataclasses.replace(config, random_non_queries=False), 64, gen())
    assert (quiet.inputs[:, 8:][~quiet.supervised[:, 8:]] == 0).all()


def test_zoology_power_law_gap():
    """One pair: P(slot g) ∝ g^(a−1) over g = 1 … (T − 2)/2; the first slot takes about 6.4% at a = 0.01."""
    T, a, B = 64, 0.01, 20_000
    batch = generate(ZoologyMQARConfig(n_pairs=1, seq_len=T, power_a=a, vocab_size=128), B, gen())
    slot = (batch.supervised.int().argmax(dim=1) - 2) // 2
    g = torch.arange(1, (T - 2) // 2 + 1, dtype=torch.float64)
    p = g ** (a - 1) / (g ** (a - 1)).sum()
    freq = torch.bincount(slot, minlength=len(g)).double() / B
    assert (freq - p).abs().max() < 0.01
    uniform = generate(ZoologyMQARConfig(n_pairs=1, seq_len=T, power_a=1.0, vocab_size=128), B, gen())
    assert ((uniform.supervised.int().argmax(dim=1) - 2) // 2).double().mean().sub(15).abs() < 0.5


# ---------------------------------------------------------------------------------------------------------------------
# KLA format
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("T", [256, 2048])
def test_kla_layout(T):
    n, V, B, low = 32, 8192, 16, 64
    batch = generate(KLAMQARConfig(seq_len=T), B, gen())
    assert batch.inputs.shape == (B, T)
    keys, values = pairs(batch, n)
    assert_distinct_rows(keys)
    assert keys.min() >= 0 and keys.max() < V // 2 and values.min() >= V // 2 and values.max() < V
    mask = batch.supervised
    assert (mask.sum(dim=1) == n).all()  # distinct positions, one per key
    positions = mask.nonzero()[:, 1]
    assert positions.min() >= low and positions.max() <= T - 2
    assert not mask[:, T - 1].any()
    queried = batch.inputs[mask].view(B, n)
    assert torch.equal(queried.sort(dim=1).values, keys.sort(dim=1).values)
    check_recall(batch, keys, values)
    noise = batch.inputs[:, 2 * n :][~mask[:, 2 * n :]]
    assert noise.min() >= 0 and noise.max() < V and noise.unique().numel() > V // 4


def test_kla_query_positions_follow_the_power_law():
    T, low, B = 256, 64, 20_000
    batch = generate(KLAMQARConfig(n_pairs=1, seq_len=T, min_query_pos=low, vocab_size=128), B, gen())
    g = batch.supervised.int().argmax(dim=1) - low + 1
    support = torch.arange(1, T - low, dtype=torch.float64)
    p = support**-0.9 / (support**-0.9).sum()
    assert abs((g == 1).double().mean().item() - p[0].item()) < 0.01
    assert g.min() >= 1 and g.max() <= T - 1 - low


# ---------------------------------------------------------------------------------------------------------------------
# Determinism, validation, dispatch, mixture
# ---------------------------------------------------------------------------------------------------------------------

CONFIGS = [
    VLAMQARConfig(),
    VLAMQARConfig(seq_len=256),
    ZoologyMQARConfig(),
    KLAMQARConfig(),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: type(c).__name__)
def test_same_seed_same_batch_and_global_rng_untouched(config):
    torch.manual_seed(123)
    state = torch.get_rng_state()
    a, b, c = generate(config, 8, gen(7)), generate(config, 8, gen(7)), generate(config, 8, gen(8))
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.inputs, c.inputs)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: VLAMQARConfig(n_pairs=0), "n_pairs"),
        (lambda: VLAMQARConfig(n_pairs=128), "n_pairs"),
        (lambda: VLAMQARConfig(n_pairs=8, seq_len=24), "seq_len"),
        (lambda: VLAMQARConfig(n_queries=0), "n_queries"),
        (lambda: VLAMQARConfig(filler="middle"), "filler"),
        (lambda: VLAMQARConfig(vocab_size=2), "vocab_size"),
        (lambda: ZoologyMQARConfig(seq_len=65), "seq_len"),
        (lambda: ZoologyMQARConfig(n_pairs=17, seq_len=64), "n_pairs"),
        (lambda: ZoologyMQARConfig(n_pairs=8, vocab_size=16), "n_pairs"),
        (lambda: ZoologyMQARConfig(power_a=0.0), "power_a"),
        (lambda: KLAMQARConfig(n_pairs=40), "min_query_pos"),
        (lambda: KLAMQARConfig(seq_len=96), "seq_len"),
        (lambda: KLAMQARConfig(n_pairs=8, vocab_size=8), "n_pairs"),
        (lambda: KLAMQARConfig(power_alpha=-1.0), "power_alpha"),
        (lambda: VLAMQARConfig(n_pairs=4.0), "n_pairs"),  # not an int: named here, not by torch later
        (lambda: VLAMQARConfig(n_pairs=True), "n_pairs"),
        (lambda: VLAMQARConfig(n_pairs=4, seq_len=20.0), "seq_len"),
        (lambda: ZoologyMQARConfig(n_pairs=4.0), "n_pairs"),
        (lambda: KLAMQARConfig(n_pairs=2.5), "n_pairs"),
    ],
)
def test_config_validation_names_the_field(make, field):
    with pytest.raises(ValueError, match=rf"^{field}: expected"):
        make()


def test_validation_message_reads_well():
    with pytest.raises(ValueError, match=r"n_pairs: expected 1 <= n_pairs <= 127 for vocab 128, got 130"):
        VLAMQARConfig(n_pairs=130)


def test_generate_dispatches_and_rejects_unknown_configs():
    for config in CONFIGS:
        assert torch.equal(generate(config, 4, gen()).inputs, mqar.generate(config, 4, gen()).inputs)
    assert generate(CopyConfig(), 2, gen()).inputs.shape == (2, 63)
    assert generate(SNIAHConfig(), 2, gen()).inputs.shape == (2, 1024)
    with pytest.raises(TypeError, match="config"):
        mqar.generate(CopyConfig(), 2, gen())


def test_mixture_pads_and_labels_each_example():
    configs = zoology_mix(ZOOLOGY_TEST_MIX, vocab_size=4096)
    batch = generate_mixture(configs, 64, gen(), pad_token=0)
    assert batch.inputs.shape == (64, 1024)
    lengths, n_pairs = batch.slices["seq_len"], batch.slices["n_pairs"]
    assert set(zip(lengths.tolist(), n_pairs.tolist())) <= set(ZOOLOGY_TEST_MIX)
    assert len(set(lengths.tolist())) > 3
    columns = torch.arange(1024)
    pad = columns >= lengths.unsqueeze(1)  # [B, T]
    assert (batch.inputs[pad] == 0).all() and (batch.targets[pad] == IGNORE).all()
    assert torch.equal(batch.supervised.sum(dim=1), n_pairs)
    again = generate_mixture(configs, 64, gen(), pad_token=0)
    assert torch.equal(batch.inputs, again.inputs) and torch.equal(batch.slices["n_pairs"], again.slices["n_pairs"])


def test_mixture_weights():
    batch = generate_mixture(zoology_mix(), 64, gen(), weights=[0, 0, 1, 0, 0])
    assert (batch.slices["n_pairs"] == 16).all() and batch.inputs.shape == (64, 256)
    with pytest.raises(ValueError, match="weights"):
        generate_mixture(zoology_mix(), 8, gen(), weights=[1, 2])
    with pytest.raises(ValueError, match="configs"):
        generate_mixture([], 8, gen())


def test_a_mixture_is_a_task_config():
    """`MQARMixtureConfig` is what a training run holds: `generate` draws `generate_mixture`'s batch from it."""
    from linattn.tasks import MQARMixtureConfig
    from linattn.tasks.mqar import seq_len_of

    mix = MQARMixtureConfig(tuple(zoology_mix()), (0, 0, 1, 0, 0))
    batch = generate(mix, 16, gen())
    assert torch.equal(batch.inputs, generate_mixture(zoology_mix(), 16, gen(), weights=[0, 0, 1, 0, 0]).inputs)
    assert seq_len_of(mix) == 256 and seq_len_of(MQARMixtureConfig(tuple(zoology_mix(ZOOLOGY_TEST_MIX)))) == 1024
    with pytest.raises(ValueError, match="^weights"):
        MQARMixtureConfig(tuple(zoology_mix()), (1, 2))
    with pytest.raises(ValueError, match="^configs"):
        MQARMixtureConfig(())
    with pytest.raises(TypeError, match="^configs"):
        MQARMixtureConfig((CopyConfig(),))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("config", [*CONFIGS, CopyConfig(), SNIAHConfig()], ids=lambda c: type(c).__name__)
def test_batches_are_built_on_the_generators_device(config):
    g = torch.Generator(device="cuda").manual_seed(0)
    batch, again = generate(config, 8, g), generate(config, 8, torch.Generator(device="cuda").manual_seed(0))
    assert batch.inputs.is_cuda and batch.targets.is_cuda and all(v.is_cuda for v in batch.slices.values())
    assert torch.equal(batch.inputs, again.inputs) and batch.supervised.any(dim=1).all()
    mixed = generate_mixture(zoology_mix(), 8, torch.Generator(device="cuda").manual_seed(0))
    assert mixed.inputs.is_cuda and torch.equal(mixed.supervised.sum(dim=1), mixed.slices["n_pairs"])
