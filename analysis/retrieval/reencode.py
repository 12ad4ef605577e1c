"""Edited texts through the model, in batches: each distinct text encoded once, its query
vector kept sparse (the non-zero terms of ``E_q``), every score computed from it.

A query vector is the evaluation's: the gated ``E_q = V(q) ⊙ G(q)`` or VDR's bag of words
(:func:`lexlens.analysis.core.gating.gate`, :func:`~lexlens.analysis.core.gating.bow_query`).
A text left with no word (every word deleted) is an empty query: the encoder refuses it and
no system would run it; its vector is zero, so every item scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lexlens.analysis.core.gating import bow_query, gate
from lexlens.models.base import Encoder

#: Texts handed to the encoder at once (it batches them by length itself).
ENCODE_GROUP = 2048

Sparse = tuple[np.ndarray, np.ndarray]  # (columns int64, weights float32)


class QueryVectors:
    """The query vectors of texts, encoded on demand in batches and kept (sparse)."""

    def __init__(self, encoder: Encoder, query_mode: str = "parametric", gate_k: int = 768):
        self.encoder, self.query_mode, self.gate_k = encoder, query_mode, int(gate_k)
        self._kept: dict[str, Sparse] = {}
        self.calls = 0  # texts the model encoded

    def _vector(self, encoding) -> np.ndarray:
        vocab = self.encoder.vocab
        if self.query_mode == "bow":
            return bow_query(encoding, vocab, self.encoder.bow_normalize)
        weights = encoding.weights
        if self.gate_k > 0 and np.count_nonzero(weights) <= self.gate_k and weights.min() >= 0:
            # the top-k holds every positive weight, and the others are zero: E_q = V
            return weights.astype(np.float32, copy=True)
        return gate(encoding, vocab, self.gate_k)

    def encode(self, texts: Sequence[str]) -> None:
        """Encode every text not yet kept (distinct, in groups of :data:`ENCODE_GROUP`)."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._kept]
        for t in [t for t in todo if not t.strip()]:
            self._kept[t] = (np.zeros(0, np.int64), np.zeros(0, np.float32))
        todo = [t for t in todo if t.strip()]
        for start in range(0, len(todo), ENCODE_GROUP):
            group = todo[start : start + ENCODE_GROUP]
            encodings = self.encoder.encode_texts(group, side="query", keep_units=False)
            self.calls += len(group)
            for text, enc in zip(group, encodings, strict=True):
                vector = self._vector(enc)
                cols = np.flatnonzero(vector)
                self._kept[text] = (cols.astype(np.int64), vector[cols].astype(np.float32))

    def sparse(self, text: str) -> Sparse:
        """The kept vector of ``text`` (encoded now if it is not)."""
        if text not in self._kept:
            self.encode([text])
        return self._kept[text]

    def scores(self, texts: Sequence[str], items: np.ndarray) -> np.ndarray:
        """Scores ``[len(texts), len(items)]`` of each text's vector against dense item
        vectors ``items [n_items, |V|]`` (float64 products and sums)."""
        self.encode(texts)
        out = np.zeros((len(texts), items.shape[0]))
        for i, text in enumerate(texts):
            cols, vals = self._kept[text]
            if cols.size:
                out[i] = items[:, cols].astype(np.float64) @ vals.astype(np.float64)
        return out


def dense_rows(index, rows: Sequence[int]) -> np.ndarray:
    """Stored items as dense vectors ``[len(rows), |V|]`` (float32, as stored)."""
    out = np.zeros((len(rows), index.vocab_size), np.float32)
    for i, row in enumerate(rows):
        cols, vals = index.row(int(row))
        out[i, np.asarray(cols, np.int64)] = np.asarray(vals, np.float32)
    return out
