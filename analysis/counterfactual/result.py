"""What a counterfactual returns: :class:`Counterfactual` (the JSON tools read) and
:class:`CounterfactualResult` (both levels, the query and the target, with its files)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lexlens.analysis.core.outputs import csv_bytes, json_bytes
from lexlens.analysis.core.results import Record, Result
from lexlens.analysis.render.notebook import counterfactual_html

#: edits.csv's columns (and the table ``to_frame()`` gives).
EDIT_COLUMNS = ("level", "step", "op", "side", "word_or_term", "found", "verified", "rank_after")


@dataclass(frozen=True)
class Counterfactual(Record):
    """One counterfactual: the edits, the edited inputs and where the target ranks after.

    ``level`` "terms": vocabulary terms removed from the query vector (exact; ``exact``
    says the set is the smallest); "text": word edits (or occluded cells) re-encoded by
    the model. ``found``: the target ranks first after the edits; ``verified``: the rank
    and scores after come from ranking the edited inputs (re-encoded, for text) against
    every item of the collection. With no success ``edits`` are the closest tried (best
    rank reached), never presented as a fix (``found`` false).

    Text level, how much of the edit space was searched: ``search`` "found", "none exists"
    (every candidate up to the most edits encoded and ranked) or "none found";
    ``searched`` of ``space`` candidates; ``exhaustive`` the whole space fit the budget;
    ``shortest`` every candidate of fewer edits was ranked; ``excluded`` the query's words
    not offered for insertion, each with why."""

    target: str
    level: str
    edits: list[dict]
    edited_query: str
    edited_document: str | None
    rank_before: int | None
    rank_after: int | None
    score_after: float
    rival_after: str | None
    verified: bool
    model_calls: int
    seconds: float
    found: bool = False
    exact: bool = False
    score_before: float = 0.0
    rival_before: str | None = None
    rival_score_after: float = 0.0
    steps: list[dict] = field(default_factory=list)  # terms: after each removal
    notes: list[str] = field(default_factory=list)
    search: str = ""
    searched: int = 0
    space: int = 0
    exhaustive: bool = False
    shortest: bool = False
    excluded: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class CounterfactualResult(Result):
    """A counterfactual of one query and one target item of a collection: the text-level
    answer (``counterfactual``; ``None`` at level "terms") and the term-level one
    (``terms``), the collection described and the settings used."""

    file_stem = "counterfactual"

    index: dict
    query: str
    query_id: str | None
    target: str
    counterfactual: Counterfactual | None
    terms: Counterfactual
    settings: dict
    notes: list[str] = field(default_factory=list)

    def frame_rows(self) -> list[dict]:
        """edits.csv's rows: one per edit of each level."""
        return [dict(zip(EDIT_COLUMNS, row, strict=True)) for row in self._edit_rows()]

    def notebook_html(self) -> str:
        """The edits on the texts, verified rank before → after (:mod:`lexlens.analysis.render.notebook`)."""
        return counterfactual_html(self.to_dict())

    def _edit_rows(self) -> list[list]:
        """One row under :data:`EDIT_COLUMNS` per edit of each level."""
        rows = []
        for answer in (self.counterfactual, self.terms):
            if answer is None:
                continue
            for i, edit in enumerate(answer.edits, 1):
                rows.append(
                    [
                        answer.level,
                        i,
                        edit.get("op"),
                        edit.get("side"),
                        edit.get("word", edit.get("term", edit.get("cell"))),
                        answer.found,
                        answer.verified,
                        answer.rank_after,
                    ]
                )
        return rows

    def files(self) -> dict[str, bytes]:
        """counterfactual.json and edits.csv (one row per edit of each level)."""
        rows = self._edit_rows()
        return {"counterfactual.json": json_bytes(self), "edits.csv": csv_bytes(EDIT_COLUMNS, rows)}
