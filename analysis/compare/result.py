"""What a comparison returns: the two sides' terms, how their vocabularies relate, and the
files it is saved as (compare.html, compare.json, CSV tables)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lexlens.analysis.compare.compare_report import compare_files
from lexlens.analysis.core.results import Record, Result


@dataclass(frozen=True)
class TermComparison(Record):
    """Terms of one input (or patch group) on two sides: shared, only in A, only in B.

    ``shared``/``only_a``/``only_b`` hold raw vocabulary tokens (at most ``top`` rows each,
    heaviest first; ``counts`` covers all of them); ``merged`` the same on the display view
    (pieces joined into words); ``top_a``/``top_b`` each side's own top terms (merged);
    ``rank_correlation`` is Spearman's ρ over *every* shared raw term.
    """

    counts: dict
    rank_correlation: dict
    shared: list[dict]
    only_a: list[dict]
    only_b: list[dict]
    merged: dict
    top_a: list[dict]
    top_b: list[dict]


@dataclass(frozen=True)
class CompareResult(Result):
    """A comparison of two sides (encoder + gate k) on one input or a stored collection.

    ``kind`` is ``"text"``, ``"image"`` or ``"index"``; ``a``/``b`` describe each side;
    ``terms`` compares the whole input, ``group`` an image's patch group, ``heatmap`` one
    term on both grids (its ``terms`` a :class:`TermComparison`); ``collection`` holds the
    side-by-side collection analyses.
    """

    file_stem = "compare"

    kind: str
    a: dict
    b: dict
    input: dict
    vocabulary: dict
    terms: TermComparison | None = None
    group: dict | None = None
    heatmap: dict | None = None
    collection: dict | None = None
    notes: list[str] = field(default_factory=list)

    def files(self) -> dict[str, bytes]:
        """The report: compare.html (self-contained), compare.json (``to_dict``) and CSVs."""
        return compare_files(self)
