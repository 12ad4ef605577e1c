"""The metrics layer every evaluation shares: runs and judgements as Lexlens holds them, what
trec_eval makes of them, and the measures (ir-measures names, computed by ir-measures) for
the order Lexlens shows.

Representation. A run is ``{query id: [(item id, score), …]}`` best first (pytrec_eval's
``{query id: {item id: score}}`` is read too: :func:`ranked_run`); judgements are
``{query id: {item id: relevance}}`` (:func:`checked_qrels`); :func:`measure` gives the mean
and per-query values of any ir-measures measures over exactly the judged queries.

Relevance. A relevance is a whole number from −1,000 to 1,000 (:data:`MAX_RELEVANCE`).
trec_eval (pytrec_eval) takes any 32-bit int but sizes each query's gain arrays by its
largest grade, 8 bytes a level: a grade of 2,147,483,647 takes 16 GB and a minute for one
query, and where that memory is refused it returns 0 for nDCG, R@k and AP of every query,
without a word. Graded benchmarks use a few levels (TREC 0–4, MS MARCO 0–3); 1,000 levels
cost 8 KB a query. A file may write it as ``2`` or ``2.0``; ``0.5``, ``inf``, ``nan`` and
``1e400`` are not relevances, and a whole number beyond ±1,000 is refused.
A relevance of 0 or below means *not relevant*, everywhere: in the measures (a negative
relevance is clamped to a gain of 0 before ir-measures sees it, so it can never lower an
nDCG; the item stays judged) and in failures and blame. A measure ir-measures does not
return for a ranked query, or returns as 0 although a relevant item is ranked within its
cutoff, is a provider's failure: refused, never reported as 0 (:func:`measure`).

Order. trec_eval ignores a run's rank column and sorts each query's items by score, ties by
docid (descending), whatever order the run lists them in; it reads scores as C floats, so two
scores equal in float32 are a tie there. (ir-measures also splits one ranking: it computes
RR@10 with its msmarco provider, which orders ties otherwise, and nDCG, R@k and AP with
pytrec_eval.) Lexlens's rankings break ties by
collection row, as search does, and a run read from a file keeps its tied items in the order
listed; so the measures are handed each ranking with strictly decreasing scores
(:func:`rank_scores`) and a written run gets strictly decreasing scores
(:func:`strictly_decreasing`): every measure, the first relevant rank and the run file agree
on the one order shown.

Results. Every evaluation returns an :class:`EvaluationResult`: the collection evaluated, the
query encoder, the settings, the measures (``{"aggregate": …, "per_query": …}``, ir-measures
names) and notes; each kind of evaluation adds what it alone holds (a benchmark's failures
and blame, a table's skipped rows).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from operator import itemgetter
from typing import Any

import numpy as np

from lexlens.analysis.core.results import Result
from lexlens.models.base import InputError, LexlensError

#: The smallest and largest relevance accepted: pytrec_eval allocates 8 bytes per grade
#: level up to a query's largest grade (1,000: 8 KB a query; 2**31 - 1: 16 GB).
MIN_RELEVANCE = -1_000
MAX_RELEVANCE = 1_000
#: The largest float32: trec_eval reads a run's scores as C floats.
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: The longest ranking whose ranks are all distinct as float32 scores (2**24).
MAX_RANKED = 2**24
#: A whole number as a file writes it: ``3``, ``-1``, ``+2``, ``1.0``.
_WHOLE = re.compile(r"[+-]?\d+(?:\.0*)?")


def _in_range(value: int) -> bool:
    return MIN_RELEVANCE <= value <= MAX_RELEVANCE


def _range() -> str:
    return (
        f"beyond the grades Lexlens evaluates ({MIN_RELEVANCE:,} to {MAX_RELEVANCE:,}: "
        "pytrec_eval's memory grows with the largest grade)"
    )


def relevance_from_text(text: str) -> int:
    """The relevance a qrels field writes; ``ValueError`` when it is not a whole number,
    :class:`InputError` when it is one beyond ±:data:`MAX_RELEVANCE` (the caller adds
    where)."""
    field = text.strip()
    if not _WHOLE.fullmatch(field):
        raise ValueError(f"relevance {text!r} is not a whole number")
    whole = field.split(".", 1)[0]
    digits = whole.lstrip("+-").lstrip("0")
    if len(digits) > len(str(MAX_RELEVANCE)) or not _in_range(int(whole)):
        shown = field if len(field) <= 24 else field[:24] + "…"
        raise InputError(f"relevance {shown!r} is {_range()}")
    return int(whole)


def relevance_value(value: object, name: str) -> int:
    """A relevance given through the API (an int, or a float holding a whole number),
    refused with an :class:`InputError` naming ``name`` otherwise."""
    if type(value) is int and MIN_RELEVANCE <= value <= MAX_RELEVANCE:
        return value  # the common case, read from a file
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InputError(f"{name}: relevance must be a whole number, not {value!r}")
    if not isinstance(value, Integral):
        number = float(value)
        if not math.isfinite(number) or not number.is_integer():
            raise InputError(f"{name}: relevance must be a whole number, not {value!r}")
        value = int(number)
    value = int(value)
    if not _in_range(value):
        raise InputError(f"{name}: relevance {value} is {_range()}")
    return value


def gain(relevance: int) -> int:
    """The gain the measures use: the relevance, or 0 for a non-relevant (0 or negative) one."""
    return max(0, int(relevance))


def is_relevant(relevance: int) -> bool:
    """Relevant means a relevance of 1 or more (trec_eval's default relevance level)."""
    return relevance > 0


def score_value(value: object, name: str) -> float:
    """A run's score given through the API: a finite real number, refused naming ``name``."""
    if type(value) is float and math.isfinite(value):
        return value  # the common case, read from a file
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InputError(f"{name}: a score must be a number, not {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise InputError(f"{name}: score {value!r} is not a finite number")
    return number


def rank_scores(items: Sequence[str]) -> dict[str, float]:
    """Scores for the measures that say exactly the order ``items`` (best first) are in:
    ``n, n − 1, …, 1`` (whole numbers, distinct in float32 up to :data:`MAX_RANKED` items: no
    tie for trec_eval to re-sort)."""
    n = len(items)
    if n > MAX_RANKED:
        raise InputError(f"a ranking of {n:,} items: at most {MAX_RANKED:,} can be evaluated")
    return {item: float(n - i) for i, item in enumerate(items)}


def strictly_decreasing(scores: Sequence[float]) -> list[np.float32]:
    """``scores`` (best first, non-increasing, finite) as trec_eval reads them — C floats
    (float32): two doubles closer than float32's precision are a tie there — and strictly
    decreasing: an item equal (in float32) to the one above it gets the next float32 below
    that one's, so the k-th item of a tie moves by k float32 units in the last place; the
    order is kept. Written as ``str`` of each (the shortest text that reads back the same)."""
    out: list[np.float32] = []
    previous = math.inf
    for score in scores:
        value = float(score)
        if not math.isfinite(value):
            raise InputError(f"a run's score {score!r} is not a finite number")
        if value > previous:
            raise InputError("a run's items are not in decreasing score order")
        previous = value
        single = np.float32(value) if abs(value) <= FLOAT32_MAX else np.float32(math.nan)
        if not np.isfinite(single):
            raise InputError(f"a run's score {score!r} is beyond float32, as trec_eval reads it")
        if out and single >= out[-1]:
            single = np.nextafter(out[-1], np.float32(-np.inf))
        out.append(single)
    return out


def trec_eval_key(score: float) -> float:
    """A score as trec_eval compares it: read into a C float (float32), the nearest one."""
    value = float(score)
    if abs(value) > FLOAT32_MAX:
        return math.copysign(math.inf, value)
    return float(np.float32(value))


def trec_eval_order(pairs: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """A run's items (item id, score) in the order trec_eval ranks them (its ``qsort`` by
    ``comp_sim_docno``, checked against pytrec_eval): score as a C float, descending, then item
    id descending (byte order, as ``strcmp``); the rank column and the file's order play no
    part. Two doubles equal as C floats are a tie there, so a score may exceed the one above
    it by less than float32's precision: it is then shown as that one (the order decides)."""
    ranked = sorted(pairs, key=lambda p: (trec_eval_key(p[1]), p[0]), reverse=True)
    out: list[tuple[str, float]] = []
    for doc, score in ranked:
        out.append((doc, min(score, out[-1][1]) if out else score))
    return out


def has_float32_ties(scores: Sequence[float]) -> bool:
    """Whether two scores of a ranking are equal as trec_eval reads them (C floats)."""
    keys = [trec_eval_key(s) for s in scores]
    return len(set(keys)) < len(keys)


def has_ties(scores: Sequence[float]) -> bool:
    """Whether two neighbouring scores of a ranking are equal."""
    return any(a == b for a, b in zip(scores, scores[1:], strict=False))


def checked_qrels(qrels: Mapping) -> dict[str, dict[str, int]]:
    """Query id → {item id: relevance}, ids as strings; a relevance that is not a whole
    number from −1,000 to 1,000 is refused naming it (``qrels['q1']['d3']``)."""
    if not isinstance(qrels, Mapping):
        raise InputError("qrels: expected a mapping of query id to {item id: relevance}")
    out: dict[str, dict[str, int]] = {}
    for q, judged in qrels.items():
        if not isinstance(judged, Mapping):
            raise InputError(f"qrels[{q!r}]: expected a mapping of item id to relevance")
        out[str(q)] = {
            str(d): relevance_value(r, f"qrels[{q!r}][{d!r}]") for d, r in judged.items()
        }
    return out


#: The columns a results frame (PyTerrier's: one row per hit) must hold to be read as a run.
FRAME_COLUMNS = ("qid", "docno", "score")


def is_results_frame(run: object) -> bool:
    """Whether ``run`` is a results table (a pandas DataFrame, as PyTerrier's pipelines
    return) rather than a mapping or a file."""
    return hasattr(run, "columns") and hasattr(run, "itertuples") and not isinstance(run, Mapping)


def frame_run(frame: Any) -> dict[str, list[tuple[str, Any]]]:
    """A results frame (``qid``, ``docno``, ``score``; ``rank`` when it has one, PyTerrier's
    0-based order) as ``{qid: [(docno, score), …]}``, each query's rows in rank order (else
    as listed); a missing column is refused naming it."""
    columns = [str(c) for c in frame.columns]
    lacking = [c for c in FRAME_COLUMNS if c not in columns]
    if lacking:
        raise InputError(
            f"run: a results frame needs the columns {', '.join(FRAME_COLUMNS)}; it lacks "
            f"{', '.join(lacking)} (it has {', '.join(columns) or 'none'})"
        )
    wanted = [*FRAME_COLUMNS, *(["rank"] if "rank" in columns else [])]
    rows = list(frame[wanted].itertuples(index=False, name=None))
    if "rank" in columns:
        rows.sort(key=lambda r: (str(r[0]), score_value(r[3], f"run[{r[0]!r}] rank")))
    out: dict[str, list[tuple[str, Any]]] = {}
    for qid, docno, score, *_ in rows:
        out.setdefault(str(qid), []).append((str(docno), score))
    return out


def ranked_run(run: Mapping) -> dict[str, list[tuple[str, float]]]:
    """Query id → [(item id, score), …] ranked by score, descending, ties in the order
    given, from ``{qid: [(item, score), …]}``, pytrec_eval's ``{qid: {item: score}}`` or a
    results frame (:func:`frame_run`). A score that is not a finite number, or an item
    listed twice, is refused naming it (``run['q1']['d3']``)."""
    if is_results_frame(run):
        run = frame_run(run)
    if not isinstance(run, Mapping):
        raise InputError("run: expected a mapping of query id to its ranked items")
    out: dict[str, list[tuple[str, float]]] = {}
    for q, items in run.items():
        if isinstance(items, Mapping):
            keys = list(items)
            values = list(items.values())
        elif isinstance(items, Sequence) and not isinstance(items, str):
            keys, values = [], []
            for i, pair in enumerate(items):
                if type(pair) is not tuple and not (
                    isinstance(pair, Sequence) and not isinstance(pair, str)
                ):
                    raise InputError(f"run[{q!r}][{i}]: expected an (item id, score) pair")
                if len(pair) != 2:
                    raise InputError(f"run[{q!r}][{i}]: expected an (item id, score) pair")
                keys.append(pair[0])
                values.append(pair[1])
        else:
            raise InputError(f"run[{q!r}]: expected [(item id, score), …] or {{item id: score}}")
        named = isinstance(items, Mapping)
        scores = [
            v
            if type(v) is float and math.isfinite(v)
            else score_value(v, f"run[{q!r}][{keys[i]!r}]" if named else f"run[{q!r}][{i}]")
            for i, v in enumerate(values)
        ]
        pairs = [(str(d), s) for d, s in zip(keys, scores, strict=True)]
        if not named and len({d for d, _ in pairs}) < len(pairs):
            seen: set[str] = set()
            for i, (d, _) in enumerate(pairs):
                if d in seen:
                    raise InputError(f"run[{q!r}][{i}]: item {d!r} is listed twice")
                seen.add(d)
        out[str(q)] = sorted(pairs, key=itemgetter(1), reverse=True)  # stable: ties as given
    return out


def measure(
    run: Mapping[str, Sequence[tuple[str, float]]],
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str],
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """The mean and per-query values of ``measures`` (ir-measures names: ``nDCG@10``,
    ``RR@10``, ``AP@100``…) over exactly the queries of ``qrels``: each query's ranking
    ``run[q]`` best first, handed over with strictly decreasing scores (:func:`rank_scores`);
    a query without a ranking counts 0; relevance clamped to a gain of 0 or more. The mean is
    the per-query values' mean: the aggregate and the per-query table always agree. A value
    the provider failed to compute is refused (:func:`_check_provided`), never a 0."""
    import ir_measures  # heavy: ir_measures loads on first use

    measures = list(dict.fromkeys(measures))
    parsed = {name: ir_measures.parse_measure(name) for name in measures}  # once each
    spellings: dict[str, list[str]] = {}  # "R@5" and "Recall@5" are one measure
    for name, found in parsed.items():
        spellings.setdefault(str(found), []).append(name)
    distinct = list({str(found): found for found in parsed.values()}.values())
    judged = {
        q: {d: gain(relevance_value(r, f"qrels[{q!r}][{d!r}]")) for d, r in rel.items()}
        for q, rel in qrels.items()
    }
    ranked = {q: rank_scores([d for d, _ in run[q]]) for q in judged if run.get(q)}
    per_query = {q: dict.fromkeys(measures, 0.0) for q in judged}
    given: set[tuple[str, str]] = set()
    for value in ir_measures.iter_calc(distinct, judged, ranked):
        if value.query_id in per_query:
            given.add((value.query_id, str(value.measure)))
            for name in spellings[str(value.measure)]:
                per_query[value.query_id][name] = float(value.value)
    for q, scores in ranked.items():
        _check_provided(q, list(scores), judged[q], distinct, per_query[q], given, spellings)
    n = max(1, len(per_query))
    aggregate = {m: float(sum(v[m] for v in per_query.values()) / n) for m in measures}
    return aggregate, per_query


#: Measures that are above 0 whenever a relevant item is ranked within their cutoff.
_POSITIVE_WHEN_FOUND = frozenset({"nDCG", "RR", "R", "AP", "P", "Success"})


def _check_provided(
    q: str,
    items: list[str],
    gains: Mapping[str, int],
    distinct: Sequence,
    values: Mapping[str, float],
    given: set[tuple[str, str]],
    spellings: Mapping[str, list[str]],
) -> None:
    """Refuse a ranked query's measure that ir-measures did not return, or returned as 0
    although a relevant item is ranked within its cutoff: a provider that failed (pytrec_eval
    refused memory returns 0 for every query) must not read as a query that failed."""
    first = next((i for i, d in enumerate(items, 1) if gains.get(d, 0) > 0), None)
    for found in distinct:
        name = spellings[str(found)][0]
        if (q, str(found)) not in given:
            raise LexlensError(
                f"ir-measures gave no {name} for query {q!r}: its provider failed, and no "
                "value is reported rather than a 0 it did not compute"
            )
        params = dict(found.params)
        cutoff = params.pop("cutoff", None)
        if (
            first is not None
            and found.NAME in _POSITIVE_WHEN_FOUND
            and not params
            and (cutoff is None or first <= cutoff)
            and values[name] <= 0
        ):
            raise LexlensError(
                f"ir-measures gave {name} = 0 for query {q!r} although its relevant item "
                f"{items[first - 1]!r} is ranked {first}: its provider failed (out of "
                "memory?), and no value is reported rather than a wrong 0"
            )


def measure_rankings(
    ranked: Mapping[str, Sequence[str]],
    relevant: Mapping[str, Collection[str]],
    measures: Sequence[str],
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """:func:`measure` of rankings given as item ids (best first; an id listed twice counts
    at its first place) against the ids relevant to each query (relevance 1): the mean and
    per-query values over every query of ``relevant``, one with no relevant id counting 0."""
    run = {q: [(d, 0.0) for d in dict.fromkeys(ids)] for q, ids in ranked.items()}
    qrels = {q: dict.fromkeys(ids, 1) for q, ids in relevant.items()}
    return measure(run, qrels, measures)


@dataclass(frozen=True)
class EvaluationResult(Result):
    """What every evaluation holds (see the module docstring); its JSON document lists the
    notes last, after what the kind of evaluation adds."""

    file_stem = "evaluation"

    index: dict  # the collection evaluated, as it describes itself
    encoder: str  # the query encoder
    settings: dict  # the options used (their field names), and what was evaluated
    metrics: dict  # {"aggregate": means, "per_query": values per query}
    notes: list[str]

    def to_dict(self) -> dict:
        """The JSON document: the fields in declaration order, the notes last."""
        document = super().to_dict()
        document["notes"] = document.pop("notes")
        return document
