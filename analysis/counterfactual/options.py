"""The settings of a counterfactual, declared once (:mod:`lexlens.analysis.core.options`):
which side may be edited, the level searched, and the budget (edits, model calls).
``lexlens counterfactual`` derives its flags from :class:`CounterfactualOptions`, the pages
their widgets, and ``counterfactual()`` checks its keywords through it."""

from __future__ import annotations

from dataclasses import dataclass

from lexlens.analysis.core.gating import GATE_K
from lexlens.analysis.core.options import QUERY_MODE, Options, option, shared

#: Which input the text-level search may edit.
SIDES = ("query", "document", "both")
#: query: deleting query words (or occluding cells of an image query); document: inserting
#: one of the query's words into the target item's text; text: the edits re-encoded by the
#: model; terms: only the exact term-level answer (no edit is re-encoded).
LEVELS = ("text", "terms")
#: Where inserted words go in the target's text.
INSERT_AT = ("end", "start")
#: The most edits and model calls one counterfactual may spend.
MAX_EDITS = 10
MAX_CALLS = 5_000


@dataclass(frozen=True)
class CounterfactualOptions(Options):
    """What a counterfactual may edit and how much it may spend (``lexlens counterfactual``,
    the Evaluation and Query ⊙ Document pages, ``counterfactual()``)."""

    what = "counterfactual"

    side: str = option(
        "both",
        "what the text-level search may edit — query: delete query words (occlude "
        "cells of an image query); document: insert query words, in order, into the "
        "target item's text; both: either",
        choices=SIDES,
        label="Edit",
        widget="radio",
    )
    level: str = option(
        "text",
        "text: word edits re-encoded by the model and ranked against the whole "
        "index (after the exact term-level answer that guides them); terms: only the "
        "term-level answer (vocabulary terms removed from the query vector)",
        choices=LEVELS,
        label="Level",
        widget="radio",
    )
    max_edits: int = option(
        3,
        "the longest sequence of edits tried",
        low=1,
        high=MAX_EDITS,
        label="Most edits",
        widget="slider",
    )
    max_calls: int = option(
        200,
        "the most edited inputs re-encoded by the model (the budget)",
        low=1,
        high=MAX_CALLS,
        label="Most model calls",
        widget="number",
    )
    insert_at: str = option(
        "end",
        "where inserted words go in the target item's text, in the order inserted (every "
        "order is a candidate of its own)",
        choices=INSERT_AT,
        label="Insert at",
        widget="radio",
    )
    allow_stop_words: bool = option(
        False,
        "also insert stop words of the query (function words: 'an', 'of', …)",
        label="Insert stop words",
    )
    query_mode: str = shared(QUERY_MODE)
    gate_k: int = shared(GATE_K)
