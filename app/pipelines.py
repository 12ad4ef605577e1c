"""Lexlens in PyTerrier pipelines, as ``lexlens.pyterrier`` offers them (``pip install
"lexlens[pyterrier]"``; no Java needed: neither stage starts Terrier).

- :class:`LexlensRetriever` — a stored collection as a PyTerrier retriever: queries
  (``qid``, ``query``) → results (``qid``, ``query``, ``docno``, ``score``, ``rank``), the
  ranking ``lexlens evaluate`` makes (one query rule, one exact scorer), each score as its
  ``run.trec`` writes it; ``rank`` counts from 0, as PyTerrier's does;
- :class:`LexlensExplain` — any pipeline's results explained in the collection's
  vocabulary: ``bm25 >> LexlensExplain(ix)`` adds, per hit, the encoder's words that make
  its ``q ⊙ d`` and their sum, in columns named after that encoder
  (``splade_tiny_words``, ``splade_tiny_score``): what *that encoder* sees in BM25's hits,
  not BM25's reasons.

A PyTerrier results frame is read as a run wherever Lexlens takes one
(``evaluate_benchmark(ix, run=frame)``, ``SystemsSpec([ix], runs=[frame], names=["bm25"])``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from lexlens.analysis.collections.arguments import index_argument
from lexlens.analysis.evaluation.options import EvaluationOptions
from lexlens.analysis.retrieval.queries import query_encoder_for
from lexlens.analysis.systems.pipeline import explain_hits, rank_queries
from lexlens.models.base import InputError

try:
    import pyterrier as pt
except ImportError as error:  # the extra is not installed
    raise ImportError(
        'lexlens.pyterrier needs PyTerrier: pip install "lexlens[pyterrier]"'
    ) from error

#: The columns a query frame must hold.
QUERY_COLUMNS = ("qid", "query")
#: The columns a results frame must hold to be explained.
HIT_COLUMNS = ("qid", "query", "docno")


def _columns(frame: Any, wanted: tuple[str, ...], what: str) -> None:
    """Refuse a frame that lacks one of ``wanted``, naming it."""
    lacking = [c for c in wanted if c not in frame.columns]
    if lacking:
        raise InputError(
            f"{what}: the frame lacks the column {', '.join(lacking)} "
            f"(it has {', '.join(map(str, frame.columns)) or 'none'})"
        )


def column_prefix(encoder: str) -> str:
    """The columns' prefix that names an encoder (``splade-tiny`` → ``splade_tiny``)."""
    return re.sub(r"\W+", "_", encoder).strip("_").lower() or "lexlens"


class LexlensRetriever(pt.Transformer):
    """A stored collection searched as ``lexlens evaluate`` searches it (see the module
    docstring); ``top``, ``query_mode`` and ``gate_k`` are the evaluation's options."""

    def __init__(
        self,
        index: str | Path | Any,
        *,
        query_encoder: Any = None,
        top: int | None = None,
        query_mode: str | None = None,
        gate_k: int | None = None,
        device: str | None = None,
    ) -> None:

        given = {"top": top, "query_mode": query_mode, "gate_k": gate_k}
        self.index = index_argument(index)
        self.options = EvaluationOptions.of(**{k: v for k, v in given.items() if v is not None})
        self.query_encoder = query_encoder_for(self.index, query_encoder, device)

    def __repr__(self) -> str:
        return f"LexlensRetriever({self.index.label}, {self.query_encoder.name}, top={self.options.top})"

    def transform(self, queries: Any) -> Any:
        """Each query's ranking, one row per hit, best first."""

        _columns(queries, QUERY_COLUMNS, "LexlensRetriever")
        texts = dict(zip(queries["qid"].astype(str), queries["query"], strict=True))
        ranked = rank_queries(
            self.index, texts, query_encoder=self.query_encoder, options=self.options
        )
        kept = queries.assign(qid=queries["qid"].astype(str)).drop_duplicates("qid")
        rows = [(q, d, s, r) for q, pairs in ranked.run.items() for r, (d, s) in enumerate(pairs)]
        hits = pd.DataFrame(rows, columns=["qid", "docno", "score", "rank"])
        hits = hits.astype({"qid": str, "docno": str, "score": "float64", "rank": "int64"})
        return kept.merge(hits, on="qid", how="inner")[[*kept.columns, "docno", "score", "rank"]]


class LexlensExplain(pt.Transformer):
    """Any pipeline's hits explained in the collection's vocabulary (see the module
    docstring): ``{prefix}_words`` (word, contribution) the largest first, ``words`` of
    them, and ``{prefix}_score`` their sum over every word (an empty list and NaN for an
    item the collection does not hold); ``prefix`` defaults to the query encoder's
    name."""

    def __init__(
        self,
        index: str | Path | Any,
        *,
        query_encoder: Any = None,
        words: int = 5,
        prefix: str | None = None,
        query_mode: str | None = None,
        gate_k: int | None = None,
        device: str | None = None,
    ) -> None:

        given = {"query_mode": query_mode, "gate_k": gate_k}
        self.index = index_argument(index)
        self.options = EvaluationOptions.of(**{k: v for k, v in given.items() if v is not None})
        self.query_encoder = query_encoder_for(self.index, query_encoder, device)
        self.words = words
        if prefix is not None and (not isinstance(prefix, str) or not prefix.strip()):
            raise InputError(f"prefix must be a non-empty text, not {prefix!r}")
        self.prefix = prefix or column_prefix(self.query_encoder.name)

    def __repr__(self) -> str:
        return f"LexlensExplain({self.index.label}, {self.query_encoder.name})"

    def transform(self, results: Any) -> Any:
        """``results`` with the two columns added, its rows and order unchanged."""

        _columns(results, HIT_COLUMNS, "LexlensExplain")
        hits = list(
            zip(
                results["qid"].astype(str),
                results["query"],
                results["docno"].astype(str),
                strict=True,
            )
        )
        explained, _ = explain_hits(
            self.index,
            hits,
            words=self.words,
            query_encoder=self.query_encoder,
            options=self.options,
        )
        return results.assign(
            **{
                f"{self.prefix}_words": [e.words for e in explained],
                f"{self.prefix}_score": [e.score for e in explained],
            }
        )
