"""One set of items (captions, texts or images) measured as it streams: per-item rows, means, FLOPs and vocabulary statistics, one batch at a time."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.core.results import Record
from lexlens.analysis.core.words import Term, input_words, merge_word_pieces, text_words
from lexlens.analysis.deviation.flops import flops_with_self_pairs, flops_within
from lexlens.analysis.deviation.options import (
    DEFAULT_MAX_ROWS,
    MAX_CLOUD_WORDS,
    MAX_EVIDENCE_ITEMS,
)
from lexlens.analysis.deviation.scoring import ItemDeviation, Scorer
from lexlens.analysis.deviation.tokens import (
    BatchNumbers,
    TokenRows,
    batch_numbers,
    numbers_one_by_one,
)
from lexlens.analysis.deviation.vocab_stats import (
    CLOUD_TERMS,
    LAZY_RATE,
    VocabAccumulator,
    VocabStats,
    as_csr,
)


@dataclass(frozen=True)
class SetDeviation(Record):
    """Exact@k, Semantic@k, positive terms, FLOPs and vocabulary statistics of one set.

    ``n`` counts every item (FLOPs and vocabulary statistics cover them all); Exact@k and
    Semantic@k cover the ``n_measured`` items that have caption tokens to compare with (the
    others are listed in ``skipped``); they are ``None`` when no item could be measured.
    """

    kind: str  # "captions", "texts" or "images"
    n: int
    n_measured: int
    exact: float | None
    semantic: float | None
    by_denominator: dict[str, dict[str, float | None]]
    positive_terms: dict[str, float]
    flops: float | None  # mean shared active dims of two different items (no self-pair)
    flops_with_self_pairs: float | None  # FLOPs as SPLADE and D2S define it: Σ_j p̄_j²
    mean_active_dims: float
    rows: list[ItemDeviation]
    skipped: list[dict]
    n_skipped: int
    vocabulary: VocabStats | None
    #: the dataset cloud: ``vocabulary.top_terms`` by mean weight, word pieces merged into
    #: the whole words the items' texts spell ("gi ##raf ##fe" → giraffe); other pieces as
    #: they are
    cloud_terms: list[Term] = field(default_factory=list)
    #: per-dimension activation counts (for FLOPs between sets; not in the JSON)
    counts: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, np.int64))

    def to_dict(self) -> dict:
        """The JSON document (written by hand: it adds ``rows_shown`` and leaves the
        activation counts out)."""
        return {
            "kind": self.kind,
            "n": self.n,
            "n_measured": self.n_measured,
            "exact_at_k": self.exact,
            "semantic_at_k": self.semantic,
            "by_denominator": self.by_denominator,
            "positive_terms": self.positive_terms,
            "flops": self.flops,
            "flops_with_self_pairs": self.flops_with_self_pairs,
            "mean_active_dims": self.mean_active_dims,
            "n_skipped": self.n_skipped,
            "skipped": self.skipped,
            "rows_shown": len(self.rows),
            "rows": [r.to_dict() for r in self.rows],
            "vocabulary": self.vocabulary.to_dict() if self.vocabulary else None,
            "cloud_terms": [{"term": t.token, "weight": t.weight} for t in self.cloud_terms],
        }


_SKIP_REASON = {
    "captions": "no vocabulary token, e.g. emoji only",
    "texts": "no vocabulary token, e.g. emoji only",
    "images": "no paired caption with a token of the vocabulary",
    "features": "no paired caption with a token of the vocabulary",
}


@dataclass
class SetAccumulator:
    """Streams items of one set: per-item metrics, activation counts, vocabulary statistics."""

    kind: str
    scorer: Scorer
    max_rows: int = DEFAULT_MAX_ROWS
    vocab_top: int = CLOUD_TERMS
    lazy_rate: float = LAZY_RATE
    n: int = 0
    rows: list[ItemDeviation] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    n_skipped: int = 0
    sums: dict[str, float] = field(default_factory=dict)
    #: positive-term counts of the measured items: n, sum, min, max, below k, Σ min(k, ·)
    positive: dict[str, int] = field(default_factory=dict)
    counts: np.ndarray = field(init=False, repr=False)
    nnz: int = 0
    vocab: VocabAccumulator = field(init=False, repr=False)
    #: the words the items' texts spell (:func:`text_words`): evidence for merging the cloud
    #: (a set of images shares its captions' set: their words are its evidence)
    words: set[str] = field(default_factory=set, repr=False)
    #: measured items whose words were read as evidence (at most MAX_EVIDENCE_ITEMS)
    evidence: int = 0

    def __post_init__(self) -> None:
        size = len(self.scorer.vocab)
        self.counts = np.zeros(size, dtype=np.int64)
        self.vocab = VocabAccumulator(size)
        self.sums = {k: 0.0 for k in ("exact_k", "semantic_k", "exact_a", "semantic_a")}
        self.positive = {"n": 0, "sum": 0, "min": 0, "max": 0, "below_k": 0, "capped": 0}

    def skip(self, item_id: str, text: str, reason: str) -> None:
        self.n_skipped += 1
        if len(self.skipped) < 1000:
            self.skipped.append({"id": item_id, "text": text, "reason": reason})

    def add(
        self,
        ids: list[str],
        texts: list[str],
        batch: object,
        captions: list[list[str]] | TokenRows,
    ) -> None:
        """Fold a batch: ``batch`` rows are the items' gated vectors, ``captions`` the
        caption tokens each is measured against, as strings or id rows (empty → not
        measured, listed as skipped). Every item's numbers come from one pass over the batch
        (:func:`.tokens.batch_numbers`); only the rows kept are scored one by one."""
        matrix = as_csr(batch, len(self.scorer.vocab)).copy()  # stored rows are read-only
        matrix.eliminate_zeros()
        if not (len(ids) == len(texts) == len(captions) == matrix.shape[0]):
            raise ValueError("ids, texts, captions and rows differ in number")
        tokens = (
            captions
            if isinstance(captions, TokenRows)
            else TokenRows.from_strings(captions, self.scorer)
        )
        if tokens is None:  # a token outside the vocabulary: scored item by item
            numbers = numbers_one_by_one(matrix, captions, self.scorer)
            lengths = np.fromiter((len(c) for c in captions), np.int64, len(captions))
        else:
            numbers, lengths = batch_numbers(matrix, tokens, self.scorer), tokens.lengths
        measured = np.flatnonzero(lengths > 0)
        for r in np.flatnonzero(lengths == 0):
            self.skip(ids[r], texts[r], _SKIP_REASON.get(self.kind, "no caption tokens"))
        for r in measured:
            kept_row = len(self.rows) < self.max_rows
            evidence = len(self.words) < MAX_CLOUD_WORDS and self.evidence < MAX_EVIDENCE_ITEMS
            if not kept_row and not evidence:
                break
            own = text_words(texts[r])
            if evidence:
                self.words.update(own)
                self.evidence += 1
            if kept_row:
                item = (ids[r], texts[r], own)
                self.rows.append(self._row(item, r, matrix, captions, tokens, numbers))
        self._fold(numbers, measured)
        self.counts += np.bincount(matrix.indices, minlength=len(self.scorer.vocab))
        self.nnz += int(matrix.nnz)
        self.n += matrix.shape[0]
        self.vocab.add(matrix)

    def _row(
        self,
        item: tuple[str, str, set[str]],
        r: int,
        matrix: object,
        captions: list[list[str]] | TokenRows,
        tokens: TokenRows | None,
        numbers: BatchNumbers,
    ) -> ItemDeviation:
        """The kept row of item ``r`` of a batch (``item``: its id, text and the words its
        text spells), from the batch's numbers."""
        item_id, text, evidence = item
        if tokens is None:
            caption = captions[r]
            lo, hi = matrix.indptr[r], matrix.indptr[r + 1]
            return self.scorer.score(
                item_id,
                text,
                matrix.indices[lo:hi],
                matrix.data[lo:hi],
                caption,
                evidence=evidence | (input_words(caption) & self.words),
            )
        caption = tokens.strings(r)
        return self.scorer.item(
            item_id,
            text,
            numbers.top_of(r),
            caption,
            counts=(int(numbers.positive[r]), int(numbers.matches[r]), int(numbers.no_vector[r])),
            semantic_sum=float(numbers.semantic_sum[r]),
            evidence=evidence | (input_words(caption) & self.words),
        )

    def _fold(self, numbers: BatchNumbers, measured: np.ndarray) -> None:
        """Add the measured items' numbers to the means and the positive-term counts."""
        if measured.size == 0:
            return
        k = self.scorer.k
        pos = numbers.positive[measured]
        matches = numbers.matches[measured].astype(np.float64)
        semantic = numbers.semantic_sum[measured]
        den = np.maximum(1, np.minimum(k, pos)).astype(np.float64)
        for key, values in (
            ("exact_k", matches / k),
            ("semantic_k", semantic / k),
            ("exact_a", matches / den),
            ("semantic_a", semantic / den),
        ):  # added one item at a time, in order: the means do not depend on the batches
            self.sums[key] = float(np.cumsum(np.r_[self.sums[key], values])[-1])
        stats = self.positive
        stats["min"] = int(pos.min()) if stats["n"] == 0 else min(stats["min"], int(pos.min()))
        stats["max"] = max(stats["max"], int(pos.max()))
        stats["n"] += int(pos.size)
        stats["sum"] += int(pos.sum())
        stats["below_k"] += int(np.count_nonzero(pos < k))
        stats["capped"] += int(np.minimum(k, pos).sum())

    def result(self) -> SetDeviation:
        n, k = self.n, self.scorer.k
        stats = self.positive
        measured = stats["n"]

        def mean(key: str) -> float | None:
            return self.sums[key] / measured if measured else None

        by_den = {
            "k": {"exact_at_k": mean("exact_k"), "semantic_at_k": mean("semantic_k")},
            "active": {"exact_at_k": mean("exact_a"), "semantic_at_k": mean("semantic_a")},
        }
        pos = {
            "mean": stats["sum"] / measured if measured else 0.0,
            "min": stats["min"],
            "max": stats["max"],
            "below_k": stats["below_k"],
            "cap_exact_at_k": stats["capped"] / (measured * k) if measured else 0.0,
        }
        chosen = by_den[self.scorer.denominator]
        vocabulary = (
            self.vocab.result(self.scorer.vocab, top=self.vocab_top, lazy_rate=self.lazy_rate)
            if n
            else None
        )
        cloud = [] if vocabulary is None else vocabulary.top_terms
        cloud_terms = merge_word_pieces(
            [Term(t.token, t.mean_weight, t.index) for t in cloud],
            self.scorer.vocab,
            self.words,
            lone_pieces=False,
        )
        return SetDeviation(
            kind=self.kind,
            n=n,
            n_measured=measured,
            exact=chosen["exact_at_k"],
            semantic=chosen["semantic_at_k"],
            by_denominator=by_den,
            positive_terms=pos,
            flops=flops_within(self.counts, n),
            flops_with_self_pairs=flops_with_self_pairs(self.counts, n),
            mean_active_dims=self.nnz / n if n else 0.0,
            rows=list(self.rows),
            skipped=list(self.skipped),
            n_skipped=self.n_skipped,
            vocabulary=vocabulary,
            cloud_terms=cloud_terms,
            counts=self.counts.copy(),
        )
