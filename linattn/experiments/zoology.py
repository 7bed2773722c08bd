"""Zoology's MQAR (Arora et al. 2023), the field's recall benchmark: recall against the size of the recurrent state.

Keys from `[1, V/2)`, values from `[V/2, V)`; each key queried once at an even slot drawn by a power law
(`ZoologyMQARConfig`). The model is the `zoology` preset (2 layers, each a gated short convolution then the mixer, no
MLP, no positions, vocabulary 8,192), heads of 64 channels, at widths `d_model ∈ {64, 128, 256, 512}`: the swept
setting, which sets each mixer's state size. Every run trains on Zoology's mix (`ZOOLOGY_TRAIN_MIX`, weighted as
its example counts) and is validated and tested on its test mix (`ZOOLOGY_TEST_MIX`, up to 256 pairs in 1,024
tokens, the settings drawn uniformly), scored as Zoology scores it: each example's accuracy, averaged
(`acc_example_mean`). The plot puts accuracy against the state size at T = 1,024 (softmax attention's is its KV
cache), with the published reference points: DeltaNet ≈ 0.79 at 9e3 floats, GDN ≈ 0.89 at 1.7e4.

The recipe is ours (`fair`): Zoology's data and model, AdamW (wd 0.1), batch 128, up to 4,000 steps (warmup 400,
cosine), stopping at a validation accuracy of 0.995, the learning rate chosen per mixer and width from 3e-4, 1e-3
and 3e-3 on validation, and from 1e-4 too where the grid's lowest, 3e-4, was the best (`Experiment.lr_below`).
`--quick` shrinks it for a 2-core CPU: widths 32 and 64, vocabulary 256, a mix of 2 – 8 pairs in 32 – 64 tokens
tested to 16 pairs in 128, 500 steps at lr 3e-3.
"""

from __future__ import annotations

from dataclasses import replace

from linattn.experiments.experiment import Experiment
from linattn.experiments.mixers import MIXERS
from linattn.experiments.protocols import Protocol, fair, quick
from linattn.experiments.runner import RunSpec
from linattn.models import preset
from linattn.tasks import ZOOLOGY_TEST_MIX, ZOOLOGY_TRAIN_MIX, ZOOLOGY_TRAIN_WEIGHTS, MQARMixtureConfig, zoology_mix

WIDTHS, QUICK_WIDTHS = (64, 128, 256, 512), (32, 64)
HEAD_DIM = 64  # channels a head (one head below 64)
QUICK_VOCAB = 256
QUICK_TRAIN_MIX, QUICK_TEST_MIX = ((32, 2), (64, 4), (64, 8)), ((32, 2), (64, 4), (64, 8), (128, 16))
# the published reference points: mixer -> {state size in floats: accuracy}
REFERENCE = {"deltanet": {9_000: 0.79}, "gated_deltanet": {17_000: 0.89}}
COMPARISON = (
    "softmax", "linear", "gla", "mamba2", "deltanet", "gated_deltanet", "kla", "vla", "ccq-gated_deltanet"
)  # fmt: skip


def _protocol(is_quick: bool) -> Protocol:
    protocol = fair(4000, 128, 400)
    protocol = replace(protocol, train=replace(protocol.train, weight_decay=0.1, eval_every=500))
    return quick(protocol, lrs=(3e-3,)) if is_quick else protocol


def plan(protocol_name: str, is_quick: bool, mixers) -> list[RunSpec]:
    """One run per mixer, width and learning rate: trained on the training mix, tested on the test mix."""
    protocol = _protocol(is_quick)
    if is_quick:
        train_mix = MQARMixtureConfig(tuple(zoology_mix(QUICK_TRAIN_MIX, vocab_size=QUICK_VOCAB)))
        test_mix = MQARMixtureConfig(tuple(zoology_mix(QUICK_TEST_MIX, vocab_size=QUICK_VOCAB)))
        widths, vocab = QUICK_WIDTHS, QUICK_VOCAB
    else:
        train_mix = MQARMixtureConfig(tuple(zoology_mix(ZOOLOGY_TRAIN_MIX)), ZOOLOGY_TRAIN_WEIGHTS)
        test_mix = MQARMixtureConfig(tuple(zoology_mix(ZOOLOGY_TEST_MIX)))
        widths, vocab = WIDTHS, preset("zoology").vocab_size
    batches = {"eval_batches": protocol.eval_batches, "eval_batch_size": protocol.eval_batch_size}
    specs = []
    for mixer in mixers:
        m = MIXERS[mixer]
        for d in widths:
            heads = max(1, d // HEAD_DIM)
            model = preset(
                "zoology", mixer=m.layer, mixer_options=m.options, d_model=d, n_heads=heads, vocab_size=vocab
            )
            for train in protocol.configs():
                specs.append(
                    RunSpec(mixer, d, train_mix, model, train, **batches, val_task=test_mix, test_task=test_mix)
                )
    return specs


EXPERIMENTS = [
    Experiment(
        "zoology-mqar",
        "Zoology's MQAR: trained on its mix (4 – 64 pairs, 64 – 256 tokens), tested to 256 pairs in 1,024 tokens; "
        "2-layer Zoology models (gated short convolution, then the mixer), widths 64 – 512: recall against state size",
        "d_model",
        plan,
        COMPARISON,
        REFERENCE,
        protocols=("fair",),
        metric="acc_example_mean",
        x_axis="state_size",
        lr_below=1e-4,
    ),
]
