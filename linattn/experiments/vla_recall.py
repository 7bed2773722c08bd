"""The VLA paper's recall experiments on its TinyLM: MQAR capacity, MQAR over length, capacity and overload
(n up to twice the head dim), and Copy.

Where the authors' code differs from the paper's text, both are here: the long-context task as the text reads
(`vla-mqar-length-after`: filler after the queries), as we make it test distance (`vla-mqar-length`: filler before
SEP) and as the authors' code builds it (`vla-mqar-length-queries`: every token after the pairs a query); the copy as
a copy (`vla-copy`) and as the authors' notebook scores it (`vla-copy-identity`: each copied token its own target).
The capacity experiment also runs `--protocol long`, a budget of up to 20,000 steps at a constant learning rate that
records the steps softmax attention takes to solve the task (`protocols.long_budget`)."""

from __future__ import annotations

from linattn.experiments import paper
from linattn.experiments.experiment import Experiment
from linattn.experiments.mixers import MIXERS, VLA_COMPARISON
from linattn.experiments.protocols import Protocol, fair, long_budget, quick
from linattn.experiments.protocols import paper as paper_protocol
from linattn.experiments.runner import RunSpec
from linattn.models import preset
from linattn.tasks import CopyConfig, VLAMQARConfig


def _specs(
    mixers, settings: dict[int, object], protocol: Protocol, max_seq_len: int, n_heads: int = 4
) -> list[RunSpec]:
    specs = []
    for mixer in mixers:
        m = MIXERS[mixer]
        model = preset("vla-tinylm", mixer=m.layer, mixer_options=m.options, max_seq_len=max_seq_len, n_heads=n_heads)
        for x, task in settings.items():
            for train in protocol.configs():
                specs.append(RunSpec(mixer, x, task, model, train, protocol.eval_batches, protocol.eval_batch_size))
    return specs


def _protocol(name: str, is_quick: bool, steps: int, batch_size: int, warmup: int, fair_steps: int) -> Protocol:
    """The paper's recipe, the fair one (batch 256 for up to `fair_steps`: softmax attention needs far more examples
    than the paper's budget to form its induction circuit; on a GPU a step of 256 costs about what one of 64 does),
    or the long one (`long_budget`, the paper's batch). `--quick` shrinks any (at lr 3e-3, or a 1e-3/3e-3 sweep)."""
    if name == "paper":
        protocol = paper_protocol(steps, batch_size, warmup)
    elif name == "long":
        protocol = long_budget(batch_size=batch_size, warmup=warmup)
    else:
        protocol = fair(fair_steps, 256, warmup)
    if is_quick:
        protocol = quick(protocol, lrs=(3e-3,) if name == "paper" else (1e-3, 3e-3))
    return protocol


def capacity_plan(protocol_name: str, is_quick: bool, mixers) -> list[RunSpec]:
    ns = (4, 8) if is_quick else (4, 8, 12, 16, 24)
    protocol = _protocol(protocol_name, is_quick, 3000, 64, 300, fair_steps=5000)
    return _specs(mixers, {n: VLAMQARConfig(n_pairs=n) for n in ns}, protocol, max_seq_len=128)


def length_plan(filler: str):
    """MQAR with n = 8 made up to T tokens by filler `"between"` the pairs and SEP (every query at least `T − 25`
    tokens from its key) or `"after"` the queries (the paper's words: a causal model's predictions then see the
    `T = 25` task, and T only lengthens an unsupervised tail), or with no filler and every token after SEP a query
    (`"queries"`: `n_q = T − 17`, the authors' code; queries near and far from their keys, every one supervised)."""

    def task(T: int) -> VLAMQARConfig:
        if filler == "queries":
            return VLAMQARConfig(n_pairs=8, seq_len=T, n_queries=T - 17)
        return VLAMQARConfig(n_pairs=8, seq_len=T, filler=filler)

    def plan(protocol_name: str, is_quick: bool, mixers) -> list[RunSpec]:
        lengths = (49, 128) if is_quick else (49, 64, 128, 256, 512)
        protocol = _protocol(protocol_name, is_quick, 2000, 64, 200, fair_steps=5000)
        return _specs(mixers, {T: task(T) for T in lengths}, protocol, max_seq_len=512)

    return plan


def overload_plan(d_h: int):
    """MQAR with n from d_h/4 to 2·d_h pairs, the TinyLM's d_model 128 split into heads of `d_h`: a head's state
    `[d_h, d_h]` can hold at most d_h independent pairs, so recall must degrade from n = d_h on."""

    def plan(protocol_name: str, is_quick: bool, mixers) -> list[RunSpec]:
        ns = (d_h // 2, d_h, 2 * d_h) if is_quick else tuple(d_h * f // 4 for f in (1, 2, 3, 4, 5, 6, 8))
        protocol = _protocol(protocol_name, is_quick, 3000, 64, 300, fair_steps=5000)
        settings = {n: VLAMQARConfig(n_pairs=n) for n in ns}
        return _specs(mixers, settings, protocol, max_seq_len=3 * max(ns) + 1, n_heads=128 // d_h)

    return plan


def copy_plan(identity: bool):
    """Copy 31 tokens; with `identity` each copied token is its own target (the authors' notebook)."""

    def plan(protocol_name: str, is_quick: bool, mixers) -> list[RunSpec]:
        protocol = _protocol(protocol_name, is_quick, 1500, 32, 150, fair_steps=3000)
        return _specs(mixers, {31: CopyConfig(n_tokens=31, identity=identity)}, protocol, max_seq_len=128)

    return plan


EXPERIMENTS = [
    Experiment(
        "vla-mqar-capacity",
        "MQAR (VLA format), T = 3n+1, n ∈ {4, 8, 12, 16, 24}: recall vs number of pairs",
        "n_pairs",
        capacity_plan,
        VLA_COMPARISON,
        paper.VLA_MQAR_CAPACITY,
        protocols=("paper", "fair", "long"),
    ),
    Experiment(
        "vla-mqar-length",
        "MQAR (VLA format), n = 8, T ∈ {49, 64, 128, 256, 512} with filler before SEP",
        "seq_len",
        length_plan("between"),
        VLA_COMPARISON,
        paper.VLA_MQAR_LENGTH,
    ),
    Experiment(
        "vla-mqar-length-after",
        "MQAR (VLA format), n = 8, T ∈ {49, 64, 128, 256, 512} with filler after the queries (the paper's placement: "
        "every query sees what it sees at T = 25)",
        "seq_len",
        length_plan("after"),
        VLA_COMPARISON,
        paper.VLA_MQAR_LENGTH,
    ),
    Experiment(
        "vla-mqar-length-queries",
        "MQAR (VLA format), n = 8, T ∈ {49, 64, 128, 256, 512}, every token after SEP a query (the authors' code: "
        "n_q = T − 17)",
        "seq_len",
        length_plan("queries"),
        VLA_COMPARISON,
        paper.VLA_MQAR_LENGTH,
    ),
    *(
        Experiment(
            f"vla-mqar-overload{'' if d_h == 32 else f'-dh{d_h}'}",
            f"MQAR (VLA format), heads of d_h = {d_h}, n from {d_h // 4} to {2 * d_h}: recall at and past capacity",
            "n_pairs",
            overload_plan(d_h),
            ("linear", "deltanet", "vla"),
            paper.vla_mqar_overload(d_h),
        )
        for d_h in (32, 16)
    ),
    Experiment("vla-copy", "Copy 31 tokens after SEP", "n_tokens", copy_plan(False), VLA_COMPARISON, paper.VLA_COPY),
    Experiment(
        "vla-copy-identity",
        "31 tokens, SEP, the same 31 tokens, each its own target (the authors' notebook: an identity task, no copy)",
        "n_tokens",
        copy_plan(True),
        VLA_COMPARISON,
        paper.VLA_COPY,
    ),
]
