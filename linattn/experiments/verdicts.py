"""Verdicts on the papers' claims: the classes, the seed rule, and a claim's readings under several protocols.

A claim (`Claim`) is read by one or more protocols (`Reading`): the paper's recipe, the authors' code where it
differs from the paper's text, a fair one. Each reading names the results folder that answers it and a judge
(`linattn.experiments.rules`), which reads that folder's `results.json` through `Results` and returns our value and
a verdict:
- `holds`, `partly`, `does not hold`: the rule in the judge's docstring decides. `does not hold` needs a run in which
  the mechanism was trained to convergence, or the paper's budget was reproduced, with the effect absent;
- `inconclusive`: the experiment could not have confirmed the claim — its positive control failed (a baseline or
  the mechanism did not learn, the budget is not the paper's), it ran a different task from the paper's, or too few
  seeds decide it;
- `not reproducible at our scale` (a model or data scale we do not train) or `not yet measured` (no committed
  result yet; the reading names the run that would measure it).
Every rule names its positive control: the measurement that shows the run could have seen the effect.

Seeds: no single seed decides a trained result. A rule reads the median over seeds of each test score (at the
learning rate the experiment chose) and needs at least `MIN_SEEDS` of them at every setting it reads, `MORE_SEEDS`
where they disagree there by more than `SEED_SPREAD`; with fewer the verdict is `inconclusive` and says what the
rule reads on the seeds there are.
Untrained-model measurements (state norms, Jacobians, gradients) read their seeds' median too; timings are medians
of repeated calls.

A claim's verdict is its first deciding reading's that is conclusive (holds, partly, does not hold), else its first
measured one's, else its first one's: the order of `readings` is the order of preference. Readings with
`decides=False` are shown beside it, never its verdict (a task that cannot test the claim).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from linattn.experiments.archive import finished_in
from linattn.experiments.registry import EXPERIMENTS

HOLDS, PARTLY, FAILS, INCONCLUSIVE = "holds", "partly", "does not hold", "inconclusive"
NOT_AT_SCALE, NOT_YET = "not reproducible at our scale", "not yet measured"
CONCLUSIVE = (HOLDS, PARTLY, FAILS)
VERDICTS = (HOLDS, PARTLY, FAILS, INCONCLUSIVE, NOT_AT_SCALE, NOT_YET)

MIN_SEEDS, MORE_SEEDS = 3, 5  # seeds a trained result needs; where they disagree by more than SEED_SPREAD, more
SEED_SPREAD = 0.1


@dataclass(frozen=True)
class Verdict:
    ours: str  # our measurement, as shown in the report
    verdict: str  # one of VERDICTS
    why: str = ""  # why it is inconclusive (or what it needs), shown beside the verdict


class Results:
    """One `results.json` as the rules read it: `[key]` and `get` give its fields; for a trained experiment,
    `seeds(mixer)` is every seed's test score by setting at the chosen learning rate, `row(mixer)` their medians,
    `cell(mixer, x)` a median with the seeds' range, `shown(mixer, x)` the same for a number shown beside the
    verdict but not judged, `judged(mixer, x)` the runs whose other numbers a rule judges. The settings a rule read
    (a `row`'s values, a `cell`) are remembered for the seed rule (`shortfall`): seeds that disagree where the rule
    did not look do not hold up its verdict."""

    def __init__(self, data: dict, folder: Path):
        self.data, self.folder = data, folder
        self.read: dict[str, set[int]] = {}

    def __getitem__(self, key: str):
        return self.data[key]

    def get(self, key: str, default=None):
        return self.data.get(key, default)

    @property
    def trained(self) -> bool:
        """A training experiment's results (per-run records), not a measurement of untrained models or timings."""
        return "table" in self.data and "runs" in self.data

    def seeds(self, mixer: str) -> dict[int, list[float]]:
        """Every seed's test score of `mixer` by setting, at the learning rate chosen for that setting."""
        table = self.data["table"][mixer]  # a KeyError names a mixer the run did not train
        metric, chosen = self.data.get("metric", "acc"), self.data.get("chosen_lr", {}).get(mixer, {})
        out: dict[int, list[float]] = {}
        for run in self.data.get("runs", []):
            if run["mixer"] != mixer:
                continue
            for x, test in {str(run["x"]): run["test"], **run.get("test_at", {})}.items():
                if x in chosen and run["lr"] != chosen[x]:
                    continue
                out.setdefault(int(x), []).append(test[metric])
        return out or {int(x): [a] for x, a in table.items()}  # no run records: the table's one value

    def row(self, mixer: str) -> Mapping[int, float]:
        """The median over seeds of `mixer`'s test score, by setting; each setting whose value is taken is read."""
        medians = {x: statistics.median(v) for x, v in sorted(self.seeds(mixer).items())}
        return _Row(medians, self.read.setdefault(mixer, set()))

    def cell(self, mixer: str, x: int, digits: int = 3) -> str:
        """`median` or `median [lowest – highest]` of `mixer` at `x`, which is read."""
        text = self.shown(mixer, x, digits)
        self.read.setdefault(mixer, set()).add(x)
        return text

    def judged(self, mixer: str, x: int) -> None:
        """Read `mixer`'s runs at `x` for the seed rule where the rule judges other numbers of them (their probes)."""
        self.seeds(mixer)[x]  # a KeyError names what the run did not train
        self.read.setdefault(mixer, set()).add(x)

    def shown(self, mixer: str, x: int, digits: int = 3) -> str:
        """As `cell`, for a number shown beside the verdict that the rule does not judge (not read)."""
        values = self.seeds(mixer)[x]
        text = f"{statistics.median(values):.{digits}f}"
        return text + (f" [{min(values):.{digits}f} – {max(values):.{digits}f}]" if len(values) > 1 else "")

    @cached_property
    def records(self) -> list[dict]:
        """The finished runs' full records (with their last validation, `val`) from the folder's archive."""
        return [run.record for run in finished_in(self.folder).values()]

    def shortfall(self) -> tuple[str, int, tuple[str, ...]] | None:
        """Why the mixers read so far have too few seeds to decide, how many they need and which mixers (in the
        result's order) have fewer; None if enough."""
        if not self.trained:
            return None
        read = [m for m in self.data.get("mixers", self.data["table"]) if self.read.get(m)]
        if not read:
            return None
        seeds = {(m, x): v for m in read for x, v in self.seeds(m).items() if x in self.read[m]}
        spread = {key: max(v) - min(v) for key, v in seeds.items()}
        # each setting on its own: one mixer's seeds that disagree ask for more of that mixer, not of the others
        short = [key for key, v in seeds.items() if len(v) < (MORE_SEEDS if spread[key] > SEED_SPREAD else MIN_SEEDS)]
        if not short:
            return None
        fewest = min(len(seeds[key]) for key in short)
        if fewest < MIN_SEEDS:
            why, needed = ("one seed" if fewest == 1 else f"{fewest} seeds"), MIN_SEEDS
        else:
            m, x = max(short, key=spread.get)
            why = f"its {len(seeds[m, x])} seeds disagree by {spread[m, x]:.2f} ({m} at {x}), more than {SEED_SPREAD}"
            needed = MORE_SEEDS
        lacking = {m for m, x in short if len(seeds[m, x]) < needed}
        return why, needed, tuple(m for m in read if m in lacking)


class _Row(Mapping):
    """A mixer's medians by setting that adds each setting whose value is taken to `read` (iterating the settings
    alone reads none); every way of taking values (`[x]`, `get`, `values`, `items`, a copy) goes through
    `__getitem__`."""

    def __init__(self, medians: dict[int, float], read: set[int]):
        self._medians, self._read = medians, read

    def __getitem__(self, x: int) -> float:
        value = self._medians[x]
        self._read.add(x)
        return value

    def __iter__(self):
        return iter(self._medians)

    def __len__(self) -> int:
        return len(self._medians)


Judge = Callable[[Results], Verdict]


@dataclass(frozen=True)
class Reading:
    """One protocol's reading of a claim: the results folder under `results/` that answers it and the rule that
    reads it (`results` None: a scale we do not train, `reason` says which)."""

    protocol: str  # the protocol in words: the recipe, whose it is, and how it differs
    results: str | None
    judge: Judge | None = None
    decides: bool = True  # False: shown beside the verdict, never the verdict
    needs: str | None = None  # the command that measures it, where it is not `linattn run` of the folder
    reason: str = ""  # results None: why it is beyond our scale

    def command(self, seeds: int = MIN_SEEDS, mixers: tuple[str, ...] = ()) -> str:
        """The command that measures (or completes) this reading: `needs` where it is one, else `linattn run` of the
        folder (a training experiment's with `seeds` seeds); given `mixers`, the folder's run of those mixers alone
        to `seeds` seeds (the ones a verdict waits for)."""
        if self.needs and self.needs.startswith("linattn ") and not mixers:
            return self.needs
        name, variant = self.results.split("/")
        if variant.startswith("default"):
            return f"linattn run {name}" + (" --device cuda" if "cuda" in variant else "") + " --force"
        every = EXPERIMENTS[name].mixers if name in EXPERIMENTS else ()
        subset = f" --mixers {','.join(mixers)}" if mixers and set(mixers) != set(every) else ""
        return f"linattn run {name} --protocol {variant}{subset} --seeds {seeds} --device cuda"

    def wants(self, seeds: int = MIN_SEEDS, mixers: tuple[str, ...] = ()) -> str:
        """What would measure or decide this reading: its command, and `needs` where that is a condition in words."""
        text = f"`{self.command(seeds, mixers)}`"
        return text + (f" with {self.needs}" if self.needs and not self.needs.startswith("linattn ") else "")

    def evaluate(self, root: Path) -> Verdict:
        """Our value and the verdict from the committed results under `root`."""
        if self.results is None:
            return Verdict("—", NOT_AT_SCALE, self.reason)
        path = root / self.results / "results.json"
        if self.judge is None or not path.exists():
            return Verdict("—", NOT_YET, f"needs {self.wants()}")
        results = Results(json.loads(path.read_text()), root / self.results)
        try:
            v = self.judge(results)
        except KeyError as missing:  # a run of a subset (`--mixers`): the row the claim needs was not measured
            return Verdict(f"— (no {missing.args[0]!r} in {self.results})", NOT_YET, f"needs {self.wants()}")
        short = results.shortfall()
        if short is None:
            return (
                v if v.verdict != INCONCLUSIVE or not self.needs else replace(v, why=f"{v.why}; needs {self.wants()}")
            )
        text, seeds, mixers = short
        why = f"{v.why}; and {text}" if v.verdict == INCONCLUSIVE else f"{text}: on it the rule reads {v.verdict}"
        return Verdict(v.ours, INCONCLUSIVE, f"{why}; needs {self.wants(seeds, mixers)}")


@dataclass(frozen=True)
class Claim:
    paper: str  # "VLA", "KLA" or "CCQ"
    claim: str
    source: str  # where the paper says it
    paper_value: str
    readings: tuple[Reading, ...]

    def rows(self, root: Path) -> list[tuple[Reading, Verdict]]:
        """Every reading with its verdict."""
        return [(reading, reading.evaluate(root)) for reading in self.readings]

    def decide(self, root: Path) -> tuple[Reading, Verdict]:
        """The reading the claim's verdict reads, and that verdict (the module's docstring: the order)."""
        rows = [(r, v) for r, v in self.rows(root) if r.decides]
        for wanted in (CONCLUSIVE, (INCONCLUSIVE,)):
            for reading, v in rows:
                if v.verdict in wanted:
                    return reading, v
        return rows[0]

    def evaluate(self, root: Path) -> Verdict:
        """The claim's verdict."""
        return self.decide(root)[1]


def checked(v: Verdict, ok: bool, control: str) -> Verdict:
    """`v`, or inconclusive with the failed positive control `control`."""
    return v if ok else Verdict(v.ours, INCONCLUSIVE, f"positive control failed: {control}")
