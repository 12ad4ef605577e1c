"""Which queries an evaluation counts, and the notes that name the others (trec_eval's rules;
see :mod:`lexlens.analysis.evaluation.evaluate`): a query without a judgement is left out, a
judged query not among the queries given is left out, a judged query without a relevant
item counts 0; a ranking that is empty counts 0, a run's queries not evaluated are ignored,
and tied scores are ranked in one order that every measure and run.trec follow (a run's
as trec_eval orders them, unless ``ties`` is as-listed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Sized

from lexlens.analysis.core.counts import counted
from lexlens.analysis.core.metrics import has_float32_ties, has_ties, is_relevant
from lexlens.analysis.evaluation.options import TIES_TREC_EVAL
from lexlens.models.base import InputError

#: Query ids named in a note (the count says how many in all).
NAMED = 10


def count(items: Sized, one: str, many: str) -> str:
    """``"1 query has"`` or ``"3 queries have"`` (:func:`~lexlens.analysis.core.counts.counted`
    of how many ``items``)."""
    return counted(len(items), one, many)


def named(ids: Sequence[str]) -> str:
    """The first :data:`NAMED` ids, and how many more."""
    shown = ", ".join(ids[:NAMED])
    return shown + (f" and {len(ids) - NAMED} more" if len(ids) > NAMED else "")


def checked_queries(queries: object) -> dict[str, str]:
    """Query id → text, ids as strings; a text that is not a non-empty string is refused
    naming it."""
    if not isinstance(queries, Mapping):
        raise InputError("queries: expected a mapping of query id to text")
    out: dict[str, str] = {}
    for q, text in queries.items():
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"queries[{q!r}]: a query must be a non-empty text")
        out[str(q)] = text
    return out


def judged_order(queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The queries evaluated, in the order given: those with a judgement; refused when there
    is nothing to evaluate."""
    if not queries:
        raise InputError("no queries to evaluate")
    order = [q for q in queries if qrels.get(q)]
    if not order:
        raise InputError("no query given is judged: nothing to evaluate")
    if not any(is_relevant(r) for q in order for r in qrels[q].values()):
        raise InputError("no query has a judged relevant item: nothing to evaluate")
    return order


def selection_notes(
    queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]], order: list[str]
) -> list[str]:
    """The notes naming the queries left out, and the judged ones without a relevant item."""
    notes = []
    unjudged = [q for q in queries if not qrels.get(q)]
    if unjudged:
        notes.append(
            f"{count(unjudged, 'query has', 'queries have')} no judgement ({named(unjudged)}): "
            "left out of every measure (trec_eval evaluates judged queries only)"
        )
    absent = [q for q, judged in qrels.items() if judged and q not in queries]
    if absent:
        notes.append(
            f"{count(absent, 'judged query is', 'judged queries are')} not among the queries "
            f"given ({named(absent)}): left out of every measure"
        )
    no_relevant = [q for q in order if not any(is_relevant(r) for r in qrels[q].values())]
    if no_relevant:
        notes.append(
            f"{count(no_relevant, 'query has', 'queries have')} judgements but no relevant item "
            f"({named(no_relevant)}): counted with 0 in every measure, as trec_eval and "
            "ir-measures count them; nothing to explain"
        )
    negative = sum(1 for q in order for r in qrels[q].values() if r < 0)
    if negative:
        notes.append(
            f"{count(range(negative), 'judgement is', 'judgements are')} below 0: not relevant, "
            "a gain of 0 for nDCG (as 0)"
        )
    return notes


def ranking_notes(
    out_run: Mapping[str, list[tuple[str, float]]],
    order: list[str],
    run: Mapping | None,
    top: int,
    ties: str = TIES_TREC_EVAL,
) -> list[str]:
    """The notes on the rankings: empty ones, a run's queries not evaluated, ties (a run's
    ordered by the rule ``ties``)."""
    notes = []
    empty = [q for q in order if not out_run[q]]
    if empty:
        why = "the run lists no item for" if run is not None else "no item shares a term with"
        notes.append(
            f"{why} {count(empty, 'query', 'queries')} ({named(empty)}): 0 in every measure, as "
            "ir-measures counts them"
        )
    if run is not None:
        evaluated = set(order)
        extra = [q for q in run if q not in evaluated]
        if extra:
            notes.append(
                f"the run ranks {count(extra, 'query that is', 'queries that are')} not "
                f"evaluated ({named(extra)}): ignored"
            )
    if run is not None:
        notes.extend(_run_tie_notes(out_run, order, run, ties))
        return notes
    tied = [q for q in order if has_ties([s for _, s in out_run[q]])]
    if tied:
        notes.append(
            f"{count(tied, 'query has', 'queries have')} tied scores among the top {top} "
            f"({named(tied)}): tied items are ranked by collection order, as search ranks "
            "them; every measure and run.trec follow that order"
        )
    return notes


def _run_tie_notes(
    out_run: Mapping[str, list[tuple[str, float]]],
    order: list[str],
    run: Mapping,
    ties: str,
) -> list[str]:
    """The note on a run's tied scores (equal as trec_eval reads them, C floats): how many
    of the queries evaluated hold one, and the rule that ordered them."""
    tied = [q for q in order if has_float32_ties([s for _, s in run.get(q, [])])]
    if ties == TIES_TREC_EVAL:
        rule = (
            "ordered as trec_eval orders them (score as a C float, then item id descending), "
            "so every measure equals trec_eval's on the run file"
        )
    else:
        rule = (
            "kept in the order the run lists them (ties as-listed; trec_eval would order "
            "them by item id, descending, and its measures may differ)"
        )
    if not tied:
        return [f"ties in the run: none among the {len(order)} queries evaluated ({rule})"]
    return [
        f"{len(tied)} of the {len(order)} queries evaluated have tied scores in the run "
        f"({named(tied)}): tied items {rule}; run.trec follows that order"
    ]


def missing_note(missing: Mapping[str, int]) -> list[str]:
    """The note on the items a run names that the collection does not hold."""
    if not missing:
        return []
    shown = ", ".join(list(missing)[:5])
    return [
        f"the run names {len(missing)} items the collection does not hold (e.g. {shown}): "
        "counted as retrieved by the measures, never explained"
    ]


def condensed_note(removed: int, judged_only: bool) -> list[str]:
    """The note of an evaluation on judged items only: how many unjudged items left the
    rankings."""
    if not judged_only:
        return []
    return [
        f"judged only: {counted(removed, 'unjudged item', 'unjudged items')} removed from the "
        "rankings before measuring (the condensed-list convention, Sakai 2007); every measure "
        "and run.trec are those of the condensed rankings"
    ]
