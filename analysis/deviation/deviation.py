"""Semantic deviation (Exact@k, Semantic@k) and co-activation (FLOPs), after D2S (SPEC.md §2).

Every number is read off the retrieval representation ``E(x) = V(x) ⊙ G(x)`` (SPEC §1; the
gate keeps the ``gate_k`` highest dimensions and the input's own tokens), held as CSR rows:

- ``Exact@k`` = (terms among ``top_k(E)`` that are tokens of the caption) / denominator;
- ``Semantic@k`` = Σ over ``top_k(E)`` of the best cosine to any caption token, in a
  *static* (context-free) token space ``f_enc``, / denominator. ``f_enc`` is the encoder's
  own input word-embedding table by default, or a GloVe-format text file;
- the denominator is ``k`` (the paper's, the default) or ``min(k, positive terms)``. A
  caption with fewer than ``k`` positive terms cannot reach Exact@k = 1 under ``k``: its
  *cap* is ``min(k, positive)/k``; both are reported per caption;
- ``FLOPs`` within one set = the mean, over pairs of *different* items, of the number of
  dimensions both activate (self-pairs left out: an item always co-activates with itself);
  between a caption set ``C`` and an image set ``I`` it is D2S's
  ``(1/(|C||I|)) Σ_c Σ_i s_c⁰ · s_i⁰`` over every pair, with ``s⁰ = (s != 0)``, computed as
  ``Σ_j n_C(j) n_I(j) / (|C||I|)`` from per-dimension activation counts, as D2S's
  ``train.py`` does.

Token choices (the paper leaves them open): top-k terms and caption tokens are vocabulary
token strings; special tokens (``[CLS]``, ``[SEP]``, ``[PAD]``, ``[MASK]``, ``[UNK]``,
``[unusedN]``) are excluded from both sides and from the positive-term count; a caption
token counts once however often it appears; word pieces (``##raf``) are tokens like any
other. A top term without a static vector (GloVe has no ``##`` pieces) adds 0 to
Semantic@k and is counted (``no_vector``); caption tokens without one cannot be matched
semantically. A caption with no token of the vocabulary (emoji only, say) is left out of
Exact@k and Semantic@k with a note and counted (its vector, an item of the set, still
counts in FLOPs and the vocabulary statistics); the run goes on. Special tokens do count
as active dimensions in FLOPs, which follow D2S (every dimension ``!= 0``).

Everything streams: per-item metrics, activation counts and :mod:`vocab_stats` are folded
in one batch at a time, so memory is O(|V|) plus the rows asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from lexlens.analysis.collections.store import StoredIndex, open_index, vocab_hash
from lexlens.analysis.core.gating import gate
from lexlens.analysis.core.inputs import TextTable, read_texts
from lexlens.analysis.core.outputs import json_bytes, records_csv_bytes
from lexlens.analysis.core.vocabulary import is_special_token, special_mask
from lexlens.analysis.core.words import Term, input_words, merge_word_pieces
from lexlens.analysis.deviation.static_embeddings import StaticEmbeddings, static_embeddings_for
from lexlens.analysis.deviation.vocab_stats import (
    CLOUD_TERMS,
    LAZY_RATE,
    VocabAccumulator,
    VocabStats,
    as_csr,
)
from lexlens.models.base import Capability, Encoder, InputError, LexicalEncoding, Needs

#: What this analysis needs of an encoder.
DEVIATION_NEEDS = Needs("semantic deviation", all_of=frozenset({Capability.TEXT_LEXICAL}))
#: A stored collection of dense features (``modality`` "features", a D2S head): its head,
#: which also tokenises the paired captions (``tokenize_texts``).
FEATURES_DEVIATION_NEEDS = Needs(
    "semantic deviation of dense features", all_of=frozenset({Capability.FEATURE_LEXICAL})
)


def deviation_needs_for(modality: str) -> Needs:
    """The needs of deviation on a stored collection of this ``modality``."""
    return FEATURES_DEVIATION_NEEDS if modality == "features" else DEVIATION_NEEDS


#: The gate used before any metric. 768 is VDR's text default (SPEC §1): an encoder whose
#: ``V`` is positive everywhere (VDR's elu1p) would otherwise have every dimension active
#: (FLOPs ≈ |V|²/|V|); for ReLU-sparse encoders (SPLADE, D2S) with fewer than 768 positive
#: terms the gate changes nothing. ``-1`` = ungated.
DEFAULT_GATE_K = 768
DEFAULT_K = 20
DENOMINATORS = ("k", "active")
#: Per-item rows kept in a result (aggregates always cover every item).
DEFAULT_MAX_ROWS = 10_000
#: At most this many distinct caption words are kept as evidence for merging the cloud.
MAX_CLOUD_WORDS = 200_000
BATCH_SIZE = 64

Progress = Callable[[float, str], None]


# ----------------------------------------------------------------------------- one item


def caption_terms(units: Iterable[str]) -> list[str]:
    """A caption's own tokens that count: no special tokens, each once, in order."""
    return list(dict.fromkeys(u for u in units if not is_special_token(u)))


@dataclass(frozen=True)
class ItemDeviation:
    """Exact@k and Semantic@k of one item (a caption, or an image against its captions)."""

    id: str
    text: str  # the caption, or the image's name
    positive_terms: int  # non-special terms with E > 0
    cap: float  # min(k, positive_terms) / k: the most Exact@k can be under denominator k
    matches: int  # top-k terms that are caption tokens
    semantic_sum: float  # Σ over top-k of the best cosine to a caption token
    denominator: int
    exact: float
    semantic: float
    top_terms: list[str]
    caption_tokens: list[str]
    no_vector: int  # top-k terms without a static vector (add 0 to Semantic@k)
    #: the top-k terms for reading: pieces of a word the caption spells joined into it
    top_words: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "text": self.text,
            "positive_terms": self.positive_terms,
            "cap": self.cap,
            "matches": self.matches,
            "denominator": self.denominator,
            "exact_at_k": self.exact,
            "semantic_at_k": self.semantic,
            "top_terms": self.top_terms,
            "caption_tokens": self.caption_tokens,
            "no_vector": self.no_vector,
            "top_words": self.top_words,
        }


def denominator_of(k: int, positive: int, denominator: str) -> int:
    """``k`` (the paper) or ``min(k, positive)`` (at least 1: no term → 0 either way)."""
    return k if denominator == "k" else max(1, min(k, positive))


@dataclass(frozen=True)
class _Scorer:
    """What scoring an item needs, prepared once per run."""

    vocab: list[str]
    special: np.ndarray  # [|V|] bool
    static: StaticEmbeddings
    static_rows: np.ndarray  # [|V|] row in static.vectors or -1
    k: int
    denominator: str

    @classmethod
    def build(cls, vocab: list[str], static: StaticEmbeddings, k: int, denominator: str) -> _Scorer:
        return cls(vocab, special_mask(vocab), static, static.rows_for(vocab), k, denominator)

    def score(
        self,
        item_id: str,
        text: str,
        indices: np.ndarray,
        values: np.ndarray,
        caption: list[str],
        *,
        words: bool = True,
    ) -> ItemDeviation:
        """One item's metrics; ``words=False`` skips ``top_words`` (display only), for items
        that are counted but not kept as rows."""
        keep = (values > 0) & ~self.special[indices]
        idx, val = indices[keep], values[keep]
        order = np.lexsort((idx, -val))[: self.k]  # weight desc, then vocabulary order
        top = idx[order]
        terms = [self.vocab[i] for i in top]
        own = set(caption)
        matches = sum(t in own for t in terms)
        rows = self.static_rows[top]
        with_vec = rows[rows >= 0]
        cap_rows = [self.static.index[c] for c in caption if c in self.static.index]
        if with_vec.size and cap_rows:
            sims = self.static.vectors[with_vec] @ self.static.vectors[cap_rows].T
            semantic_sum = float(np.clip(sims.max(axis=1), -1.0, 1.0).astype(np.float64).sum())
        else:
            semantic_sum = 0.0
        positive = int(idx.size)
        den = denominator_of(self.k, positive, self.denominator)
        return ItemDeviation(
            id=item_id,
            text=text,
            positive_terms=positive,
            cap=min(self.k, positive) / self.k,
            matches=matches,
            semantic_sum=semantic_sum,
            denominator=den,
            exact=matches / den,
            semantic=semantic_sum / den,
            top_terms=terms,
            caption_tokens=list(caption),
            no_vector=int(rows.size - with_vec.size),
            top_words=[
                t.token
                for t in merge_word_pieces(
                    [
                        Term(self.vocab[i], float(w), int(i))
                        for i, w in zip(top, val[order], strict=True)
                    ],
                    self.vocab,
                    input_words(caption),
                )
            ]
            if words
            else [],
        )


def item_deviation(
    weights: np.ndarray,
    vocab: list[str],
    caption: list[str],
    static: StaticEmbeddings,
    k: int = DEFAULT_K,
    *,
    denominator: str = "k",
    text: str = "",
    item_id: str = "0",
) -> ItemDeviation:
    """Exact@k and Semantic@k of one (gated) vector against a caption's tokens."""
    check_options(k=k, denominator=denominator)
    weights = np.asarray(weights)
    idx = np.flatnonzero(weights)
    scorer = _Scorer.build(vocab, static, k, denominator)
    return scorer.score(item_id, text, idx, weights[idx].astype(np.float32), caption)


# ----------------------------------------------------------------------------- FLOPs


def activation_counts(batch: object, vocab_size: int | None = None) -> np.ndarray:
    """Per dimension, how many rows of ``batch`` activate it (``!= 0``)."""
    matrix = batch.tocsr() if sp.issparse(batch) else sp.csr_matrix(np.atleast_2d(batch))
    matrix = matrix.copy()
    matrix.eliminate_zeros()
    size = vocab_size or matrix.shape[1]
    return np.bincount(matrix.indices, minlength=size).astype(np.int64)


def flops_within(counts: np.ndarray, n: int) -> float | None:
    """Mean shared active dimensions over pairs of *different* items of one set.

    ``Σ_{a≠b} s_a⁰·s_b⁰ = Σ_j n(j)² − Σ_j n(j)``, over ``n(n−1)`` ordered pairs;
    ``None`` for fewer than two items.
    """
    if n < 2:
        return None
    c = counts.astype(np.float64)
    return float((np.dot(c, c) - c.sum()) / (n * (n - 1)))


def flops_with_self_pairs(counts: np.ndarray, n: int) -> float | None:
    """The same over all ``n²`` pairs, self-pairs included (``Σ_j p(j)²``), for comparison."""
    if n < 1:
        return None
    c = counts.astype(np.float64)
    return float(np.dot(c, c) / (n * n))


def flops_between(counts_a: np.ndarray, n_a: int, counts_b: np.ndarray, n_b: int) -> float | None:
    """D2S's FLOPs: ``(1/(|C||I|)) Σ_c Σ_i s_c⁰·s_i⁰ = Σ_j n_C(j) n_I(j) / (|C||I|)``."""
    if n_a < 1 or n_b < 1:
        return None
    return float(np.dot(counts_a.astype(np.float64), counts_b.astype(np.float64)) / (n_a * n_b))


def flops(a: np.ndarray, b: np.ndarray | None = None) -> float | None:
    """FLOPs of dense row sets: within ``a`` (no self-pairs), or between ``a`` and ``b``."""
    ca, na = activation_counts(a), np.atleast_2d(a).shape[0]
    if b is None:
        return flops_within(ca, na)
    return flops_between(ca, na, activation_counts(b, ca.shape[0]), np.atleast_2d(b).shape[0])


# ----------------------------------------------------------------------------- one set


@dataclass(frozen=True)
class SetDeviation:
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
    flops: float | None
    flops_with_self_pairs: float | None
    mean_active_dims: float
    rows: list[ItemDeviation]
    skipped: list[dict]
    n_skipped: int
    vocabulary: VocabStats | None
    #: the dataset cloud: ``vocabulary.top_terms`` by mean weight, word pieces merged into
    #: the whole words the items' own tokens spell ("gi ##raf ##fe" → giraffe)
    cloud_terms: list[Term] = field(default_factory=list)
    #: per-dimension activation counts (for FLOPs between sets; not in the JSON)
    counts: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, np.int64))

    def to_dict(self) -> dict:
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
    scorer: _Scorer
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
    #: whole words spelled by the items' caption tokens: evidence for merging the cloud
    words: set[str] = field(default_factory=set, repr=False)

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
        self, ids: list[str], texts: list[str], batch: object, captions: list[list[str]]
    ) -> None:
        """Fold a batch: ``batch`` rows are the items' gated vectors, ``captions`` the
        caption tokens each is measured against (empty → not measured, listed as skipped)."""
        matrix = as_csr(batch, len(self.scorer.vocab)).copy()  # stored rows are read-only
        matrix.eliminate_zeros()
        if not (len(ids) == len(texts) == len(captions) == matrix.shape[0]):
            raise ValueError("ids, texts, captions and rows differ in number")
        for r, (item_id, text, caption) in enumerate(zip(ids, texts, captions, strict=True)):
            if not caption:
                self.skip(item_id, text, _SKIP_REASON.get(self.kind, "no caption tokens"))
                continue
            if len(self.words) < MAX_CLOUD_WORDS:
                self.words.update(input_words(caption))
            lo, hi = matrix.indptr[r], matrix.indptr[r + 1]
            kept_row = len(self.rows) < self.max_rows
            item = self.scorer.score(
                item_id,
                text,
                matrix.indices[lo:hi],
                matrix.data[lo:hi],
                caption,
                words=kept_row,
            )
            k = self.scorer.k
            self.sums["exact_k"] += item.matches / k
            self.sums["semantic_k"] += item.semantic_sum / k
            den = denominator_of(k, item.positive_terms, "active")
            self.sums["exact_a"] += item.matches / den
            self.sums["semantic_a"] += item.semantic_sum / den
            pos, stats = item.positive_terms, self.positive
            stats["min"] = pos if stats["n"] == 0 else min(stats["min"], pos)
            stats["max"] = max(stats["max"], pos)
            stats["n"] += 1
            stats["sum"] += pos
            stats["below_k"] += pos < k
            stats["capped"] += min(k, pos)
            if kept_row:
                self.rows.append(item)
        self.counts += np.bincount(matrix.indices, minlength=len(self.scorer.vocab))
        self.nnz += int(matrix.nnz)
        self.n += matrix.shape[0]
        self.vocab.add(matrix)

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
            [Term(t.token, t.mean_weight, t.index) for t in cloud], self.scorer.vocab, self.words
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


# ----------------------------------------------------------------------------- result


@dataclass(frozen=True)
class DeviationResult:
    """Semantic deviation of a caption set, or of a stored collection's texts, or of its
    images against their paired captions (``captions`` = those captions, encoded by the
    text encoder; ``flops_captions_images`` = D2S's FLOPs between the two sets)."""

    @property
    def sets(self) -> list[SetDeviation]:
        return [s for s in (self.captions, self.images) if s is not None]

    encoder: str
    input: dict
    k: int
    gate_k: int
    denominator: str
    f_enc: str
    captions: SetDeviation | None
    images: SetDeviation | None = None
    flops_captions_images: float | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "encoder": self.encoder,
            "input": self.input,
            "k": self.k,
            "gate_k": self.gate_k,
            "denominator": self.denominator,
            "f_enc": self.f_enc,
            "captions": self.captions.to_dict() if self.captions else None,
            "images": self.images.to_dict() if self.images else None,
            "flops_captions_images": self.flops_captions_images,
            "notes": self.notes,
        }


def set_notes(s: SetDeviation, k: int) -> list[str]:
    """Plain-language notes on one set (positive terms below k, skipped items)."""
    what = s.kind
    notes = []
    below = s.positive_terms["below_k"]
    if below:
        notes.append(
            f"{below} of {s.n_measured} {what} have fewer than {k} positive terms: under the "
            "paper's "
            f"denominator k, their Exact@{k} cannot exceed {s.positive_terms['cap_exact_at_k']:.3f} "
            f"on this set (use denominator 'active' = min(k, positive terms) to compare "
            "without that cap)"
        )
    if s.n_skipped:
        one = what[:-1] if s.n_skipped == 1 else what
        notes.append(
            f"{s.n_skipped} {one} skipped ({s.skipped[0]['reason']}), e.g. "
            f"{s.skipped[0]['text'][:40]!r}; the others were measured"
        )
    return notes


# ----------------------------------------------------------------------------- use case


def check_options(
    *,
    k: int = DEFAULT_K,
    gate_k: int = DEFAULT_GATE_K,
    denominator: str = "k",
    batch_size: int = BATCH_SIZE,
    max_rows: int = DEFAULT_MAX_ROWS,
) -> None:
    """Refuse bad options before anything is loaded or encoded."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, not {k!r}")
    if isinstance(gate_k, bool) or not isinstance(gate_k, int) or gate_k < -1:
        raise InputError(f"the gate k must be -1 (ungated), 0 (own tokens only) or more: {gate_k}")
    if denominator not in DENOMINATORS:
        raise InputError(f"denominator must be one of {', '.join(DENOMINATORS)}: {denominator!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"the batch size must be a positive integer, not {batch_size!r}")
    if not isinstance(max_rows, int) or max_rows < 0:
        raise InputError(f"the number of rows shown must be 0 or more, not {max_rows!r}")


CaptionSource = str | Path | bytes | bytearray | list[str] | TextTable


def read_captions(
    source: CaptionSource, name: str | None = None, *, suffix: str | None = None
) -> TextTable:
    """Captions from a file (.txt one per line, .csv/.jsonl with a ``text`` column), its
    bytes (an upload: pass its ``name``), or a list of texts (empty ones skipped)."""
    if isinstance(source, TextTable):
        return source
    if isinstance(source, list):
        texts = [str(t).strip() for t in source]
        kept = [t for t in texts if t]
        if not kept:
            raise InputError("no captions given (every text is empty)")
        return TextTable([str(i) for i in range(len(kept))], kept, [], len(texts) - len(kept))
    return read_texts(source, name, suffix=suffix, what="caption")


def input_name(source: CaptionSource, name: str | None) -> str:
    """The name a result records for its input: the file's base name (same from CLI and app)."""
    if name:
        return Path(name).name
    if isinstance(source, (str, Path)):
        return Path(source).name
    return "captions" if isinstance(source, (list, TextTable)) else "uploaded file"


@dataclass(frozen=True)
class EncodedCaptions:
    """A caption set's gated vectors (CSR, O(non-zeros)) and caption tokens."""

    ids: list[str]
    texts: list[str]
    vectors: sp.csr_matrix  # [n, |V|] E = V ⊙ G
    tokens: list[list[str]]
    gate_k: int
    truncated: int = 0

    def batches(self, size: int = 256) -> Iterator[tuple[list[str], list[str], sp.csr_matrix]]:
        for lo in range(0, len(self.ids), size):
            hi = lo + size
            yield self.ids[lo:hi], self.texts[lo:hi], self.vectors[lo:hi]


def gated_rows(encodings: list[LexicalEncoding], vocab: list[str], gate_k: int) -> sp.csr_matrix:
    """``E = V ⊙ G`` of each encoding as CSR rows."""
    return sp.csr_matrix(np.stack([gate(e, vocab, gate_k) for e in encodings]))


def encode_captions(
    encoder: Encoder,
    table: TextTable,
    *,
    gate_k: int = DEFAULT_GATE_K,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
) -> EncodedCaptions:
    """Encode captions in batches (query tower), keeping only gated CSR rows and tokens."""
    DEVIATION_NEEDS.check(encoder)
    parts, tokens, truncated = [], [], 0
    total = len(table.texts)
    for lo in range(0, total, batch_size):
        chunk = table.texts[lo : lo + batch_size]
        encodings = encoder.encode_texts(chunk, side="query", keep_units=False)
        parts.append(gated_rows(encodings, encoder.vocab, gate_k))
        tokens += [caption_terms(e.units) for e in encodings]
        truncated += sum(e.truncated for e in encodings)
        if progress:
            done = min(total, lo + batch_size)
            progress(done / total, f"Encoded {done} of {total} captions")
    vectors = sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, len(encoder.vocab)))
    return EncodedCaptions(list(table.ids), list(table.texts), vectors, tokens, gate_k, truncated)


def deviation_of_encoded(
    encoded: EncodedCaptions,
    *,
    encoder_name: str,
    vocab: list[str],
    static: StaticEmbeddings,
    k: int = DEFAULT_K,
    denominator: str = "k",
    input_info: dict | None = None,
    max_rows: int = DEFAULT_MAX_ROWS,
    notes: list[str] | None = None,
) -> DeviationResult:
    """The :class:`DeviationResult` of an already encoded caption set (cheap: no model)."""
    check_options(k=k, gate_k=encoded.gate_k, denominator=denominator, max_rows=max_rows)
    scorer = _Scorer.build(vocab, static, k, denominator)
    acc = SetAccumulator("captions", scorer, max_rows=max_rows)
    start = 0
    for ids, texts, batch in encoded.batches():
        acc.add(ids, texts, batch, encoded.tokens[start : start + len(ids)])
        start += len(ids)
    captions = acc.result()
    out_notes = list(notes or [])
    if encoded.truncated:
        out_notes.append(f"{encoded.truncated} caption(s) cut to the encoder's token limit")
    out_notes += set_notes(captions, k)
    if captions.n_measured == 0:
        raise InputError("no caption has a token of the encoder's vocabulary: nothing to measure")
    return DeviationResult(
        encoder=encoder_name,
        input=dict(input_info or {}),
        k=k,
        gate_k=encoded.gate_k,
        denominator=denominator,
        f_enc=static.description,
        captions=captions,
        notes=out_notes,
    )


def deviation(
    encoder: Encoder,
    captions: CaptionSource,
    *,
    name: str | None = None,
    suffix: str | None = None,
    k: int = DEFAULT_K,
    gate_k: int = DEFAULT_GATE_K,
    denominator: str = "k",
    glove: str | Path | bytes | None = None,
    glove_name: str | None = None,
    batch_size: int = BATCH_SIZE,
    max_rows: int = DEFAULT_MAX_ROWS,
    progress: Progress | None = None,
) -> DeviationResult:
    """Exact@k, Semantic@k, FLOPs and vocabulary statistics of an encoder over captions.

    ``captions``: a path, a file's bytes (give the upload's ``name``), or a list of texts.
    Options and the file are checked before anything is encoded.
    """
    check_options(
        k=k, gate_k=gate_k, denominator=denominator, batch_size=batch_size, max_rows=max_rows
    )
    table = read_captions(captions, name, suffix=suffix)
    DEVIATION_NEEDS.check(encoder)
    static = static_embeddings_for(encoder, glove, glove_name=glove_name)
    encoded = encode_captions(
        encoder, table, gate_k=gate_k, batch_size=batch_size, progress=progress
    )
    notes = [f"{table.skipped} empty row(s) left out"] if table.skipped else []
    return deviation_of_encoded(
        encoded,
        encoder_name=encoder.name,
        vocab=encoder.vocab,
        static=static,
        k=k,
        denominator=denominator,
        input_info={"captions": input_name(captions, name), "rows": len(table)},
        max_rows=max_rows,
        notes=notes,
    )


def index_tokens(
    encoder: Encoder, texts: list[str], batch_size: int = BATCH_SIZE
) -> list[list[str]]:
    """Caption tokens of texts as ``encoder`` tokenises them (empty text → no token)."""
    out: list[list[str]] = [[] for _ in texts]
    todo = [i for i, t in enumerate(texts) if t and t.strip()]
    for lo in range(0, len(todo), batch_size):
        chunk = todo[lo : lo + batch_size]
        encodings = encoder.encode_texts([texts[i] for i in chunk], keep_units=False)
        for i, e in zip(chunk, encodings, strict=True):
            out[i] = caption_terms(e.units)
    return out


def deviation_of_index(
    index: str | Path | Any,
    encoder: Encoder,
    *,
    k: int = DEFAULT_K,
    gate_k: int | None = None,
    denominator: str = "k",
    glove: str | Path | bytes | None = None,
    glove_name: str | None = None,
    batch_size: int = 1024,
    max_rows: int = DEFAULT_MAX_ROWS,
    progress: Progress | None = None,
) -> DeviationResult:
    """The same analyses on a stored collection, streamed from its memory-mapped CSR vectors.

    - A text collection: Exact@k / Semantic@k of each stored text vector against its own
      tokens, FLOPs between different texts, vocabulary statistics.
    - An image collection: each image's stored vector against the tokens of its paired
      captions (all of them: a term counts if it is a token of any; an item's ``text`` stands
      in when it has no ``caption``); the captions themselves, encoded by ``encoder`` with
      the index's gate k, as a caption set; D2S's FLOPs between the caption set and the
      image set; vocabulary statistics of both.
    - A collection of dense features (``modality`` "features", indexed through a D2S head):
      each stored vector against the tokens of its paired captions, which the head's
      tokenizer splits (``tokenize_texts``: the head has no text tower, so there is no
      caption set and no caption × image FLOPs); FLOPs between different vectors.

    ``encoder`` is the text encoder (its tokens, its static embeddings unless ``glove``); its
    vocabulary must be the index's. ``gate_k``, when given, must equal the index's (stored
    vectors cannot be re-gated). Memory: O(|V|) plus one batch, whatever the collection size.
    """
    check_options(k=k, denominator=denominator, batch_size=batch_size, max_rows=max_rows)
    ix = index if isinstance(index, StoredIndex) else open_index(index)
    stored_gate = int(ix.manifest["gate_k"])
    if gate_k is not None and gate_k != stored_gate:
        raise InputError(
            f"the collection {ix.path.name} stores vectors gated at k = {stored_gate}: "
            f"they cannot be re-gated at {gate_k} (leave the gate k out, or re-index)"
        )
    features = ix.modality == "features"
    deviation_needs_for(ix.modality).check(encoder)
    if vocab_hash(encoder.vocab) != ix.manifest["vocab"]["hash"]:
        raise InputError(
            f"{encoder.name!r} does not share the vocabulary of the collection "
            f"{ix.path.name} (built with {ix.encoder_name!r}): pick a text encoder in its space"
        )
    static = static_embeddings_for(encoder, glove, glove_name=glove_name)
    scorer = _Scorer.build(encoder.vocab, static, k, denominator)
    images = ix.modality == "image"
    kind = "images" if images else "features" if features else "texts"
    items = SetAccumulator(kind, scorer, max_rows=max_rows)
    captions = SetAccumulator("captions", scorer, max_rows=max_rows) if images else None
    total = len(ix)
    columns = ["id", "text", "image", "captions"]
    for batch in ix.iter_batches(batch_size=batch_size, columns=columns):
        items.add(batch.ids, *_measured_against(batch, encoder, features, captions, stored_gate))
        if progress:
            progress(batch.stop / total, f"Measured {batch.stop} of {total} items")
    item_set = items.result()
    cap_set = captions.result() if captions is not None and captions.n else None
    between = (
        flops_between(cap_set.counts, cap_set.n, item_set.counts, item_set.n) if cap_set else None
    )
    notes = set_notes(item_set, k) + (set_notes(cap_set, k) if cap_set else [])
    if features and item_set.n_measured == 0:
        notes.append(
            "no vector of this collection has a caption: Exact@k and Semantic@k need "
            "captions (index the features with --captions)"
        )
    if images and cap_set is None:
        notes.append(
            "no image of this collection has a caption: Exact@k, Semantic@k and the "
            "caption × image FLOPs need captions (a caption column in the source)"
        )
    info = {
        "index": ix.path.name,
        "index_encoder": ix.encoder_name,
        "modality": ix.modality,
        "items": total,
    }
    return DeviationResult(
        encoder=encoder.name,
        input=info,
        k=k,
        gate_k=stored_gate,
        denominator=denominator,
        f_enc=static.description,
        captions=cap_set if images else item_set,
        images=item_set if images else None,
        flops_captions_images=between,
        notes=notes,
    )


def _measured_against(
    batch: Any, encoder: Encoder, features: bool, captions: SetAccumulator | None, gate_k: int
) -> tuple[list[str], Any, list[list[str]]]:
    """(names, vectors, caption tokens) of a batch of stored items: a text against its own
    tokens; an image or a feature vector against the tokens of its paired captions (an image
    collection's captions are also a set of their own, encoded at the index's gate, folded
    into ``captions``; a D2S head tokenises them: it has no text tower)."""
    if captions is None and not features:
        texts = [m.get("text") or "" for m in batch.meta]
        return texts, batch.vectors, index_tokens(encoder, texts)
    paired = [_paired_captions(m) for m in batch.meta]
    flat = [c for p in paired for c in p]
    if features:
        tokens = [caption_terms(e.units) for e in encoder.tokenize_texts(flat)] if flat else []
        names = [p[0] if p else m["id"] for p, m in zip(paired, batch.meta, strict=True)]
    else:
        ids = [
            f"{m['id']}#{j}" for p, m in zip(paired, batch.meta, strict=True) for j in range(len(p))
        ]
        encoded = encode_captions(encoder, TextTable(ids, flat), gate_k=gate_k)
        if flat:
            captions.add(encoded.ids, encoded.texts, encoded.vectors, encoded.tokens)
        tokens = encoded.tokens
        names = [m.get("image") or m["id"] for m in batch.meta]
    return names, batch.vectors, _per_item(paired, tokens)


def _per_item(paired: list[list[str]], tokens: list[list[str]]) -> list[list[str]]:
    """Each item's caption tokens: the union over its paired captions' tokens (in order)."""
    out, at = [], 0
    for captions in paired:
        out.append(caption_terms(t for toks in tokens[at : at + len(captions)] for t in toks))
        at += len(captions)
    return out


def _paired_captions(meta: dict) -> list[str]:
    """An item's non-empty captions (its ``text`` when it has none)."""
    paired = [c.strip() for c in (meta.get("captions") or []) if c and c.strip()]
    if not paired and (meta.get("text") or "").strip():
        paired = [meta["text"].strip()]
    return paired


def result_files(result: DeviationResult) -> dict[str, bytes]:
    """The files a run exports (CLI ``--out`` and the page's downloads): the JSON document,
    per-item rows and each set's top vocabulary terms, as formula-safe CSV."""
    files = {"deviation.json": json_bytes(result)}
    for part in result.sets:
        files[f"{part.kind}.csv"] = records_csv_bytes([r.to_dict() for r in part.rows])
        if part.vocabulary is not None:
            name = "vocabulary.csv" if part is result.sets[0] else f"vocabulary_{part.kind}.csv"
            files[name] = records_csv_bytes([t.to_dict() for t in part.vocabulary.top_terms])
    return files
