"""Multi-query associative recall (MQAR) in the three formats the papers use.

- VLA (`VLAMQARConfig`, `generate_vla`): `k v … k v [filler] SEP q q …`, vocab 128, SEP = 127; keys distinct
  from 0..126, values from 0..126 with replacement; queries right after SEP, keys drawn with replacement.
- Zoology (`ZoologyMQARConfig`, `generate_zoology`): `k v … k v` then random tokens; keys distinct from
  [1, V/2), values distinct from [V/2, V); each key queried once at an even slot, power law a = 0.01.
- KLA (`KLAMQARConfig`, `generate_kla`): `k v … k v` then uniform noise; keys distinct from [0, V/2), values
  distinct from [V/2, V); each key queried once at a position in [64, T − 2], power law α = 0.1.

In every format the target of a query position is the queried key's value, and only query positions carry loss.

Every generator is pure: `generate(config, batch_size, generator) -> Batch` draws only from the local
`torch.Generator` and builds the batch on `generator.device`; the same seed gives the same batch.
`generate_mixture` mixes several settings (e.g. Zoology's training mix) in one right-padded batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from linattn.tasks.batch import IGNORE, Batch
from linattn.tasks.checks import check_int, check_positive

# Settings named by the papers' protocols; Zoology's come from HazyResearch/zoology,
# zoology/experiments/paper_configs/arxiv24_based_figure2/configs.py (seq_len, n_pairs).
VLA_N_PAIRS = (4, 8, 12, 16, 24)  # paper MQAR table, T = 3n+1
VLA_LONG_SEQ_LENS = (49, 64, 128, 256, 512)  # long-context variant, n = 8
ZOOLOGY_TRAIN_MIX = ((64, 4), (128, 8), (256, 16), (256, 32), (256, 64))
ZOOLOGY_TRAIN_WEIGHTS = (100_000, 20_000, 20_000, 20_000, 20_000)  # Zoology's example counts per setting
ZOOLOGY_TEST_MIX = ((64, 4), (64, 8), (64, 16), (128, 32), (256, 64), (512, 128), (1024, 256))
KLA_EVAL_SEQ_LENS = (256, 512, 1024, 2048)  # trained at 256


# ---------------------------------------------------------------------------------------------------------------------
# Configs
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VLAMQARConfig:
    """The VLA paper's MQAR: `[k1 v1 … kn vn SEP q1 q2 …]`, SEP = `vocab_size − 1`."""

    n_pairs: int = 8  # n: distinct keys, each with a value
    vocab_size: int = 128  # keys and values share 0..vocab_size-2; SEP = vocab_size - 1
    n_queries: int | None = None  # None: n_pairs queries (the paper's T = 3n+1)
    seq_len: int | None = None  # None: 2n + 1 + n_queries; longer lengths are made up with filler
    filler: Literal["between", "after"] = "between"  # where filler goes: before SEP, or after the queries

    def __post_init__(self) -> None:
        check_int("vocab_size", self.vocab_size, 3)
        check_int("n_pairs", self.n_pairs, 1)
        if self.seq_len is not None:
            check_int("seq_len", self.seq_len, 1)
        n, sep = self.n_pairs, self.vocab_size - 1
        if not 1 <= n <= sep:
            raise ValueError(f"n_pairs: expected 1 <= n_pairs <= {sep} for vocab {self.vocab_size}, got {n}")
        if self.n_queries is not None:
            check_int("n_queries", self.n_queries, 1)
        if self.filler not in ("between", "after"):
            raise ValueError(f"filler: expected 'between' or 'after', got {self.filler!r}")
        shortest = 2 * n + 1 + self.queries
        if self.seq_len is not None and self.seq_len < shortest:
            raise ValueError(
                f"seq_len: expected >= 2 * n_pairs + 1 + n_queries = {shortest} for n_pairs {n}, got {self.seq_len}"
            )
        if self.filler_len > 0 and n > sep - 1:
            raise ValueError(
                f"n_pairs: expected n_pairs <= {sep - 1} when there is filler (filler tokens are the non-keys of "
                f"0..{sep - 1}), got {n}"
            )

    @property
    def queries(self) -> int:
        """Number of query positions."""
        return self.n_pairs if self.n_queries is None else self.n_queries

    @property
    def length(self) -> int:
        """Total sequence length `T`."""
        return 2 * self.n_pairs + 1 + self.queries if self.seq_len is None else self.seq_len

    @property
    def filler_len(self) -> int:
        """Number of filler tokens: `T − (2n + 1 + n_queries)`."""
        return self.length - (2 * self.n_pairs + 1 + self.queries)


@dataclass(frozen=True)
class ZoologyMQARConfig:
    """Zoology's MQAR (Arora et al. 2023): pairs, then each key queried once at an even slot drawn by a power law."""

    n_pairs: int = 8  # n: keys from [1, V/2), values from [V/2, V), both distinct within an example
    seq_len: int = 64  # T, even, >= 4 n
    vocab_size: int = 8192  # V (Zoology's default)
    power_a: float = 0.01  # p(g) ∝ g^(a−1) over the pair-slot gap g = 1, 2, …; a = 1 is uniform
    random_non_queries: bool = True  # non-query slots: random tokens from [0, V) (False: token 0, never a key)

    def __post_init__(self) -> None:
        check_int("vocab_size", self.vocab_size, 4)
        check_int("seq_len", self.seq_len, 4)
        if self.seq_len % 2:
            raise ValueError(f"seq_len: expected an even length (queries sit on even slots), got {self.seq_len}")
        check_int("n_pairs", self.n_pairs, 1)
        most = min(self.vocab_size // 2 - 1, self.seq_len // 4)
        if not 1 <= self.n_pairs <= most:
            raise ValueError(
                f"n_pairs: expected 1 <= n_pairs <= {most} for vocab {self.vocab_size} and seq_len {self.seq_len} "
                f"(keys from [1, V/2), 4 * n_pairs <= seq_len), got {self.n_pairs}"
            )
        check_positive("power_a", self.power_a)


@dataclass(frozen=True)
class KLAMQARConfig:
    """The KLA paper's MQAR: pairs first, then uniform noise; each key queried once at a power-law position."""

    n_pairs: int = 32  # n: keys from [0, V/2), values from [V/2, V), both distinct within an example
    seq_len: int = 256  # T: train at 256, evaluate at KLA_EVAL_SEQ_LENS
    vocab_size: int = 8192  # V; noise tokens are uniform over [0, V)
    power_alpha: float = 0.1  # p(g) ∝ g^(α−1), g = position − min_query_pos + 1; α = 1 is uniform
    min_query_pos: int = 64  # queries sit at distinct positions in [min_query_pos, T − 2]

    def __post_init__(self) -> None:
        check_int("vocab_size", self.vocab_size, 2)
        check_int("n_pairs", self.n_pairs, 1)
        check_int("seq_len", self.seq_len, 1)
        check_int("min_query_pos", self.min_query_pos, 0)
        most = self.vocab_size // 2
        if not 1 <= self.n_pairs <= most:
            raise ValueError(
                f"n_pairs: expected 1 <= n_pairs <= {most} for vocab {self.vocab_size}, got {self.n_pairs}"
            )
        if self.min_query_pos < 2 * self.n_pairs:
            raise ValueError(
                f"min_query_pos: expected >= 2 * n_pairs = {2 * self.n_pairs} (queries come after the pairs), "
                f"got {self.min_query_pos}"
            )
        shortest = self.min_query_pos + self.n_pairs + 1
        if self.seq_len < shortest:
            raise ValueError(
                f"seq_len: expected >= min_query_pos + n_pairs + 1 = {shortest} (room for {self.n_pairs} distinct "
                f"query positions in [min_query_pos, seq_len - 2]), got {self.seq_len}"
            )
        check_positive("power_alpha", self.power_alpha)


MQARConfig = VLAMQARConfig | ZoologyMQARConfig | KLAMQARConfig


# ---------------------------------------------------------------------------------------------------------------------
# Sampling helpers (all vectorised over the batch)
# ---------------------------------------------------------------------------------------------------------------------


def _random_subset(batch_size: int, population: int, size: int, generator: torch.Generator) -> torch.Tensor:
    """`[B, size]` int64: per row, `size` distinct draws from `range(population)` in random order."""
    scores = torch.rand(batch_size, population, generator=generator, device=generator.device)  # [B, P]
    return scores.topk(size, dim=1).indices


def _power_law_subset(
    batch_size: int, population: int, size: int, exponent: float, generator: torch.Generator
) -> torch.Tensor:
    """`[B, size]` int64: per row, `size` distinct `i ∈ range(population)` drawn one after another without
    replacement with `p(i) ∝ (i + 1)^(exponent − 1)` (what `numpy.random.choice(replace=False, p=…)` does).

    Gumbel top-k: `argtopk(log w_i + G_i)` with i.i.d. Gumbel `G_i` is exactly successive sampling without
    replacement, and it is one vectorised `topk` instead of a loop over rows."""
    device = generator.device
    log_w = (exponent - 1) * torch.arange(1, population + 1, device=device, dtype=torch.float64).log()  # [P]
    u = torch.rand(batch_size, population, generator=generator, device=device, dtype=torch.float64)  # [B, P]
    gumbel = -(-u.clamp_min(1e-300).log()).log()
    return (log_w + gumbel).topk(size, dim=1).indices


def _interleave(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """`[B, n], [B, n] -> [B, 2n]`: `k1 v1 k2 v2 …`."""
    return torch.stack([keys, values], dim=2).flatten(1)


def _slices(batch_size: int, device: torch.device, **values: int) -> dict[str, torch.Tensor]:
    return {name: torch.full((batch_size,), v, dtype=torch.int64, device=device) for name, v in values.items()}


# ---------------------------------------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------------------------------------


def generate_vla(config: VLAMQARConfig, batch_size: int, generator: torch.Generator) -> Batch:
    """VLA-paper MQAR: `[k1 v1 … kn vn (filler) SEP q1 … qm (filler)]`, target `v(q_j)` at each query.

    Keys are `n` distinct tokens of `0..V−2`, values are drawn from `0..V−2` with replacement (one shared vocabulary),
    each query is one of the `n` keys drawn with replacement; loss only at the query positions.
    With the defaults (`n_queries = n`, `seq_len = None`) `T = 3n + 1` and there is no filler.

    Longer sequences (the long-context variant, `n = 8`, `T ∈ VLA_LONG_SEQ_LENS`) are made up with
    `F = T − (2n + 1 + m)` filler tokens. `filler="between"` (default) puts them between the pairs and SEP, so every
    query is at least `F` tokens away from its key and `T` measures recall over distance; `filler="after"` puts
    them after the queries, where a causal model's predictions cannot see them (the task is then the `T = 3n + 1`
    one with a longer tail). Filler tokens are drawn uniformly from the tokens of `0..V−2` that are *not* keys of
    the example: real interference for the state, but never a second `key → something` association that would make
    a target ambiguous. (To fill the whole tail with queries instead, set `n_queries = T − 2n − 1`.)

    Worked example, `n_pairs=2, vocab_size=128` (SEP = 127, `.` = IGNORE), keys 17, 42 with values 99, 5:
    ```
    position   0   1   2   3    4   5   6
    inputs    17  99  42   5  127  42  17
    targets    .   .   .   .    .   5  99
    ```
    With `seq_len=10` (F = 3) and `filler="between"`, three non-key tokens come before SEP:
    ```
    position   0   1   2   3   4   5   6    7   8   9
    inputs    17  99  42   5  63   8  99  127  17  17
    targets    .   .   .   .   .   .   .    .  99  99
    ```
    Returns `inputs, targets: [B, T]` int64 and slices `n_pairs`, `seq_len: [B]`.
    """
    B, n, m, F = batch_size, config.n_pairs, config.queries, config.filler_len
    sep, device = config.vocab_size - 1, generator.device

    order = torch.rand(B, sep, generator=generator, device=device).argsort(dim=1)  # [B, V-1]: a shuffle of 0..V-2
    keys = order[:, :n]  # [B, n] distinct
    values = torch.randint(0, sep, (B, n), generator=generator, device=device)  # [B, n]
    pick = torch.randint(0, n, (B, m), generator=generator, device=device)  # [B, m] which key each query asks
    queries, answers = keys.gather(1, pick), values.gather(1, pick)  # [B, m]
    if F > 0:
        non_keys = order[:, n:]  # [B, V-1-n]
        filler = non_keys.gather(1, torch.randint(0, sep - n, (B, F), generator=generator, device=device))  # [B, F]
    else:
        filler = torch.zeros(B, 0, dtype=torch.int64, device=device)

    def const(width: int, value: int) -> torch.Tensor:
        return torch.full((B, width), value, dtype=torch.int64, device=device)

    pairs = _interleave(keys, values)  # [B, 2n]
    if config.filler == "between":
        inputs = torch.cat([pairs, filler, const(1, sep), queries], dim=1)  # [B, T]
        targets = torch.cat([const(2 * n + F + 1, IGNORE), answers], dim=1)
    else:
        inputs = torch.cat([pairs, const(1, sep), queries, filler], dim=1)
        targets = torch.cat([const(2 * n + 1, IGNORE), answers, const(F, IGNORE)], dim=1)
    return Batch(inputs, targets, _slices(B, device, n_pairs=n, seq_len=config.length))


def generate_zoology(config: ZoologyMQARConfig, batch_size: int, generator: torch.Generator) -> Batch:
    """Zoology MQAR: context `k1 v1 … kn vn`, then each key once at an even slot, target its value there.

    Conventions of HazyResearch/zoology `zoology/data/multiquery_ar.py` (`multiquery_ar`, checked at commit d88d6f5):
    keys are `n` distinct tokens of `[1, V/2)` (token 0 is the blank, never a key), values `n` distinct tokens of
    `[V/2, V)`. The `T − 2n` tokens after the context are `(T − 2n)/2` slots of two; the key of each pair goes to
    the first token of a slot `g − 1` (absolute position `2n + 2(g − 1)`, always even), the slots drawn without
    replacement with `p(g) ∝ g^(a−1)`, `g = 1 … (T − 2n)/2`, `a = power_a` — so most queries come soon after the
    context. The target at a query position is its key's value (the value itself never reappears in the input).
    Every other position holds a random token from `[0, V)` (`random_non_queries`, may coincide with a key or
    value), or 0 when that is off. Requires `T` even and `4n ≤ T` (as Zoology asserts).

    Worked example, `n_pairs=2, seq_len=10, vocab_size=16` (keys in [1, 8), values in [8, 16), `.` = IGNORE):
    keys 3, 6 with values 12, 9; slots 0 and 2 drawn, i.e. positions 4 and 8:
    ```
    position   0   1   2   3   4   5   6   7   8   9
    inputs     3  12   6   9   6  14   0  11   3   7
    targets    .   .   .   .   9   .   .   .  12   .
    ```
    Returns `inputs, targets: [B, T]` int64 and slices `n_pairs`, `seq_len: [B]`.
    """
    B, n, T, V = batch_size, config.n_pairs, config.seq_len, config.vocab_size
    half, device = V // 2, generator.device

    keys = 1 + _random_subset(B, half - 1, n, generator)  # [B, n] distinct in [1, V/2)
    values = half + _random_subset(B, V - half, n, generator)  # [B, n] distinct in [V/2, V)
    slots = _power_law_subset(B, (T - 2 * n) // 2, n, config.power_a, generator)  # [B, n] distinct slot indices
    positions = 2 * n + 2 * slots  # [B, n] even

    if config.random_non_queries:
        inputs = torch.randint(0, V, (B, T), generator=generator, device=device)  # [B, T]
    else:
        inputs = torch.zeros(B, T, dtype=torch.int64, device=device)
    inputs[:, : 2 * n] = _interleave(keys, values)
    inputs.scatter_(1, positions, keys)
    targets = torch.full((B, T), IGNORE, dtype=torch.int64, device=device).scatter_(1, positions, values)
    return Batch(inputs, targets, _slices(B, device, n_pairs=n, seq_len=T))


def generate_kla(config: KLAMQARConfig, batch_size: int, generator: torch.Generator) -> Batch:
    """KLA-paper MQAR: `k1 v1 … kn vn` then uniform noise; each key once at a power-law position, target its value.

    Keys are `n` distinct tokens of `[0, V/2)`, values `n` distinct tokens of `[V/2, V)` (distinct as in Zoology;
    the protocol does not say). Every position after the pairs is noise, uniform over the whole vocabulary
    `[0, V)`, except the `n` query positions: distinct positions `p ∈ [min_query_pos, T − 2]` drawn without
    replacement with `p(g) ∝ g^(α−1)`, `g = p − min_query_pos + 1`, `α = power_alpha` (α = 1 is uniform). At a
    query position the input is the key and the target its value; the value is not written into the input
    (position `p + 1` stays noise), as in Zoology.

    Worked example, `n_pairs=2, seq_len=12, vocab_size=16, min_query_pos=5` (`.` = IGNORE): keys 5, 2 with
    values 13, 8, queries at 6 (key 2) and 9 (key 5), noise elsewhere after the pairs:
    ```
    position   0   1   2   3   4   5   6   7   8   9  10  11
    inputs     5  13   2   8  11   0   2   9  15   5   4   1
    targets    .   .   .   .   .   .   8   .   .  13   .   .
    ```
    Returns `inputs, targets: [B, T]` int64 and slices `n_pairs`, `seq_len: [B]`.
    """
    B, n, T, V = batch_size, config.n_pairs, config.seq_len, config.vocab_size
    half, device, low = V // 2, generator.device, config.min_query_pos

    keys = _random_subset(B, half, n, generator)  # [B, n] distinct in [0, V/2)
    values = half + _random_subset(B, V - half, n, generator)  # [B, n] distinct in [V/2, V)
    positions = low + _power_law_subset(B, T - 1 - low, n, config.power_alpha, generator)  # [B, n] in [low, T-2]

    inputs = torch.randint(0, V, (B, T), generator=generator, device=device)  # [B, T] noise
    inputs[:, : 2 * n] = _interleave(keys, values)
    inputs.scatter_(1, positions, keys)
    targets = torch.full((B, T), IGNORE, dtype=torch.int64, device=device).scatter_(1, positions, values)
    return Batch(inputs, targets, _slices(B, device, n_pairs=n, seq_len=T))


@dataclass(frozen=True)
class MQARMixtureConfig:
    """Several MQAR settings in one batch, each example drawing its own (`generate_mixture`): a training mix such as
    Zoology's (`ZOOLOGY_TRAIN_MIX` with `ZOOLOGY_TRAIN_WEIGHTS`) or a test set over several settings.

    Example: `MQARMixtureConfig(tuple(zoology_mix()), ZOOLOGY_TRAIN_WEIGHTS)`.
    """

    configs: tuple[MQARConfig, ...]
    weights: tuple[float, ...] | None = None  # ∝ the probability of each config; None: uniform

    def __post_init__(self):
        if not isinstance(self.configs, tuple) or not self.configs:
            raise ValueError(f"configs: expected a non-empty tuple of MQAR configs, got {self.configs!r}")
        for c in self.configs:
            if not isinstance(c, (VLAMQARConfig, ZoologyMQARConfig, KLAMQARConfig)):
                raise TypeError(f"configs: expected MQAR configs, got a {type(c).__name__}")
        if self.weights is not None and (
            len(self.weights) != len(self.configs) or min(self.weights) < 0 or sum(self.weights) <= 0
        ):
            raise ValueError(
                f"weights: expected {len(self.configs)} non-negative weights with a positive sum, got {self.weights}"
            )


def generate(config: MQARConfig | MQARMixtureConfig, batch_size: int, generator: torch.Generator) -> Batch:
    """One MQAR batch in the format of `config` (`generate_vla`, `generate_zoology`, `generate_kla`, or for a
    `MQARMixtureConfig` `generate_mixture`).

    Example: `generate(ZoologyMQARConfig(n_pairs=16, seq_len=256), 64, torch.Generator().manual_seed(0))`.
    """
    if isinstance(config, MQARMixtureConfig):
        return generate_mixture(config.configs, batch_size, generator, config.weights)
    if isinstance(config, VLAMQARConfig):
        return generate_vla(config, batch_size, generator)
    if isinstance(config, ZoologyMQARConfig):
        return generate_zoology(config, batch_size, generator)
    if isinstance(config, KLAMQARConfig):
        return generate_kla(config, batch_size, generator)
    raise TypeError(f"config: expected an MQAR config, got {type(config).__name__}")


def seq_len_of(config: MQARConfig | MQARMixtureConfig) -> int:
    """The sequence length `T` a config generates (a mixture's: its longest setting's)."""
    if isinstance(config, MQARMixtureConfig):
        return max(seq_len_of(c) for c in config.configs)
    return config.length if isinstance(config, VLAMQARConfig) else config.seq_len


def zoology_mix(
    settings: Sequence[tuple[int, int]] = ZOOLOGY_TRAIN_MIX, **fields: int | float | bool
) -> list[ZoologyMQARConfig]:
    """Zoology configs for `(seq_len, n_pairs)` settings; `fields` (e.g. `vocab_size`) apply to all of them."""
    return [ZoologyMQARConfig(seq_len=t, n_pairs=n, **fields) for t, n in settings]


def generate_mixture(
    configs: Sequence[MQARConfig],
    batch_size: int,
    generator: torch.Generator,
    weights: Sequence[float] | None = None,
    pad_token: int = 0,
) -> Batch:
    """A batch mixing several MQAR settings: each example draws its config, then rows are right-padded to the
    longest config with `pad_token` inputs and IGNORE targets.

    Each example's config index is drawn i.i.d. with probabilities `∝ weights` (default: uniform;
    `ZOOLOGY_TRAIN_WEIGHTS` reproduces Zoology's 100k/20k/… example counts). The width is the longest `T` over
    *all* configs, not the ones drawn, so every batch has the same shape. Right-padding changes nothing for a
    causal model: the pads come after every supervised position. Slices `n_pairs`, `seq_len: [B]` carry each
    example's own setting, so accuracy is reported per setting. Zoology itself never mixes settings within a batch
    (each batch comes from one setting); for evaluation do the same, one `generate(config, …)` per test setting
    into one `AccuracyMeter`.

    Example: `generate_mixture(zoology_mix(), 64, g)` is a `[64, 256]` batch over `ZOOLOGY_TRAIN_MIX`.
    """
    if not configs:
        raise ValueError("configs: expected at least one config, got none")
    if weights is not None and (len(weights) != len(configs) or min(weights) < 0 or sum(weights) <= 0):
        raise ValueError(f"weights: expected {len(configs)} non-negative weights with a positive sum, got {weights}")
    device = generator.device
    probs = torch.tensor(weights if weights is not None else [1.0] * len(configs), dtype=torch.float64, device=device)
    choice = torch.multinomial(probs, batch_size, replacement=True, generator=generator)  # [B] config per example

    width = max(seq_len_of(c) for c in configs)
    inputs = torch.full((batch_size, width), pad_token, dtype=torch.int64, device=device)
    targets = torch.full((batch_size, width), IGNORE, dtype=torch.int64, device=device)
    slices = {name: torch.zeros(batch_size, dtype=torch.int64, device=device) for name in ("n_pairs", "seq_len")}
    for i, config in enumerate(configs):
        rows = (choice == i).nonzero().squeeze(1)  # [m]
        if rows.numel() == 0:
            continue
        part = generate(config, rows.numel(), generator)
        inputs[rows, : part.inputs.shape[1]] = part.inputs
        targets[rows, : part.targets.shape[1]] = part.targets
        for name, tensor in slices.items():
            tensor[rows] = part.slices[name]
    return Batch(inputs, targets, slices)
