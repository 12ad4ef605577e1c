"""A stored collection as one stage of another tool's pipeline (PyTerrier's, ``lexlens.pyterrier``).

- :func:`rank_queries`: every query ranked exactly as ``lexlens evaluate`` ranks it — one
  query vector per text (:class:`~lexlens.analysis.retrieval.queries.QuerySpec`, the
  evaluation's encoder, mode and gate, encoded in the evaluation's batches), one scorer
  (:func:`~lexlens.analysis.retrieval.scorer.scorer_for`), its top ``n`` with the items
  scoring 0 or less left out — and each score as ``run.trec`` writes it (float32, strictly
  decreasing: a tie keeps the collection's row order for any tool that re-sorts by score,
  as trec_eval and ir-measures do);
- :func:`explain_hits`: any ranking's hits (another system's: BM25's) explained in the
  collection's vocabulary: each hit's ``q ⊙ d`` by word (pieces joined, as a failure's),
  the largest first, and their sum, the hit's score *in this collection's encoder* — not
  the reasons of the system that ranked it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.arguments import index_argument
from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.metrics import strictly_decreasing
from lexlens.analysis.core.results import Record
from lexlens.analysis.core.words import text_words
from lexlens.analysis.evaluation.explain import SHOWN_CONTRIBUTIONS, explain_item
from lexlens.analysis.evaluation.options import EvaluationOptions
from lexlens.analysis.evaluation.selection import checked_queries
from lexlens.analysis.retrieval.queries import QuerySpec, query_encoder_for
from lexlens.analysis.retrieval.scorer import scorer_for
from lexlens.models.base import Encoder, InputError

#: Words listed per explained hit by default.
EXPLAINED_WORDS = 5
#: The most words listed per explained hit (as many as a failure lists per item).
MAX_EXPLAINED_WORDS = SHOWN_CONTRIBUTIONS


@dataclass(frozen=True)
class Ranked:
    """Every query's ranking as ``lexlens evaluate`` makes it: ``run`` {query id: [(item id,
    score as run.trec writes it), …]} best first, and the query encoder that made it."""

    run: dict[str, list[tuple[str, float]]]
    encoder: str


def rank_queries(
    index: str | Path | StoredCollection,
    queries: Mapping[str, str],
    *,
    query_encoder: Encoder | str | None = None,
    device: str | None = None,
    options: EvaluationOptions | None = None,
    **given: Any,
) -> Ranked:
    """``queries`` (id → text) ranked on ``index`` as :func:`~lexlens.analysis.evaluation.
    evaluate.evaluate` ranks them (see the module docstring); ``options`` are an
    evaluation's (top, query mode, gate) or their fields as keywords."""
    options = EvaluationOptions.of(options, **given)
    queries = checked_queries(queries)
    ix = index_argument(index)
    encoder = query_encoder_for(ix, query_encoder, device)
    order = list(queries)
    vectors = QuerySpec(encoder, options.query_mode, options.gate_k).vectors(
        [queries[q] for q in order], names=order
    )
    ids = [str(i) for i in ix.column("id")]
    run: dict[str, list[tuple[str, float]]] = {}
    for q, ranking in zip(order, scorer_for(ix).rank(vectors, options.top), strict=True):
        scores = strictly_decreasing([float(s) for s in ranking.scores])
        run[q] = [(ids[int(r)], float(s)) for r, s in zip(ranking.rows, scores, strict=True)]
    return Ranked(run, encoder.name)


@dataclass(frozen=True)
class ExplainedHit(Record):
    """One hit explained in the collection's vocabulary: its words' ``q ⊙ d`` (word,
    contribution; the largest first, at most the words asked for) and their sum over every
    word, the hit's score in that encoder; ``held`` false when the collection lacks the item
    (no words, score ``None``)."""

    words: list[tuple[str, float]]
    score: float | None
    held: bool


def explain_hits(
    index: str | Path | StoredCollection,
    hits: Sequence[tuple[str, str, str]],
    *,
    words: int = EXPLAINED_WORDS,
    query_encoder: Encoder | str | None = None,
    device: str | None = None,
    options: EvaluationOptions | None = None,
    **given: Any,
) -> tuple[list[ExplainedHit], str]:
    """Each hit ``(query id, query text, item id)`` explained on ``index`` (see the module
    docstring), each distinct query encoded once as an evaluation encodes it; and the name of
    the query encoder whose vocabulary the words are in."""
    options = EvaluationOptions.of(options, **given)
    if (
        isinstance(words, bool)
        or not isinstance(words, int)
        or not 1 <= words <= MAX_EXPLAINED_WORDS
    ):
        raise InputError(f"words must be an integer from 1 to {MAX_EXPLAINED_WORDS}, not {words!r}")
    ix = index_argument(index)
    encoder = query_encoder_for(ix, query_encoder, device)
    texts: dict[str, str] = {}
    for q, text, _ in hits:
        if texts.setdefault(str(q), text) != text:
            raise InputError(f"query {q!r} is given with two texts: {texts[str(q)]!r}, {text!r}")
    order = list(checked_queries(texts)) if texts else []
    vectors = dict(
        zip(
            order,
            QuerySpec(encoder, options.query_mode, options.gate_k).vectors(
                [texts[q] for q in order], names=order
            ),
            strict=True,
        )
    )
    row_of = {str(item): r for r, item in enumerate(ix.column("id"))}
    rows = sorted({row_of[str(d)] for _, _, d in hits if str(d) in row_of})
    metas = dict(zip(rows, ix.meta(rows), strict=True))
    out: list[ExplainedHit] = []
    for q, text, item in hits:
        row = row_of.get(str(item))
        if row is None:
            out.append(ExplainedHit([], None, False))
            continue
        explained, raw = explain_item(
            vectors[str(q)], row, None, False, ix, text_words(text), metas[row]
        )
        listed = [(str(c["token"]), float(c["contribution"])) for c in explained.contributions]
        out.append(ExplainedHit(listed[:words], float(sum(c["contribution"] for c in raw)), True))
    return out, encoder.name
