"""The settings of a comparison of systems, declared once (:mod:`lexlens.analysis.core.options`):
``lexlens evaluate`` with several systems derives its flags from :class:`ComparisonOptions`,
the Evaluation page its widgets, :func:`~lexlens.analysis.systems.comparison.compare_systems`
checks its keywords through it."""

from __future__ import annotations

from dataclasses import dataclass

from lexlens.analysis.core.options import SEED, Options, option, shared
from lexlens.analysis.systems.statistics import CORRECTIONS, TESTS

#: Resamples of the bootstrap and sign assignments of the randomization test.
DEFAULT_RESAMPLES = 10_000
#: At most this many systems are compared at once.
MAX_SYSTEMS = 8


def _name(value: str) -> str:
    """A system's name: non-blank text, stripped."""
    if not value.strip():
        raise ComparisonOptions.option("baseline").refuse(value)
    return value.strip()


@dataclass(frozen=True)
class ComparisonOptions(Options):
    """How several systems are compared: the baseline, which pairs, the tests' settings,
    the correction, how many wins and losses are explained."""

    what = "evaluate"

    baseline: str | None = option(
        None,
        "the system every other is compared with, by name (default: the first)",
        check=lambda v: _name(v),
        metavar="NAME",
        label="Baseline",
        wanted="a system's name",
    )
    all_pairs: bool = option(
        False,
        "compare every pair of systems, not only each against the baseline",
        label="All pairs",
    )
    correction: str = option(
        "holm",
        "p-values corrected over all comparisons × measures (bh: Benjamini–Hochberg)",
        choices=CORRECTIONS,
        label="Correction",
        widget="select",
    )
    test: str = option(
        "t-test",
        "the (corrected) test behind a table's significance mark †",
        choices=TESTS,
        label="Significance test",
        widget="select",
    )
    significance: float = option(
        0.05,
        "the corrected p-value below which a difference is marked †",
        low=1e-6,
        high=0.5,
        label="Significance level",
        widget="number",
    )
    resamples: int = option(
        DEFAULT_RESAMPLES,
        "bootstrap resamples and randomization-test sign assignments",
        low=100,
        high=1_000_000,
        label="Resamples",
        widget="number",
    )
    explain: int = option(
        10,
        "the largest wins and the largest losses explained per comparison (each)",
        low=0,
        high=1_000,
        label="Explained wins and losses",
        widget="number",
    )
    seed: int = shared(SEED)
