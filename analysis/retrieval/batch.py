"""Exact top-n for many queries at once over a stored collection.

Every query is ranked by search's one exact scorer
(:func:`lexlens.analysis.retrieval.ranking.ranked`): MaxScore over the collection's postings (a
large index's stored float16 postings, memory-mapped and read in place; an exact float32
transpose of a small one's CSR, built once), then every item whose score could still reach
the top n rescored exactly in float64 from its stored row. The rankings are the exact ones,
ties broken by row (collection order, search's rule). Only items with a positive score are
ranked: an item that shares no term with the query scores 0 and is *not retrieved* (nor is
one whose terms cancel to 0 or less), so it has no rank. Memory: what one query touches,
whatever the number of queries; no copy of the postings or rows is made (a large batch maps
the index's files in one pass first: the kernel's shared page cache, not the process's own
memory).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.gating import bow_query, gate
from lexlens.analysis.core.results import Progress
from lexlens.analysis.core.truncation import Truncation, opening, truncation
from lexlens.analysis.retrieval.ranking import exact_scores_of, ranked, touched_items
from lexlens.models.base import Capability, Encoder

#: Queries encoded in one batch.
ENCODE_BATCH = 64
#: Queries ranked between two progress reports.
PROGRESS_EVERY = 64
#: A batch whose queries × n reach this share of the items maps the index's rows and
#: postings in one pass first (the pages it would otherwise fault in one by one).
WARM_SHARE = 0.02
#: Bytes between two reads of that pass (one page).
PAGE = 4096


@dataclass(frozen=True)
class QueryRanking:
    """One query's exact top n (rows, float64 scores > 0, best first, ties by row); the
    approximate scores of every item it touches, needed only to rank an item beyond the top
    n, are made on the first such request (:meth:`BatchScorer.rank_of`) and kept here."""

    rows: np.ndarray
    scores: np.ndarray
    _touched: list = field(default_factory=list, compare=False, repr=False)


class BatchScorer:
    """Scores many queries against one stored index with search's exact scorer."""

    def __init__(self, index: StoredCollection) -> None:
        self.index = index
        self.size = len(index)
        self._warmed = False

    def exact(self, row: int, q: np.ndarray) -> float:
        """Item ``row``'s exact score for the dense query ``q`` (float64)."""
        return float(self.exact_many(np.array([row], np.int64), q)[0])

    def exact_many(self, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The exact scores (float64) of several items, their stored rows read at once."""
        return exact_scores_of(self.index, np.asarray(rows, np.int64), q, mapped=True)

    def rank(
        self, vectors: list[np.ndarray], n: int, progress: Progress | None = None
    ) -> Iterator[QueryRanking]:
        """The :class:`QueryRanking` of every query (dense vectors ``[|V|]``), in order."""
        total = len(vectors)
        if total * n >= WARM_SHARE * self.size:
            self._warm()
        for done, q in enumerate(vectors, 1):
            rows, scores = ranked(self.index, q, n, mapped=True)
            retrieved = scores > 0  # scoring 0 or less: not retrieved
            yield QueryRanking(rows[retrieved], scores[retrieved])
            if progress and (done % PROGRESS_EVERY == 0 or done == total):
                progress(done / total, f"{done}/{total} queries ranked")

    def _warm(self) -> None:
        """Map the stored index's rows and postings into this process in one pass, once
        (they stay the kernel's shared page cache: nothing is copied)."""
        if self._warmed:
            return
        self._warmed = True
        index = self.index
        for array in (index.indices, index.data, *(index.postings or ())[1:3]):
            if isinstance(array, np.memmap) and array.size:
                np.asarray(array).view(np.uint8)[::PAGE].max()

    def rank_of(self, ranking: QueryRanking, row: int, q: np.ndarray) -> tuple[int | None, float]:
        """The exact 1-based rank and score of item ``row`` (ties by row), at any depth;
        rank ``None`` when it scores 0 or less (not retrieved)."""
        score = self.exact(row, q)
        if score <= 0:
            return None, score
        if not ranking._touched:
            ranking._touched.append(touched_items(self.index, q))
        touched, approx, slack = ranking._touched[0]
        above = approx - slack > score
        unsure = ~above & (approx + slack >= score)
        count = int(above.sum())
        rows = touched[unsure]
        if rows.size:
            scores = self.exact_many(rows, q)
            count += int(np.count_nonzero((scores > score) | ((scores == score) & (rows < row))))
        return count + 1, score


def encode_queries(
    encoder: Encoder,
    texts: list[str],
    mode: str,
    gate_k: int,
    progress: Progress | None,
    *,
    names: list[str] | None = None,
    cuts: list[Truncation] | None = None,
) -> list[np.ndarray]:
    """Every query's vector: the gated ``E_q = V ⊙ G`` or the bag of its own tokens, encoded
    in batches. ``cuts``, when given, receives each query cut to the encoder's token limit
    (named ``query`` and its id from ``names``)."""
    vectors: list[np.ndarray] = []
    bow_only = mode == "bow" and not encoder.can(Capability.TEXT_LEXICAL)
    for start in range(0, len(texts), ENCODE_BATCH):
        batch = texts[start : start + ENCODE_BATCH]
        if bow_only:
            encodings = encoder.tokenize_texts(batch)
        else:
            encodings = encoder.encode_texts(batch, side="query", keep_units=False)
        for i, enc in enumerate(encodings, start):
            if cuts is not None and enc.truncated:
                name = f"query {names[i]}" if names else f"query {opening(texts[i])}"
                cuts.append(truncation(encoder, texts[i], enc, name))
            if mode == "bow":
                vectors.append(bow_query(enc, encoder.vocab, encoder.bow_normalize))
            else:
                vectors.append(gate(enc, encoder.vocab, gate_k))
        if progress:
            progress(min(1.0, (start + len(batch)) / len(texts)), "encoding the queries")
    return vectors
