"""The claims report: `linattn report` writes REPORT.md from the committed `results/` (never typed by hand).

One row per reading of each claim of `claims.CLAIMS` (paper, claim, where the paper says it, the paper's value, the
protocol, ours, the verdict, the evidence); the claim's verdict is in bold on the row it reads, the other protocols
beside it. Then how each verdict is decided and the plots of every experiment that has run. The README shows each
paper's tally of verdicts between `<!-- claims:begin -->` and `<!-- claims:end -->` (`linattn tables --write
README.md` fills it); tests check that both files hold what this generates.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from linattn.experiments.archive import ARCHIVE_NAME
from linattn.experiments.claims import CLAIMS
from linattn.experiments.verdicts import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    MIN_SEEDS,
    MORE_SEEDS,
    NOT_AT_SCALE,
    NOT_YET,
    PARTLY,
    SEED_SPREAD,
    VERDICTS,
    Reading,
    Verdict,
)

BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"
LEGEND = (
    f"Verdicts: **{HOLDS}**, **{PARTLY}** and **{FAILS}** by the rule below, where **{FAILS}** needs a run in which "
    "the mechanism was trained to convergence or the paper's budget was reproduced; "
    f"**{INCONCLUSIVE}** where the experiment could not have confirmed the claim (its positive control failed, a "
    "different task from the paper's, or too few seeds); "
    f"**{NOT_AT_SCALE}** (a model or data scale we do not train); **{NOT_YET}** (no committed result yet: the row "
    "names the run that would measure it)."
)
UNITS = (
    "Units: accuracies are fractions from 0 to 1, ours and the papers' alike (a paper's percentage divided by 100); "
    "a difference of two accuracies given as a percentage gain is in points (0.01 = 1 point)."
)
RULES = [
    f"Seeds: no single seed decides a trained result. A rule reads the median over seeds of each test score (at the "
    f"learning rate the experiment chose), shown with the seeds' range in brackets, and needs at least {MIN_SEEDS} "
    f"seeds at every setting it judges, {MORE_SEEDS} where they disagree there by more than {SEED_SPREAD} (numbers "
    f"only shown beside a verdict do not count); with fewer the verdict is "
    f"**{INCONCLUSIVE}**, and it says what the rule reads on the seeds there are and which run adds the rest. "
    "Measurements of untrained models read their seeds' median; timings are medians of repeated calls.",
    "",
    "Protocols: a claim is read under every protocol we ran or plan (the paper's stated recipe, the authors' code "
    "where it differs from the text, a fair one). Its verdict is that of its first protocol, in the order listed, "
    "whose verdict is conclusive (holds, partly, does not hold), else of its first measured one; rows marked "
    "*beside* are shown, not read. Every rule names its positive control: the measurement in the same run that "
    "shows it could have seen the effect.",
]


def _evidence(reading: Reading, root: Path) -> str:
    if reading.results is None:
        return "—"
    folder = root / reading.results
    if not (folder / "table.md").exists():
        return "—"
    links = f"[{reading.results}]({(folder / 'table.md').as_posix()})"
    if (folder / ARCHIVE_NAME).exists():
        links += f" ([runs]({(folder / ARCHIVE_NAME).as_posix()}))"
    return links


def _verdict_cell(v: Verdict, read: bool) -> str:
    text = f"**{v.verdict}**" if read else f"*beside:* {v.verdict}"
    return text + (f": {v.why}" if v.why else "")


def claims_table(root: Path = Path("results"), papers: tuple[str, ...] = ("VLA", "KLA", "CCQ")) -> str:
    """Markdown table of the claims of `papers`, every reading a row, judged on the results under `root`."""
    lines = [
        "| paper | claim | source | paper's value | protocol | ours | verdict | evidence |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for claim in CLAIMS:
        if claim.paper not in papers:
            continue
        chosen, _ = claim.decide(root)
        for i, (reading, v) in enumerate(claim.rows(root)):
            head = (claim.paper, claim.claim, claim.source, claim.paper_value) if i == 0 else ("", "″", "", "")
            cells = (*head, reading.protocol, v.ours, _verdict_cell(v, reading is chosen), _evidence(reading, root))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _rules() -> list[str]:
    """One line per claim and rule: the protocols it reads, and the rule (the judge's docstring)."""
    lines = []
    for c in CLAIMS:
        judges: dict[str, list[str]] = {}
        for reading in c.readings:
            if reading.judge is not None:
                judges.setdefault(" ".join(reading.judge.__doc__.split()), []).append(reading.protocol)
        for rule, protocols in judges.items():
            lines.append(f"- {c.paper}, {c.claim} ({'; '.join(protocols)}): {rule}")
    return lines


def report(root: Path = Path("results")) -> str:
    """REPORT.md's text."""
    counts = {v: 0 for v in VERDICTS}
    for claim in CLAIMS:
        counts[claim.evaluate(root).verdict] += 1
    plots = sorted(
        {r.results for c in CLAIMS for r in c.readings if r.results and (root / r.results / "plot.png").exists()}
    )
    lines = [
        "# Claims report",
        "",
        "What the VLA, KLA and CCQ papers claim ([docs/papers.md](docs/papers.md) states each claim, number and "
        "protocol), and what our committed results say. Generated by `linattn report` from `results/`; every "
        "measured row links the table of the run behind it, which names its command, hardware and date, and the "
        "archive of its training runs.",
        "",
        LEGEND,
        "",
        UNITS,
        "",
        *RULES,
        "",
        "Tally: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: -kv[1]) if n) + ".",
        "",
        claims_table(root),
        "## How each verdict is decided",
        "",
        *_rules(),
        "",
        "## Plots",
        "",
        *(f"### {p}\n\n![{p}]({(root / p / 'plot.png').as_posix()})\n" for p in plots),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def readme_block(root: Path = Path("results"), link: str = "results") -> str:
    """The README's summary: for each paper, how many of its claims have each verdict, and a link to the report
    (`link`: the results root as the page reaches it; the report lies beside it)."""
    verdicts = [(claim.paper, claim.evaluate(root).verdict) for claim in CLAIMS]
    papers = list(dict.fromkeys(paper for paper, _ in verdicts))
    kinds = [v for v in VERDICTS if any(v == w for _, w in verdicts)]
    lines = ["| paper | claims | " + " | ".join(kinds) + " |", "|---|---:|" + "---:|" * len(kinds)]
    for paper in papers:
        mine = [v for p, v in verdicts if p == paper]
        lines.append(f"| {paper} | {len(mine)} | " + " | ".join(str(mine.count(v)) for v in kinds) + " |")
    top = posixpath.dirname(link)  # the repository root, seen from the page
    report, papers_page = posixpath.join(top, "REPORT.md"), posixpath.join(top, "docs", "papers.md")
    return (
        "\n".join(lines)
        + f"\n\nEvery claim, our number under each protocol, the rule and the run behind it: [REPORT.md]({report}).\n"
        + f"The claims themselves, in our words: [{papers_page}]({papers_page}).\n"
    )
