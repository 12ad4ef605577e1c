"""The settings of a comparison, declared once (:mod:`lexlens.analysis.core.options`): the
gate k of each side, the rows listed, and what each kind of comparison adds — a box and a
heatmap term on one input (:class:`CompareOptions`), a query, its mode and Exact@k on stored
collections (:class:`CompareIndexOptions`). ``lexlens compare`` derives its flags from
them and the Compare page its widgets; the analyses check their keywords through them.

Which gates the two sides take when none is given is one rule too (:func:`default_gates`).
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Any

from lexlens.analysis.core.gating import DEFAULT_GATE_K, GATE_K
from lexlens.analysis.core.options import QUERY_MODE, OptionError, Options, option, shared
from lexlens.analysis.deviation.options import DEVIATION_K
from lexlens.analysis.lexical.terms import TermsOptions

#: Rows listed per table on one input (terms), and hits listed per side on collections;
#: counts and ρ always cover everything.
DEFAULT_TOP = 20
DEFAULT_HITS = 10
#: Terms listed per moved hit (largest change in contribution first).
CHANGED_TERMS = 8
#: One encoder on both sides compares two gates: B keeps this many dimensions by default.
SAME_ENCODER_GATE_B = {"text": 8, "image": 64}


def check_gate_pair(values: tuple[Any, ...]) -> tuple[int, int]:
    """The gate k of A and B from one value (both sides) or two (A's, B's), each checked by
    the one gate declaration (:data:`~lexlens.analysis.core.gating.GATE_K`)."""
    if not 1 <= len(values) <= 2:
        raise OptionError(
            "gate_k",
            f"gate_k must be one gate k for both sides or two (A's, B's), not {len(values)} values",
        )
    ks = [GATE_K.check(v) for v in values]
    return ks[0], ks[-1]


def parse_gate_pair(texts: str | list[str]) -> tuple[int, ...]:
    """The command line's gate k: one text per ``--gate-k`` given (A's, then B's)."""
    return tuple(GATE_K.from_text(t) for t in ([texts] if isinstance(texts, str) else texts))


def check_term(term: str) -> str | None:
    """The heatmap's word without surrounding spaces (empty: none, the default applies)."""
    return term.strip() or None


def check_query_id(query_id: str) -> str:
    """A kept query's id without surrounding spaces (ids never hold whitespace)."""
    if not query_id.strip():
        raise OptionError("query_id", "query_id is empty: give the id of a kept query")
    return query_id.strip()


def check_query(query: str) -> str:
    """A query with at least one non-space character."""
    if not query.strip():
        raise OptionError("query", "query is empty: type some words")
    return query


_BOX = TermsOptions.option("box")
_TOP = TermsOptions.option("top")


@dataclass(frozen=True)
class _SidesOptions(Options):
    """What every comparison sets: the gate k of each side and the rows listed."""

    gate_k: tuple[int, int] | None = shared(
        GATE_K,
        None,
        label="Gate k",
        check=check_gate_pair,
        parse=parse_gate_pair,
        metavar="K",
        help="gate k of A, then of B (once: both sides): the top-k dimensions of V(x) kept "
        "beside the input's own tokens (-1: every dimension, 0: the own tokens only). "
        f"Default: {DEFAULT_GATE_K} for an input, each index's stored k for indexes; one "
        f"encoder on one input or index: B at a smaller k ({SAME_ENCODER_GATE_B['text']} for a "
        f"text, {SAME_ENCODER_GATE_B['image']} for an image, half the index's mean stored "
        "terms); an index re-gates exactly at a k up to its stored one",
        wanted="one gate k for both sides or two (A's, B's), each -1 (every dimension), 0 "
        "(the input's own tokens only) or a positive count",
    )
    top: int = shared(
        _TOP,
        DEFAULT_TOP,
        label="Rows per table",
        help="rows listed per table (counts and ρ cover every term)",
    )

    def __post_init__(self) -> None:
        if isinstance(self.gate_k, Integral) and not isinstance(self.gate_k, bool):
            object.__setattr__(self, "gate_k", (self.gate_k,))  # one gate k: both sides
        super().__post_init__()


@dataclass(frozen=True)
class CompareOptions(_SidesOptions):
    """How two sides are compared on one text or image (``lexlens compare --text/--image``,
    the Compare page): ``gate_k`` none → :func:`default_gates`."""

    what = "compare"

    box: tuple[float, float, float, float] | None = shared(
        _BOX,
        None,
        help="an image's patch group, compared too (each side pools its own patches under it)",
    )
    term: str | None = option(
        None,
        "the word whose heatmap is drawn on both grids (default: the heaviest term both share)",
        check=check_term,
        parse=str,
        label="Heatmap term",
        metavar="WORD",
    )


@dataclass(frozen=True)
class CompareIndexOptions(_SidesOptions):
    """How two stored collections are compared (``lexlens compare --index``, the Compare
    page): ``gate_k`` none → :func:`default_gates`; ``query`` (or ``query_id``, a query the
    collection keeps, with its judgements) adds the search comparison."""

    what = "compare on stored collections"

    top: int = shared(
        _TOP, DEFAULT_HITS, label="Rows per table", help="hits listed per side and rows per table"
    )
    query: str | None = option(
        None,
        "a text query searched on both sides",
        check=check_query,
        parse=str,
        label="Query searched on both (optional)",
        metavar="TEXT",
    )
    query_id: str | None = option(
        None,
        "a query the collection keeps (its id in the queries it was built with): its "
        "text is searched on both sides, its judged items are marked and measured",
        check=check_query_id,
        parse=str,
        label="Kept query",
        metavar="ID",
    )
    query_mode: str = shared(QUERY_MODE)
    k: int = shared(DEVIATION_K)
    explain: int = option(CHANGED_TERMS, "changed terms listed per moved hit", low=0, cli=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.query is not None and self.query_id is not None:
            raise OptionError(
                "query_id", "query_id: give a typed query or a kept query's id, not both"
            )


def default_gates(
    kind: str, same: bool, stored: tuple[int, int] | None = None, mean_active: float | None = None
) -> tuple[int, int]:
    """The gate k of A and B when none is given — one rule for the page and the command.

    Two encoders (or two indexes): each side at its own default (:data:`DEFAULT_GATE_K` for
    an input, the stored k for an index). One encoder on one input or one index: A at that
    default and B at a smaller gate — :data:`SAME_ENCODER_GATE_B` for an input, half the
    index's mean number of stored terms (at most its stored k) for an index — so the two
    sides differ.
    """
    ka, kb = stored if stored is not None else (DEFAULT_GATE_K, DEFAULT_GATE_K)
    if not same:
        return ka, kb
    if stored is None:
        return ka, SAME_ENCODER_GATE_B.get(kind, SAME_ENCODER_GATE_B["text"])
    half = max(1, int((mean_active or 2) // 2))
    return ka, half if kb == -1 else min(half, kb)
