"""The settings of a search, declared once (:mod:`lexlens.analysis.core.options`): the items
listed, how the query is made (gate k, query mode) and how "A but not B" is ranked — the
exclusion method and SR's settings (Prachi, Bhatia and Bedathur, "Answering Multimodal
Exclusion Queries with Lightweight Sparse Disentangled Representations", ICTIR 2025; see
:mod:`lexlens.analysis.search.exclusion`). ``lexlens search`` derives its flags from
:class:`SearchOptions`, the Search page its widgets; the exclusion settings are shared
declarations, so an evaluation of the same methods (:class:`TableEvaluationOptions`,
``lexlens search --eval``) checks them the same way.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from lexlens.analysis.core.gating import GATE_K
from lexlens.analysis.core.options import (
    QUERY_MODE,
    OptionError,
    Options,
    option,
    shared,
    shared_option,
)

#: The exclusion methods: SR's dimension sets, the average embedding, the single-line query.
METHODS = ("sr", "avg", "text")
#: SR's defaults where the paper states none (ours; every result records what it used).
DEFAULT_K_ITEMS = 10
DEFAULT_COVERAGE = 0.5
#: The single-line query: the paper's wording for image collections, and for texts.
SLQ_IMAGE = "images of {a} without {b}"
SLQ_TEXT = "{a} without {b}"
#: The most items one search lists (and takes a dimension set from).
MAX_ITEMS = 10_000


def check_template(template: str) -> str:
    """A single-line query template that names ``{a}`` and ``{b}``, and nothing else."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise OptionError("slq_template", f"slq_template {template!r}: {exc}") from None
    unknown = [f or "{}" for f in fields if f not in ("a", "b")]
    if unknown:
        raise OptionError(
            "slq_template", f"slq_template may name {{a}} and {{b}} only, not {unknown[0]!r}"
        )
    if "a" not in fields or "b" not in fields:
        raise OptionError("slq_template", "slq_template needs {a} and {b}")
    return template


def _share(value: float) -> float:
    """A coverage above 0 (the declaration's limits hold it to at most 1)."""
    if value <= 0:
        raise COVERAGE.refuse(value)
    return value


METHOD = shared_option(
    "method",
    str,
    "sr",
    choices=METHODS,
    label="Exclusion method",
    widget="select",
    help="how 'A but not B' is ranked — sr: D = D1 \\ D2, SR's dimension sets (ICTIR 2025); "
    "avg: E(A) − E(B); text: one query 'A without B'",
)
K_ITEMS = shared_option(
    "k_items",
    int,
    None,
    optional=True,
    low=1,
    high=MAX_ITEMS,
    widget="number",
    label="Items per dimension set (K)",
    metavar="K",
    help=f"sr: how many top items of A (and of B) each dimension set is taken from "
    f"(none: {DEFAULT_K_ITEMS})",
)
COVERAGE = shared_option(
    "coverage",
    float,
    None,
    optional=True,
    low=0,
    high=1,
    check=_share,
    widget="slider",
    label="Magnitude coverage",
    metavar="SHARE",
    wanted="a share in (0, 1]",
    help=f"sr: each set is the smallest one holding this share of its items' magnitude "
    f"(none: {DEFAULT_COVERAGE})",
)
MAGNITUDE = shared_option(
    "magnitude",
    str,
    "sum",
    choices=("sum", "l2"),
    label="Magnitude",
    widget="radio",
    help="sr: a dimension's magnitude is its weight (sum) or its squared weight (l2: items "
    "rank by the L2 norm of their weights on D)",
)
NORMALIZE = shared_option(
    "normalize",
    bool,
    True,
    label="L2-normalise items (SR)",
    help="sr: each item's vector is divided by its L2 norm before extracting and ranking, so "
    "items whose mass lies on B's dimensions rank lower",
)
SLQ_TEMPLATE = shared_option(
    "slq_template",
    str,
    None,
    optional=True,
    check=check_template,
    metavar="TEMPLATE",
    label="Single-line query",
    wanted="a text naming {a} and {b}",
    help=f"text: the single-line query's wording (none: {SLQ_IMAGE!r} for image "
    f"collections, {SLQ_TEXT!r} for texts)",
)


@dataclass(frozen=True)
class SearchOptions(Options):
    """How a collection is searched (``lexlens search``, the Search page, ``search``):
    the items listed, the query vector's gate and mode, the exclusion method and its
    settings. SR's ``k_items`` and ``coverage`` stay none unless set (the defaults apply);
    set, they need an exclusion ranked by SR (:func:`check_sr_only`)."""

    what = "search"

    top: int = option(10, "items listed", low=1, high=MAX_ITEMS, label="Results", widget="slider")
    gate_k: int = shared(GATE_K)
    query_mode: str = shared(QUERY_MODE)
    method: str = shared(METHOD)
    k_items: int | None = shared(K_ITEMS)
    coverage: float | None = shared(COVERAGE)
    magnitude: str = shared(MAGNITUDE)
    normalize: bool = shared(NORMALIZE)
    slq_template: str | None = shared(SLQ_TEMPLATE)
    explain: int = option(
        5, "contributions listed per hit (tokens, and words)", low=0, high=MAX_ITEMS, cli=False
    )
    evaluate: bool = option(True, "metrics when the collection's labels name the query", cli=False)


def check_sr_only(options: SearchOptions, exclude: str | None) -> None:
    """``k_items`` and ``coverage`` set how SR extracts D1 and D2: refused for a search
    that does not rank an exclusion by SR (a setting that would change nothing)."""
    uses_sets = bool(exclude) and options.method == "sr"
    for name in ("k_items", "coverage"):
        if not uses_sets and getattr(options, name) is not None:
            raise OptionError(
                name,
                f"{name} applies to the sr exclusion method only (it sets how D1 and D2 are "
                "extracted); leave it out for this search",
            )


def _methods(value: tuple) -> tuple[str, ...]:
    """Exclusion methods: one or more of :data:`METHODS`, each once."""
    if not value or any(m not in METHODS for m in value) or len(set(value)) < len(value):
        raise TableEvaluationOptions.option("methods").refuse(value)
    return tuple(value)


@dataclass(frozen=True)
class TableEvaluationOptions(Options):
    """How a table of pairs or queries is evaluated (``lexlens search --eval``, the API): the
    query vector's gate and mode, the exclusion methods and SR's settings (the declarations
    search shares), and the fewest relevant items a pair needs."""

    what = "search --eval"

    gate_k: int = shared(GATE_K)
    query_mode: str = shared(QUERY_MODE)
    methods: tuple[str, ...] = option(
        METHODS,
        "exclusion methods evaluated on pairs",
        check=_methods,
        cli=False,
        label="Exclusion methods",
        wanted=f"one or more of {', '.join(METHODS)}",
    )
    k_items: int | None = shared(K_ITEMS)
    coverage: float | None = shared(COVERAGE)
    magnitude: str = shared(MAGNITUDE)
    normalize: bool = shared(NORMALIZE)
    slq_template: str | None = shared(SLQ_TEMPLATE)
    min_relevant: int = option(
        1,
        "pairs: a pair with fewer items labelled A and not B is skipped",
        low=1,
        high=MAX_ITEMS,
        label="Fewest relevant items",
        widget="number",
    )
