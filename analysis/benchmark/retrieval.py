"""Exact top-n for many queries at once over a stored collection.

The queries are one sparse matrix ``Q [queries × |V|]`` and the collection's postings a
matrix ``P [|V| × items]``: a large index's stored float16 postings (memory-mapped; their
weights read once as float32), else an exact float32 transpose of a small one's CSR, built
once. A chunk of queries is scored by one sparse product ``Q_chunk · P`` (only items sharing
a term with a query appear). Those scores carry a bound on their error (float32 rounding,
and float16 quantisation for stored postings), and every item whose score could still reach
a query's top n is rescored exactly in float64 from its stored row, as one query's search
does (:func:`lexlens.analysis.search.ranking.top_items`): the rankings are the exact ones,
ties broken by row (collection order, search's rule). Only items with a positive score are
ranked: an item that shares no term with the query scores 0 and is *not retrieved* (nor is
one whose terms cancel to 0 or less), so it has no rank. Memory: 4 bytes a non-zero for
stored postings (12 for a transpose) plus one chunk's scores, whatever the number of
queries.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from lexlens.analysis.collections.store import FP16_ABS, FP16_REL, StoredIndex
from lexlens.analysis.core.gating import bow_query, gate
from lexlens.analysis.core.results import Progress
from lexlens.models.base import Capability, Encoder

#: Queries encoded in one batch.
ENCODE_BATCH = 64
#: Queries scored by one sparse product (bounded by the scores it may hold, below).
MAX_CHUNK = 256
#: Upper bound of the float32 scores one chunk may hold at once (entries).
MAX_CHUNK_ENTRIES = 32_000_000


@dataclass(frozen=True)
class QueryRanking:
    """One query's exact top n (rows, float64 scores > 0, best first, ties by row) and what
    is needed to rank any other item exactly: its approximate scores over the items it
    touches."""

    rows: np.ndarray
    scores: np.ndarray
    touched: np.ndarray  # rows with a shared term (in no particular order)
    approx: np.ndarray  # their float32 scores
    slack: np.ndarray  # |approx − exact| ≤ slack


class BatchScorer:
    """Scores many queries against one stored index; the postings are built once."""

    def __init__(self, index: StoredIndex) -> None:
        import scipy.sparse as sp

        self.index = index
        self.size = len(index)
        #: The scale of the postings' weights, and the error bounds they add (0: exact).
        self.scale, self.r16, self.a16 = 1.0, 0.0, 0.0
        if not self.size:
            self.postings = None
        elif index.postings is not None and index.nnz < 2**31:
            p_indptr, p_items, p_weights, scale = index.postings
            self.postings = sp.csr_matrix(
                (np.asarray(p_weights, np.float32), p_items, np.asarray(p_indptr, np.int32)),
                shape=(index.vocab_size, self.size),
            )
            self.scale = float(scale)
            self.r16, self.a16 = 2 * FP16_REL / (1 - FP16_REL), 2 * FP16_ABS * self.scale
        else:
            self.postings = index.rows(0, self.size).T.tocsr()
        self._magnitudes = None
        data = np.asarray(index.data)
        self.nonnegative = bool(data.size == 0 or float(data.min()) >= 0.0)

    def _abs_postings(self):
        """``|P|``, made once (only signed weights need it)."""
        if self._magnitudes is None:
            self._magnitudes = abs(self.postings)
        return self._magnitudes

    def exact(self, row: int, q: np.ndarray) -> float:
        """Item ``row``'s exact score for the dense query ``q`` (float64)."""
        return float(self.exact_many(np.array([row], np.int64), q)[0])

    def exact_many(self, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The exact scores (float64) of several items, their stored rows read at once."""
        index = self.index
        starts = np.asarray(index.indptr[rows], np.int64)
        lengths = np.asarray(index.indptr[rows + 1], np.int64) - starts
        total = int(lengths.sum())
        if total == 0:
            return np.zeros(rows.size)
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        positions = offsets + np.arange(total)
        cols = np.asarray(index.indices[positions])
        if int(cols.min()) < 0 or int(cols.max()) >= index.vocab_size:
            raise index.corrupt("vocabulary ids out of range")
        parts = q[cols].astype(np.float64) * np.asarray(index.data[positions], np.float64)
        owner = np.repeat(np.arange(rows.size), lengths)
        return np.bincount(owner, weights=parts, minlength=rows.size)

    def rank(
        self, vectors: list[np.ndarray], n: int, progress: Progress | None = None
    ) -> Iterator[QueryRanking]:
        """The :class:`QueryRanking` of every query (dense vectors ``[|V|]``), in order."""
        import scipy.sparse as sp

        total = len(vectors)
        start = 0
        while start < total:
            stop = self._chunk_end(vectors, start)
            chunk = sp.csr_matrix(np.stack(vectors[start:stop]).astype(np.float32))
            if self.postings is None:
                for _ in range(start, stop):
                    empty = np.zeros(0, np.int64)
                    yield QueryRanking(empty, np.zeros(0), empty, np.zeros(0), np.zeros(0))
            else:
                approx = (chunk @ self.postings).tocsr()
                approx.data *= np.float32(self.scale)
                signed = not self.nonnegative or bool((chunk.data < 0).any())
                magnitude = None
                if signed:  # align both by item: sorted rows (the unsigned path needs no order)
                    approx.sort_indices()
                    magnitude = (abs(chunk) @ self._abs_postings()).tocsr()
                    magnitude.data *= np.float32(self.scale)
                    magnitude.sort_indices()
                terms = np.diff(chunk.indptr)
                for i in range(stop - start):
                    yield self._one(vectors[start + i], int(terms[i]), approx, magnitude, i, n)
            start = stop
            if progress:
                progress(start / total, f"{start}/{total} queries ranked")

    def _chunk_end(self, vectors: list, start: int) -> int:
        """The end of the next chunk: at most MAX_CHUNK queries, and scores that fit."""
        stop = start
        held = 0
        while stop < len(vectors) and stop - start < MAX_CHUNK:
            held += (
                self.size
                if self.postings is None
                else min(self.size, int(self._touch_bound(vectors[stop])))
            )
            if held > MAX_CHUNK_ENTRIES and stop > start:
                break
            stop += 1
        return stop

    def _touch_bound(self, q: np.ndarray) -> int:
        terms = np.flatnonzero(q)
        indptr = self.postings.indptr
        return int(np.sum(indptr[terms + 1] - indptr[terms]))

    def _one(self, q, terms: int, approx, magnitude, i: int, n: int) -> QueryRanking:
        """One query's exact top ``n`` from its row of the chunk's approximate scores."""
        a, b = approx.indptr[i], approx.indptr[i + 1]
        touched = approx.indices[a:b].astype(np.int64)
        scores = approx.data[a:b].astype(np.float64)
        # float32 products and sums over the query's terms, doubled; for stored postings also
        # their float16 quantisation |w̃ − w| ≤ 2^-11·|w̃|/(1 − 2^-11) + scale·2^-25 (doubled)
        rel = (1 + 2 * (terms + 3) * 2.0**-24) * (1 + self.r16) - 1
        absolute = self.a16 * (1 + rel) * float(np.abs(q).sum()) + 1e-300
        if magnitude is None:  # no negative weight: |q|·|w| = q·w
            slack = rel * np.abs(scores) + absolute
        else:  # every touched item, with its approximate score (0 where terms cancel)
            ma, mb = magnitude.indptr[i], magnitude.indptr[i + 1]
            mag_items = magnitude.indices[ma:mb].astype(np.int64)
            where = np.searchsorted(touched, mag_items)
            found = where < touched.size
            found[found] &= touched[where[found]] == mag_items[found]
            aligned = np.zeros(mag_items.size)
            aligned[found] = scores[where[found]]
            touched, scores = mag_items, aligned
            slack = rel * magnitude.data[ma:mb].astype(np.float64) + absolute
        if touched.size == 0:
            empty = np.zeros(0, np.int64)
            return QueryRanking(empty, np.zeros(0), touched, scores, slack)
        keep = min(n, touched.size)
        low = scores - slack
        threshold = np.partition(low, touched.size - keep)[touched.size - keep]
        candidates = touched[scores + slack >= threshold]
        exact = self.exact_many(candidates, q)
        best = np.lexsort((candidates, -exact))[:keep]
        best = best[exact[best] > 0]  # scoring 0 or less: not retrieved
        return QueryRanking(candidates[best], exact[best], touched, scores, slack)

    def rank_of(self, ranking: QueryRanking, row: int, q: np.ndarray) -> tuple[int | None, float]:
        """The exact 1-based rank and score of item ``row`` (ties by row), at any depth;
        rank ``None`` when it scores 0 or less (not retrieved)."""
        score = self.exact(row, q)
        if score <= 0:
            return None, score
        above = ranking.approx - ranking.slack > score
        unsure = ~above & (ranking.approx + ranking.slack >= score)
        count = int(above.sum())
        rows = ranking.touched[unsure]
        if rows.size:
            scores = self.exact_many(rows, q)
            count += int(np.count_nonzero((scores > score) | ((scores == score) & (rows < row))))
        return count + 1, score


def encode_queries(
    encoder: Encoder, texts: list[str], mode: str, gate_k: int, progress: Progress | None
) -> list[np.ndarray]:
    """Every query's vector: the gated ``E_q = V ⊙ G`` or the bag of its own tokens, encoded
    in batches."""
    vectors: list[np.ndarray] = []
    bow_only = mode == "bow" and not encoder.can(Capability.TEXT_LEXICAL)
    for start in range(0, len(texts), ENCODE_BATCH):
        batch = texts[start : start + ENCODE_BATCH]
        if bow_only:
            encodings = encoder.tokenize_texts(batch)
        else:
            encodings = encoder.encode_texts(batch, side="query", keep_units=False)
        for enc in encodings:
            if mode == "bow":
                vectors.append(bow_query(enc, encoder.vocab, encoder.bow_normalize))
            else:
                vectors.append(gate(enc, encoder.vocab, gate_k))
        if progress:
            progress(min(1.0, (start + len(batch)) / len(texts)), "encoding the queries")
    return vectors
