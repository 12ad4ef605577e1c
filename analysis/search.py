"""Search a collection, exclusion queries "A but not B" (SPEC.md §3, seed 003), evaluation.

A *collection* is a stored index (:class:`lexlens.analysis.store.StoredIndex`) or a
small in-memory :class:`MemoryCollection` of gated vectors. Plain search ranks items by the
inner product ``E_q · E_d``; each hit lists the terms that make its score, and all of a hit's
contributions sum exactly to the score it shows (both are the same float64 sum).

Exclusion methods
-----------------
``sr`` — the sparse-representation method of seed 003 ("dimension extraction", then
"exclusion and final retrieval"), with every choice the paper leaves open made explicit:

1. Retrieve the top-``K`` items for the single-label query A (plain inner-product search
   with the query vector of A). From them take ``D1``: the smallest set of dimensions
   holding ``coverage`` of those items' summed *magnitude*. Likewise ``D2`` for B.
2. ``D = D1 \\ D2``. Rank every item by its *magnitude* on D:

   - ``magnitude="sum"`` (default): a dimension's magnitude is its weight. ``D1`` covers
     ``coverage`` of ``Σ_items Σ_t w̄_it``; an item scores ``s = Σ_{t∈D} w̄_t`` and term t
     contributes ``w̄_t``.
   - ``magnitude="l2"``: a dimension's magnitude is its squared weight (its share of the
     vector's squared L2 norm). ``D1`` covers ``coverage`` of ``Σ_items Σ_t w̄_it²``; an
     item scores ``s = ‖w̄_D‖₂ = sqrt(Σ_{t∈D} w̄_t²)`` and term t contributes
     ``w̄_t² / s`` (these sum to s).

   ``w̄ = w / ‖w‖₂`` when ``normalize`` (default: each item's gated vector is L2-normalised
   first, in both steps, so an item whose mass lies on B's dimensions ranks lower — without
   it, the set difference alone never penalises B), else ``w̄ = w``.

Seed 003 states none of: the meaning of "magnitude", K, the threshold ``th`` (our
``coverage``), whether items are normalised, or the wording of the single-label query. The
defaults here (``sum``, normalised, K = 10, coverage = 0.5, the label itself as the query)
are ours; every result records the settings it used.

``avg`` — the seed's "average embedding" baseline: ``E_q(A) − E_q(B)`` (one prompt each, so
the averages are single embeddings; the seed does not say what it averaged), ranked by
inner product; negative contributions come from B's terms.

``text`` — the seed's single-line query (SLQ): one text, by default "images of A without B"
(the seed's wording) for image collections and "A without B" for text collections.

Evaluation: relevant items for (A, B) carry label A and not label B (seed 003). MRR@1,
MRR@10, NDCG@10 and AP@10 are computed by ir-measures (``RR@1``, ``RR@10``, ``nDCG@10``,
``AP@10``: trec_eval's definitions; AP@10 divides by *all* relevant items, not min(R, 10)).
Each ranking is handed over with strictly decreasing scores, so every backend sees the same
order (ir-measures' backends break ties differently).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.contrib import (
    bow_query,
    check_topk,
    gate,
    partner_for,
)
from lexlens.analysis.store import (
    FP16_ABS,
    FP16_REL,
    POSTINGS_MIN_NNZ,
    POSTINGS_TOP,
    StoredIndex,
    open_index,
    vocab_hash,
)
from lexlens.analysis.terms import is_special_token
from lexlens.models.base import Capability, Encoder, InputError, ModalityError, Needs

#: What searching needs of the query encoder (texts or images into the vocabulary).
SEARCH_NEEDS = Needs(
    "search", any_of=frozenset({Capability.TEXT_LEXICAL, Capability.IMAGE_LEXICAL})
)
METHODS = ("sr", "avg", "text")
METRICS = ("MRR@1", "MRR@10", "NDCG@10", "AP@10")
DEFAULT_K_ITEMS = 10
DEFAULT_COVERAGE = 0.5
SLQ_IMAGE = "images of {a} without {b}"
#: A text query: a lexical text encoder; in the bag-of-words mode a head over dense
#: features (D2S) serves too: it has no text tower but tokenises into its vocabulary.
TEXT_QUERY_NEEDS = Needs("a text query", all_of=frozenset({Capability.TEXT_LEXICAL}))
BOW_QUERY_NEEDS = Needs(
    "a bag-of-words text query",
    any_of=frozenset({Capability.TEXT_LEXICAL, Capability.FEATURE_LEXICAL}),
)
IMAGE_QUERY_NEEDS = Needs("an image query", all_of=frozenset({Capability.IMAGE_LEXICAL}))
SLQ_TEXT = "{a} without {b}"


# ---------------------------------------------------------------------------- collections
class MemoryCollection:
    """A small collection held in memory (the ``--collection FILE`` path): texts encoded
    as documents, gated, kept as a scipy CSR matrix."""

    modality = "text"

    def __init__(
        self,
        ids: list[str],
        texts: list[str],
        vectors: Any,
        vocab: list[str],
        labels: list[frozenset[str]] | None = None,
        name: str = "collection",
        encoder_name: str = "",
    ) -> None:
        import scipy.sparse as sp

        if len(ids) == 0:
            raise InputError("the collection is empty")
        matrix = sp.csr_matrix(vectors, dtype=np.float32)
        if matrix.shape[0] != len(ids):
            raise ValueError("one vector per item")
        matrix.sort_indices()
        self.ids, self.texts, self.matrix = list(ids), list(texts), matrix
        self.vocab = list(vocab)
        self.labels = [frozenset(x) for x in labels] if labels else []
        self.name = name
        self.encoder_name = encoder_name
        self.norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel()).astype(
            np.float32
        )
        self.postings = None

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def has_labels(self) -> bool:
        return bool(self.labels) and any(self.labels)

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.matrix.indptr[i], self.matrix.indptr[i + 1]
        return self.matrix.indices[a:b], self.matrix.data[a:b]

    def csr(self):
        return self.matrix

    def meta(self, rows: Any, columns: list[str] | None = None) -> list[dict]:
        out = []
        for r in rows:
            r = int(r)
            labels = sorted(self.labels[r]) if self.labels else []
            out.append(
                {"id": self.ids[r], "kind": "text", "image": "", "text": self.texts[r],
                 "captions": [], "labels": labels, "row": r}
            )  # fmt: skip
        return out

    def column(self, name: str) -> list:
        if name == "labels":
            return [sorted(x) for x in self.labels] if self.labels else [[]] * len(self.ids)
        if name == "id":
            return list(self.ids)
        return [m[name] for m in self.meta(range(len(self)))]

    def describe(self) -> dict:
        return {"name": self.name, "items": len(self), "encoder": self.encoder_name,
                "modality": "text", "stored": False}  # fmt: skip


def _describe(target: Any) -> dict:
    if isinstance(target, StoredIndex):
        card = target.card()
        return {"name": card["name"], "items": card["items"], "encoder": card["encoder"],
                "modality": card["modality"], "stored": True}  # fmt: skip
    return target.describe()


def _csr(target: Any):
    """The whole collection as one scipy CSR matrix (cached on the target)."""
    if isinstance(target, MemoryCollection):
        return target.matrix
    cached = getattr(target, "_search_csr", None)
    if cached is None:
        cached = target.rows(0, len(target))
        target._search_csr = cached
    return cached


def encode_collection(
    encoder: Encoder,
    texts: list[str],
    *,
    ids: list[str] | None = None,
    labels: list[frozenset[str]] | None = None,
    k: int = 768,
    batch: int = 64,
    progress: Any = None,
    name: str = "collection",
) -> MemoryCollection:
    """Encode texts as documents, gate them (``E = V ⊙ G``) into a :class:`MemoryCollection`."""
    import scipy.sparse as sp

    Needs("a text collection", all_of=frozenset({Capability.TEXT_LEXICAL})).check(encoder)
    check_topk(k)
    blocks = []
    for start in range(0, len(texts), batch):
        chunk = encoder.encode_texts(
            texts[start : start + batch], side="document", keep_units=False
        )
        blocks.append(sp.csr_matrix(np.stack([gate(e, encoder.vocab, k) for e in chunk])))
        if progress:
            progress(min(1.0, (start + batch) / len(texts)))
    return MemoryCollection(
        ids or [str(i) for i in range(len(texts))], texts, sp.vstack(blocks).tocsr(),
        encoder.vocab, labels, name=name, encoder_name=encoder.name,
    )  # fmt: skip


def collection_from_file(
    encoder: Encoder, source: Any, name: str | None = None, *, k: int = 768, progress: Any = None
) -> MemoryCollection:
    """Read a .txt/.csv/.jsonl of texts (``id``, ``labels`` optional) and encode it."""
    from lexlens.analysis.inputs import read_texts

    table = read_texts(source, name, what="text")
    label = name or (Path(source).name if isinstance(source, (str, Path)) else "collection")
    return encode_collection(
        encoder, table.texts, ids=table.ids, labels=table.labels or None, k=k,
        progress=progress, name=label,
    )  # fmt: skip


# ------------------------------------------------------------------------ scoring, exactly
def _query_terms(q: np.ndarray) -> np.ndarray:
    return np.flatnonzero(q)


def _postings(target: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, bool] | None:
    """(indptr, items, weights, scale, exact) of the collection's inverted index.

    A large stored index keeps float16 postings on disk (``exact`` False). A small one (or
    an in-memory collection) gets an exact float32 transpose of its CSR, built once and
    kept on the object. ``None`` for a large index stored without postings.
    """
    stored = getattr(target, "postings", None)
    if stored is not None:
        return (*stored, False)
    cached = target.__dict__.get("_search_postings")
    if cached is None:
        if len(target) and getattr(target, "nnz", 0) > POSTINGS_MIN_NNZ:
            return None
        csc = _csr(target).tocsc()
        csc.sort_indices()
        cached = (
            csc.indptr.astype(np.int64), csc.indices.astype(np.int32),
            csc.data.astype(np.float32), 1.0, True,
        )  # fmt: skip
        target.__dict__["_search_postings"] = cached
    return cached


def top_items(
    target: Any,
    q: np.ndarray,
    n: int,
    *,
    normalize: bool = False,
    square: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows and exact scores of the ``n`` best items for ``score_i = Σ_t q_t f(w_it) / ν_i``.

    ``f(w) = w`` (or ``w²`` when ``square``); ``ν_i = ‖w_i‖₂`` (``‖w_i‖₂²`` when square)
    when ``normalize``, else 1. Only items that share a term with ``q`` are candidates.

    Scores accumulate over the query terms' postings (one ``bincount``: time and memory
    O(postings touched)). The accumulated scores are approximate — float16 postings of a
    large index, float32 products — so each carries a bound on its rounding error, and
    every item whose score could still reach the top ``n`` is rescored exactly (float64,
    from its CSR row): the result equals an exact ranking. Ties are broken by row.
    """
    terms = _query_terms(q)
    if n <= 0 or terms.size == 0 or len(target) == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    size = len(target)
    postings = _postings(target)
    if postings is None:  # a large index stored without postings: one pass over the CSR
        matrix = _csr(target)
        values = matrix.power(2) if square else matrix
        acc = np.asarray(values @ q.astype(np.float64)).ravel()
        mag = np.asarray(abs(values) @ np.abs(q).astype(np.float64)).ravel()
        touched = np.flatnonzero(np.asarray(matrix[:, terms].getnnz(axis=1)) > 0)
        rel, absolute = 1e-12, 0.0
    else:
        import scipy.sparse as sp

        p_indptr, p_items, p_weights, scale, exact = postings
        signed = bool(np.any(q[terms] < 0)) or not (
            exact or getattr(target, "manifest", {}).get("nonnegative", False)
        )
        slices = [(int(p_indptr[t]), int(p_indptr[t + 1])) for t in terms]
        lengths = np.array([b - a for a, b in slices], dtype=np.int64)
        if not lengths.sum():
            return np.zeros(0, np.int64), np.zeros(0)
        items = np.concatenate([np.asarray(p_items[a:b]) for a, b in slices])
        weights = np.concatenate([np.asarray(p_weights[a:b], dtype=np.float32) for a, b in slices])
        if square:
            weights = weights * weights
        # The query terms' postings as a sparse [items × terms] matrix: one float32 product.
        matrix = sp.csc_matrix(
            (weights, items, np.r_[0, np.cumsum(lengths)]), shape=(size, terms.size)
        )
        factor = (scale * scale if square else scale) * q[terms].astype(np.float64)
        acc = matrix @ factor.astype(np.float32)
        if signed:
            mag = abs(matrix) @ np.abs(factor).astype(np.float32)
            touched = np.flatnonzero(matrix @ np.ones(terms.size, np.float32))
        # Rounding bounds, relative to Σ_t |q_t f(w̃_t)|: float32 products and sums over the
        # item's terms ((T + 2)·2^-24, doubled); for float16 postings also |w̃ − w| ≤
        # 2^-11·|w̃|/(1 − 2^-11) + scale·2^-25 (doubled), squared for f(w) = w².
        rel, absolute = 2 * (terms.size + 2) * 2.0**-24, 0.0
        if not exact:
            r16, a16 = 2 * FP16_REL / (1 - FP16_REL), 2 * FP16_ABS * scale
            if square:
                top = POSTINGS_TOP * scale
                r16, a16 = (1 + r16) ** 2 - 1, 2 * a16 * top + a16**2
            rel = (1 + rel) * (1 + r16) - 1
            absolute = a16 * (1 + rel)
        if not signed:
            candidates = _candidates_nonnegative(
                target, acc, n, rel, absolute * float(np.abs(q[terms]).sum()), normalize, square
            )
            return _rescored(target, candidates, q, n, normalize, square)
    if touched.size == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    approx = acc[touched].astype(np.float64)
    slack = (
        rel * np.abs(mag[touched]).astype(np.float64)
        + absolute * float(np.abs(q[terms]).sum())
        + 1e-300
    )
    if normalize:
        norms = np.asarray(target.norms, dtype=np.float64)[touched]
        denominators = np.where(norms > 0, norms**2 if square else norms, 1.0)
        approx, slack = approx / denominators, slack / denominators
    keep = min(n, touched.size)
    low = approx - slack
    threshold = np.partition(low, touched.size - keep)[touched.size - keep]
    candidates = touched[approx + slack >= threshold]
    return _rescored(target, candidates, q, n, normalize, square)


def _candidates_nonnegative(
    target: Any, acc: np.ndarray, n: int, rel: float, absolute: float, normalize: bool,
    square: bool,
) -> np.ndarray:  # fmt: skip
    """Items whose score could reach the top ``n`` when no term can lower a score: the
    approximate scores ``acc`` (0 = untouched) need only a partition and one comparison."""
    size = acc.shape[0]
    keep = min(n, size)
    if normalize:
        norms = np.asarray(target.norms, dtype=np.float64)
        denominators = np.where(norms > 0, norms**2 if square else norms, 1.0)
        scores = acc / denominators
        low = scores * (1 - rel) - absolute / denominators
        threshold = np.partition(low, size - keep)[size - keep]
        upper = scores * (1 + rel) + absolute / denominators
    else:
        scores = acc
        nth = float(np.partition(scores, size - keep)[size - keep])
        threshold = nth * (1 - rel) - absolute
        upper = scores  # compared against the threshold moved to the scores' side below
        threshold = (threshold - absolute) / (1 + rel)
    mask = upper >= threshold
    if threshold <= 0:
        mask &= acc > 0
    return np.flatnonzero(mask)


def _rescored(
    target: Any, candidates: np.ndarray, q: np.ndarray, n: int, normalize: bool, square: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The top ``n`` of ``candidates`` by their exact float64 scores (ties by row)."""
    exact_scores = np.array(
        [_exact(target, int(i), q, square) for i in candidates], dtype=np.float64
    )
    if normalize:
        norms = np.asarray(target.norms, dtype=np.float64)[candidates]
        exact_scores = exact_scores / np.where(norms > 0, norms**2 if square else norms, 1.0)
    order = np.lexsort((candidates, -exact_scores))[: min(n, candidates.size)]
    return candidates[order].astype(np.int64), exact_scores[order]


def _exact(target: Any, row: int, q: np.ndarray, square: bool) -> float:
    cols, vals = target.row(row)
    w = vals.astype(np.float64)
    return float(np.sum(q[cols].astype(np.float64) * (w * w if square else w)))


# ------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Hit:
    """One result: the item, its score and the terms that make it (summing to the score)."""

    rank: int
    row: int
    id: str
    score: float
    kind: str
    text: str
    image: str
    labels: list[str]
    top_contributions: list[dict]
    other_terms: int
    other_contribution: float
    relevant: bool | None = None

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "id": self.id,
            "score": self.score,
            "kind": self.kind,
            "text": self.text,
            "image": self.image,
            "labels": self.labels,
            "top_contributions": self.top_contributions,
            "other_terms": self.other_terms,
            "other_contribution": self.other_contribution,
            "relevant": self.relevant,
        }


def _explain(
    target: Any,
    vocab: list[str],
    row: int,
    weights: np.ndarray,
    square: bool,
    denominator: float,
    explain: int,
) -> tuple[float, list[dict], int, float]:
    """Score of ``row`` and its contributions: ``c_t = weights_t · f(w_t) / denominator``
    (for ``square``, ``c_t = w_t² / (denominator · s)`` so that they sum to ``s = √(...)``)."""
    cols, vals = target.row(row)
    w = vals.astype(np.float64)
    q = weights[cols].astype(np.float64)
    if square:
        parts = q * w * w / denominator
        total = float(np.sum(parts))
        score = math.sqrt(max(total, 0.0))
        parts = parts / score if score > 0 else parts * 0
    else:
        parts = q * w / denominator
    nonzero = np.flatnonzero(parts)
    order = nonzero[np.argsort(-parts[nonzero], kind="stable")]
    score = float(np.sum(parts[order]))
    rows = [
        {
            "token": vocab[int(cols[i])],
            "index": int(cols[i]),
            "query_weight": float(parts[i] / w[i]) if w[i] else 0.0,
            "doc_weight": float(vals[i]),
            "contribution": float(parts[i]),
        }
        for i in order
    ]
    shown = rows[:explain]
    rest = float(np.sum(parts[order[explain:]])) if order.size > explain else 0.0
    return score, shown, max(0, len(rows) - explain), rest


def _hits(
    target: Any,
    vocab: list[str],
    rows: np.ndarray,
    weights: np.ndarray,
    *,
    square: bool = False,
    normalize: bool = False,
    explain: int = 5,
    relevant: set[str] | None = None,
) -> list[Hit]:
    metas = target.meta(rows)
    out = []
    for rank, (row, meta) in enumerate(zip(rows, metas, strict=True), start=1):
        nu = 1.0
        if normalize:
            norm = float(target.norms[int(row)])
            nu = norm if norm > 0 else 1.0
        # sum: c_t = q_t w_t / ν; l2: c_t = w_t² / (ν² s) with s = √(Σ_D w_t²) / ν.
        score, shown, others, rest = _explain(
            target, vocab, int(row), weights, square, nu * nu if square else nu, explain
        )
        out.append(
            Hit(
                rank, int(row), str(meta["id"]), score, str(meta.get("kind", "text")),
                str(meta.get("text") or ""), str(meta.get("image") or ""),
                list(meta.get("labels") or []), shown, others, rest,
                None if relevant is None else str(meta["id"]) in relevant,
            )
        )  # fmt: skip
    return out


@dataclass(frozen=True)
class SearchResult:
    """The result of one search or exclusion query on a collection."""

    collection: dict
    query: dict
    method: str
    settings: dict
    hits: list[Hit]
    dimensions: dict | None = None
    metrics: dict | None = None
    relevant_count: int | None = None
    messages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "collection": self.collection,
            "query": self.query,
            "method": self.method,
            "settings": self.settings,
            "results": [h.to_dict() for h in self.hits],
            "dimensions": self.dimensions,
            "metrics": self.metrics,
            "relevant_count": self.relevant_count,
            "messages": self.messages,
        }


# --------------------------------------------------------------------------- the queries
@dataclass(frozen=True)
class QuerySpec:
    """How queries become vectors: the encoder, the mode and the gate."""

    encoder: Encoder
    mode: str = "parametric"
    topk: int = 768
    #: query vectors already made (A and B are used by every method of an evaluation)
    _memo: dict = field(default_factory=dict, compare=False, repr=False)

    def text(self, text: str) -> np.ndarray:
        if not isinstance(text, str) or not text.strip():
            raise InputError("the query is empty: type some words")
        if text not in self._memo:
            if self.mode == "bow" and not self.encoder.can(Capability.TEXT_LEXICAL):
                enc = self.encoder.tokenize_texts([text])[0]  # a feature head: own tokens
            else:
                enc = self.encoder.encode_texts([text], side="query")[0]
            if self.mode == "bow":
                vector = bow_query(enc, self.encoder.vocab, self.encoder.bow_normalize)
            else:
                vector = gate(enc, self.encoder.vocab, self.topk)
            vector.setflags(write=False)
            self._memo[text] = vector
        return self._memo[text]

    def image(self, image: Any) -> np.ndarray:
        enc = self.encoder.encode_images([image])[0]
        return gate(enc, self.encoder.vocab, self.topk)


def check_vocabulary(target: Any, encoder: Encoder) -> None:
    """Refuse a query encoder whose vocabulary differs from the collection's."""
    if isinstance(target, StoredIndex):
        if vocab_hash(encoder.vocab) != target.manifest["vocab"]["hash"]:
            partner = partner_for(target.encoder_name, "text")
            hint = f" (e.g. {partner!r})" if partner else ""
            raise InputError(
                f"the query encoder {encoder.name!r} ({len(encoder.vocab)} terms) does not share "
                f"the vocabulary of the index {target.label} (built with "
                f"{target.encoder_name!r}, {target.vocab_size} terms): pick a query encoder in "
                f"the same vocabulary{hint}"
            )
    elif encoder.vocab != target.vocab:
        raise InputError(
            f"the query encoder {encoder.name!r} does not share the collection's vocabulary"
        )


def _check_settings(
    method: str, exclude: str | None, k_items: int | None, coverage: float | None, top: int,
    magnitude: str, explain: int,
) -> tuple[int, float]:  # fmt: skip
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise InputError(f"--top must be a positive integer, not {top!r}")
    if not isinstance(explain, int) or explain < 0:
        raise InputError("the number of contributions shown must be 0 or more")
    if method not in METHODS:
        raise InputError(f"--method must be one of {', '.join(METHODS)}, not {method!r}")
    if magnitude not in ("sum", "l2"):
        raise InputError(f"--magnitude must be 'sum' or 'l2', not {magnitude!r}")
    uses_sets = bool(exclude) and method == "sr"
    if not uses_sets and (k_items is not None or coverage is not None):
        which = "--k-items" if k_items is not None else "--coverage"
        raise InputError(
            f"{which} applies to the sr exclusion method only (it sets how D1 and D2 are "
            "extracted); leave it out for this search"
        )
    if k_items is not None and (
        isinstance(k_items, bool) or not isinstance(k_items, int) or k_items < 1
    ):
        raise InputError(
            f"--k-items must be a positive integer (items per dimension set), not {k_items!r}"
        )
    if coverage is not None and not (isinstance(coverage, (int, float)) and 0 < coverage <= 1):
        raise InputError(f"--coverage must be in (0, 1], not {coverage!r}")
    return (
        DEFAULT_K_ITEMS if k_items is None else k_items,
        DEFAULT_COVERAGE if coverage is None else float(coverage),
    )


def covering_dimensions(mass: np.ndarray, coverage: float) -> np.ndarray:
    """Smallest set of dimensions holding ``coverage`` of ``mass`` (strongest first)."""
    if not 0 < coverage <= 1:
        raise InputError("coverage must be in (0, 1]")
    mass = np.asarray(mass, dtype=np.float64)
    total = mass[mass > 0].sum()
    if total <= 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(-mass, kind="stable")
    order = order[mass[order] > 0]
    cumulative = np.cumsum(mass[order]) / total
    n = int(np.searchsorted(cumulative, coverage - 1e-12) + 1)
    return order[: min(n, order.size)]


def dimension_set(
    target: Any, q: np.ndarray, k_items: int, coverage: float, magnitude: str, normalize: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(D, the rows of the top-K items) for one single-label query vector ``q``."""
    rows, _ = top_items(target, q, k_items)
    mass = np.zeros(target.vocab_size, dtype=np.float64)
    for r in rows:
        cols, vals = target.row(int(r))
        w = vals.astype(np.float64)
        if normalize and target.norms[int(r)] > 0:
            w = w / float(target.norms[int(r)])
        mass[cols] += w * w if magnitude == "l2" else np.abs(w)
    return covering_dimensions(mass, coverage), rows


def _cached(target: Any, name: str, make: Any) -> Any:
    """A per-collection value computed once (labels and ids of a large index)."""
    cache = target.__dict__.setdefault("_search_cache", {})
    if name not in cache:
        cache[name] = make()
    return cache[name]


def _labelled(target: Any) -> list[frozenset[str]] | None:
    if not getattr(target, "has_labels", False):
        return None
    return _cached(
        target,
        "labels",
        lambda: [
            frozenset(str(x).casefold() for x in (lab or [])) for lab in target.column("labels")
        ],
    )


def _ids(target: Any) -> list[str]:
    return _cached(target, "ids", lambda: [str(x) for x in target.column("id")])


def relevant_ids(labels: list[frozenset[str]], ids: list[str], a: str, b: str | None) -> set[str]:
    """Items labelled A and not B (casefolded labels)."""
    a, b = a.casefold().strip(), (b or "").casefold().strip()
    return {i for i, lab in zip(ids, labels, strict=True) if a in lab and not (b and b in lab)}


def rank_method(
    target: Any,
    spec: QuerySpec,
    method: str,
    a: str,
    b: str | None,
    *,
    n: int,
    k_items: int,
    coverage: float,
    magnitude: str,
    normalize: bool,
    slq: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict | None, list[str]]:
    """(rows, scores, the weights hits are explained with, SR dimension sets, messages)."""
    vocab = target.vocab
    messages: list[str] = []
    if not b:
        q = spec.text(a)
        rows, scores = top_items(target, q, n)
        return rows, scores, q, None, messages
    if method == "text":
        q = spec.text(slq.format(a=a, b=b))
        rows, scores = top_items(target, q, n)
        return rows, scores, q, None, messages
    qa, qb = spec.text(a), spec.text(b)
    if method == "avg":
        q = (qa.astype(np.float64) - qb.astype(np.float64)).astype(np.float32)
        rows, scores = top_items(target, q, n)
        return rows, scores, q, None, messages
    d1, rows_a = dimension_set(target, qa, k_items, coverage, magnitude, normalize)
    d2, rows_b = dimension_set(target, qb, k_items, coverage, magnitude, normalize)
    kept = d1[~np.isin(d1, d2)]
    own = _own_top_terms(qa, vocab, a)
    overlap = [vocab[i] for i in d2 if i in own]
    dims = {
        "include_terms": [vocab[i] for i in d1],
        "exclude_terms": [vocab[i] for i in d2],
        "kept_terms": [vocab[i] for i in kept],
        "removed_query_terms": overlap,
        "include_items": len(rows_a),
        "exclude_items": len(rows_b),
    }
    if rows_a.size == 0:
        messages.append(f"no item shares a term with {a!r}: D1 is empty, nothing is ranked")
    elif kept.size == 0:
        messages.append(
            "D = D1 \\ D2 is empty: every dimension of A's top items is also one of B's "
            f"({'A and B are the same query' if a.strip().casefold() == b.strip().casefold() else 'B covers A'}), "
            "so there is nothing to rank by: no results"
        )
    if overlap:
        messages.append(
            f"D2 (from the top items of {b!r}) holds {', '.join(repr(t) for t in overlap)}, "
            f"among the own top terms of the query {a!r}: they are removed from D, so items "
            "are ranked without them"
        )
    mask = np.zeros(target.vocab_size, dtype=np.float32)
    mask[kept] = 1.0
    if kept.size == 0:
        return np.zeros(0, np.int64), np.zeros(0), mask, dims, messages
    rows, scores = top_items(target, mask, n, normalize=normalize, square=magnitude == "l2")
    if magnitude == "l2":
        scores = np.sqrt(np.maximum(scores, 0))
    return rows, scores, mask, dims, messages


def _own_top_terms(q: np.ndarray, vocab: list[str], text: str, top: int = 10) -> set[int]:
    """A query's own words and its ``top`` strongest terms (dimension ids)."""
    nonzero = np.flatnonzero(q)
    strongest = nonzero[np.argsort(-q[nonzero], kind="stable")][:top]
    words = {w for w in text.casefold().split()}
    own = {int(i) for i in strongest}
    own |= {i for i in nonzero if vocab[i] in words and not is_special_token(vocab[i])}
    return own


def search(
    target: Any,
    spec: QuerySpec,
    *,
    query: str | None = None,
    query_image: Any = None,
    image_name: str | None = None,
    exclude: str | None = None,
    method: str = "sr",
    top: int = 10,
    k_items: int | None = None,
    coverage: float | None = None,
    magnitude: str = "sum",
    normalize: bool = True,
    slq_template: str | None = None,
    explain: int = 5,
    evaluate: bool = True,
) -> SearchResult:
    """Search ``target`` (a stored index or a :class:`MemoryCollection`).

    A text ``query`` (or a ``query_image``) ranks items by inner product; with ``exclude``
    (text queries only), ``method`` picks SR, the average-embedding or the single-line
    baseline (module docstring). With labels in the collection and a query that is one of
    them, ``metrics`` holds MRR@1, MRR@10, NDCG@10 and AP@10 for every method (relevant =
    labelled A and not B). Inputs and settings are checked before any model runs.
    """
    exclude = (exclude or "").strip() or None
    k_items, coverage = _check_settings(method, exclude, k_items, coverage, top, magnitude, explain)
    if (query is None) == (query_image is None):
        raise InputError("give a text query or a query image (one of them)")
    if query is not None and not query.strip():
        raise InputError("the query is empty: type some words")
    if spec.mode not in ("parametric", "bow"):
        raise InputError(f"query mode must be 'parametric' or 'bow', not {spec.mode!r}")
    check_topk(spec.topk)
    slq = slq_template or (
        SLQ_IMAGE if getattr(target, "modality", "text") == "image" else SLQ_TEXT
    )
    if "{a}" not in slq or "{b}" not in slq:
        raise InputError("the single-line query template needs {a} and {b}")
    image = None
    if query_image is not None:
        if exclude:
            raise InputError("exclusion (--exclude) needs a text query A")
        if spec.mode == "bow":
            raise InputError(
                "the bag-of-words query mode needs a text query (an image has no words)"
            )
        from PIL import Image

        from lexlens.models.images import load_image

        image = (
            query_image
            if isinstance(query_image, Image.Image)
            else load_image(
                query_image,
                name=image_name
                or (str(query_image) if isinstance(query_image, (str, Path)) else "query image"),
            )
        )
        need = IMAGE_QUERY_NEEDS
    else:
        need = BOW_QUERY_NEEDS if spec.mode == "bow" else TEXT_QUERY_NEEDS
    try:
        need.check(spec.encoder)
    except ModalityError as exc:
        kind = "image" if image is not None else "text"
        partner = partner_for(spec.encoder.name, kind)
        hint = f": use {partner!r} (same vocabulary)" if partner else ""
        if kind == "text" and spec.encoder.can(Capability.FEATURE_LEXICAL):
            hint = ": a head over dense features has no text tower; use --query-mode bow"
        raise ModalityError(f"{exc}{hint}") from None
    check_vocabulary(target, spec.encoder)
    settings = {
        "top": top, "query_mode": spec.mode, "topk": spec.topk, "query_encoder": spec.encoder.name,
    }  # fmt: skip
    if exclude and method == "sr":
        settings |= {"k_items": k_items, "coverage": coverage, "magnitude": magnitude,
                     "normalize": normalize}  # fmt: skip
    if exclude and method == "text":
        settings["slq_template"] = slq
    query_info: dict = (
        {"text": query} if query is not None else {"image": image_name or "query image"}
    )
    if exclude:
        query_info["exclude"] = exclude
    labels = _labelled(target) if evaluate and query is not None else None
    relevant = None
    metrics = None
    messages: list[str] = []
    if image is not None:
        q = QuerySpec(spec.encoder, "parametric", spec.topk).image(image)
        rows, scores = top_items(target, q, top)
        hits = _hits(target, target.vocab, rows, q, explain=explain)
        return SearchResult(_describe(target), query_info, "search", settings, hits)
    ids = _ids(target) if labels is not None else None
    if labels is not None:
        known = set().union(*labels) if labels else set()
        a_label, b_label = query.casefold().strip(), (exclude or "").casefold().strip()
        if a_label in known and (not exclude or b_label in known):
            relevant = relevant_ids(labels, ids, query, exclude)
        elif exclude:
            missing = a_label if a_label not in known else b_label
            messages.append(f"{missing!r} is not one of the collection's labels: no metrics")
    used = method if exclude else "search"
    common = dict(n=top, k_items=k_items, coverage=coverage, magnitude=magnitude,
                  normalize=normalize, slq=slq)  # fmt: skip
    rows, _, weights, dims, notes = rank_method(target, spec, used, query, exclude, **common)
    messages.extend(notes)
    sr = exclude is not None and method == "sr"
    hits = _hits(
        target, target.vocab, rows, weights, square=sr and magnitude == "l2",
        normalize=sr and normalize, explain=explain, relevant=relevant,
    )  # fmt: skip
    if relevant is not None:
        runs = {used: [h.id for h in hits]}
        if exclude:
            for other in METHODS:
                if other != method:
                    r, *_ = rank_method(target, spec, other, query, exclude, **(common | {"n": 10}))
                    runs[other] = [str(m["id"]) for m in target.meta(r)]
        metrics = {
            name: ir_metrics({"q": ranked[:10]}, {"q": relevant})["mean"]
            for name, ranked in runs.items()
        }
        if top < 10:
            messages.append(f"metrics of {used!r} are computed on its top {top} only (--top < 10)")
        if not relevant:
            messages.append("no item is labelled A and not B: every metric is 0")
    return SearchResult(
        _describe(target), query_info, used, settings, hits, dims, metrics,
        None if relevant is None else len(relevant), messages,
    )  # fmt: skip


# ------------------------------------------------------------------------------ metrics
def ir_metrics(ranked: dict[str, list[str]], relevant: dict[str, set[str]]) -> dict:
    """MRR@1, MRR@10, NDCG@10 and AP@10 (ir-measures) per query and their means.

    Rankings are given as ordered id lists and handed over with strictly decreasing scores
    (duplicates dropped), so every backend sees this order. Queries with no relevant item
    score 0 and count in the mean.
    """
    import ir_measures
    from ir_measures import AP, RR, nDCG

    measures = {"MRR@1": RR @ 1, "MRR@10": RR @ 10, "NDCG@10": nDCG @ 10, "AP@10": AP @ 10}
    qrels = {q: {d: 1 for d in rel} for q, rel in relevant.items() if rel}
    run = {}
    for q, ids in ranked.items():
        unique = list(dict.fromkeys(ids))
        if unique:
            run[q] = {d: float(len(unique) - i) for i, d in enumerate(unique)}
    per_query = {q: dict.fromkeys(measures, 0.0) for q in relevant}
    if qrels:
        names = {str(m): k for k, m in measures.items()}
        for metric in ir_measures.iter_calc(list(measures.values()), qrels, run):
            per_query[metric.query_id][names[str(metric.measure)]] = float(metric.value)
    n = max(1, len(relevant))
    mean = {k: sum(per_query[q][k] for q in relevant) / n for k in measures}
    return {"per_query": per_query, "mean": mean}


@dataclass(frozen=True)
class EvalResult:
    """A table of (A, B) exclusion pairs or (query, relevant ids) rows, per method."""

    collection: dict
    kind: str  # "pairs" | "queries"
    settings: dict
    methods: dict  # method -> mean metrics
    rows: list[dict]
    skipped: list[dict]

    def to_dict(self) -> dict:
        return {
            "collection": self.collection,
            "kind": self.kind,
            "settings": self.settings,
            "metrics": self.methods,
            "rows": self.rows,
            "skipped": self.skipped,
        }


def read_eval_file(source: Any, name: str | None = None) -> tuple[str, list[dict]]:
    """Rows of a pairs file: columns ``a``, ``b`` (label pairs), or ``query``, ``relevant``
    (``|``-separated ids). Returns ("pairs" | "queries", rows)."""
    from lexlens.analysis.inputs import parse_labels, read_rows

    label = name or str(source)
    rows = read_rows(source, name)
    if not rows:
        raise InputError(f"{label}: holds no rows")
    columns = {k.strip().lower() for r in rows for k in r}
    lowered = [{str(k).strip().lower(): v for k, v in r.items()} for r in rows]
    if {"a", "b"} <= columns:
        out = [
            {"a": str(r.get("a") or "").strip(), "b": str(r.get("b") or "").strip()}
            for r in lowered
        ]
        bad = next((i for i, r in enumerate(out) if not r["a"] or not r["b"]), None)
        if bad is not None:
            raise InputError(f"{label}: row {bad + 1} needs both a label A and a label B")
        return "pairs", out
    if {"query", "relevant"} <= columns:
        out = [
            {
                "query": str(r.get("query") or "").strip(),
                "relevant": sorted(parse_labels(r.get("relevant"))),
            }
            for r in lowered
        ]
        bad = next((i for i, r in enumerate(out) if not r["query"] or not r["relevant"]), None)
        if bad is not None:
            raise InputError(f"{label}: row {bad + 1} needs a query and at least one relevant id")
        return "queries", out
    raise InputError(
        f"{label}: needs columns 'a' and 'b' (label pairs) or 'query' and 'relevant' "
        f"(columns: {', '.join(sorted(columns))})"
    )


def evaluate(
    target: Any,
    spec: QuerySpec,
    kind: str,
    rows: list[dict],
    *,
    methods: tuple[str, ...] = METHODS,
    k_items: int | None = None,
    coverage: float | None = None,
    magnitude: str = "sum",
    normalize: bool = True,
    slq_template: str | None = None,
    min_relevant: int = 1,
    progress: Any = None,
) -> EvalResult:
    """Run a table of exclusion pairs (A, B) per method — seed 003's Table 1 — or of text
    queries with their relevant ids (plain search). Metrics by ir-measures."""
    k_items, coverage = _check_settings("sr", "b", k_items, coverage, 10, magnitude, 0)
    check_topk(spec.topk)
    check_vocabulary(target, spec.encoder)
    (BOW_QUERY_NEEDS if spec.mode == "bow" else TEXT_QUERY_NEEDS).check(spec.encoder)
    slq = slq_template or (
        SLQ_IMAGE if getattr(target, "modality", "text") == "image" else SLQ_TEXT
    )
    ids = _ids(target)
    settings = {"query_mode": spec.mode, "topk": spec.topk, "query_encoder": spec.encoder.name,
                "cutoff": 10}  # fmt: skip
    common = dict(n=10, k_items=k_items, coverage=coverage, magnitude=magnitude,
                  normalize=normalize, slq=slq)  # fmt: skip
    out_rows: list[dict] = []
    skipped: list[dict] = []
    if kind == "queries":
        known = set(ids)
        ranked, relevant = {}, {}
        for n, row in enumerate(rows):
            missing = [r for r in row["relevant"] if r not in known]
            if missing:
                skipped.append(
                    {"query": row["query"], "reason": f"unknown ids: {', '.join(missing)}"}
                )
                continue
            q = f"q{n}"
            r, *_ = rank_method(target, spec, "search", row["query"], None, **common)
            ranked[q] = [ids[int(i)] for i in r]
            relevant[q] = set(row["relevant"])
            if progress:
                progress(n + 1, len(rows))
        result = ir_metrics(ranked, relevant)
        for n, row in enumerate(rows):
            q = f"q{n}"
            if q in ranked:
                out_rows.append(
                    {"query": row["query"], "relevant": row["relevant"], "top": ranked[q][:3],
                     **result["per_query"][q]}
                )  # fmt: skip
        return EvalResult(
            _describe(target), kind, settings, {"search": result["mean"]}, out_rows, skipped
        )
    labels = _labelled(target)
    if labels is None:
        raise InputError("the collection has no labels: exclusion pairs need labelled items")
    settings |= {"k_items": k_items, "coverage": coverage, "magnitude": magnitude,
                 "normalize": normalize, "slq_template": slq, "min_relevant": min_relevant}  # fmt: skip
    ranked = {m: {} for m in methods}
    relevant = {}
    pair_info = {}
    for n, row in enumerate(rows):
        a, b = row["a"], row["b"]
        la, lb = a.casefold(), b.casefold()
        counts = {
            "A": sum(la in x for x in labels),
            "B": sum(lb in x for x in labels),
            "A_and_B": sum(la in x and lb in x for x in labels),
        }
        counts["A_not_B"] = counts["A"] - counts["A_and_B"]
        if la == lb:
            skipped.append({"a": a, "b": b, "reason": "A and B are the same label", **counts})
            continue
        if counts["A_not_B"] < min_relevant:
            skipped.append(
                {
                    "a": a,
                    "b": b,
                    "reason": f"fewer than {min_relevant} item(s) labelled A and not B",
                    **counts,
                }
            )
            continue
        q = f"p{n}"
        relevant[q] = relevant_ids(labels, ids, a, b)
        pair_info[q] = {"a": a, "b": b, **counts}
        for m in methods:
            r, *_ = rank_method(target, spec, m, a, b, **common)
            ranked[m][q] = [ids[int(i)] for i in r]
        if progress:
            progress(n + 1, len(rows))
    if not relevant:
        raise InputError(
            "no usable pair: every pair was skipped (see the reasons)"
            + (
                f"; first: {skipped[0]['a']} / {skipped[0]['b']}: {skipped[0]['reason']}"
                if skipped
                else ""
            )
        )
    means = {}
    per = {}
    for m in methods:
        result = ir_metrics(ranked[m], relevant)
        means[m] = result["mean"]
        per[m] = result["per_query"]
    for q, info in pair_info.items():
        out_rows.append(info | {m: per[m][q] for m in methods})
    return EvalResult(_describe(target), kind, settings, means, out_rows, skipped)


# ------------------------------------------------------------------- opening + the encoders
def default_query_encoder(target: Any, modality: str) -> str:
    """The encoder name that puts ``modality`` queries into ``target``'s vocabulary."""
    if isinstance(target, StoredIndex):
        enc = target.manifest["encoder"]
        caps = set(enc.get("capabilities", []))
        wanted = str(Capability.TEXT_LEXICAL if modality == "text" else Capability.IMAGE_LEXICAL)
        spec = enc.get("spec") or enc["name"]
        if wanted in caps:
            return spec
        if modality == "text" and str(Capability.FEATURE_LEXICAL) in caps:
            return spec  # a D2S head: bag-of-words text queries (--query-mode bow)
        partner = partner_for(enc["name"], modality)
        if partner:
            return partner
        raise InputError(
            f"the index was built with {enc['name']!r}, which does not encode {modality}s: "
            "pass --query-encoder with an encoder in the same vocabulary"
        )
    return target.encoder_name


def open_target(index: str | Path) -> StoredIndex:
    return open_index(index)


__all__ = [
    "EvalResult",
    "Hit",
    "MemoryCollection",
    "QuerySpec",
    "SEARCH_NEEDS",
    "SearchResult",
    "collection_from_file",
    "covering_dimensions",
    "default_query_encoder",
    "encode_collection",
    "evaluate",
    "ir_metrics",
    "read_eval_file",
    "search",
    "top_items",
]


# ----------------------------------------------------------- use cases for the command line
def _load(spec: str | Encoder, device: str | None) -> Encoder:
    if isinstance(spec, Encoder):
        return spec
    from lexlens.models import load_encoder

    return load_encoder(spec, device=device)


def _precheck(options: dict) -> None:
    """Validate what can be validated before an encoder loads (a bad option costs nothing)."""
    exclude = (options.get("exclude") or "").strip() or None
    _check_settings(
        options.get("method", "sr"), exclude, options.get("k_items"), options.get("coverage"),
        options.get("top", 10), options.get("magnitude", "sum"), options.get("explain", 5),
    )  # fmt: skip
    query, image = options.get("query"), options.get("query_image")
    if (query is None) == (image is None):
        raise InputError("give a text query (--query) or a query image (--query-image)")
    if query is not None and not query.strip():
        raise InputError("the query is empty: type some words")
    if image is not None and exclude:
        raise InputError("exclusion (--exclude) needs a text query A")
    if image is not None and options.get("mode", "parametric") == "bow":
        raise InputError("the bag-of-words query mode needs a text query (an image has no words)")
    check_topk(options.get("topk", 768))
    if image is not None and not hasattr(image, "size"):
        from lexlens.models.images import load_image

        options["query_image"] = load_image(image, name=options.get("image_name") or str(image))
        options.setdefault("image_name", str(image))


def search_index(
    index: str | Path | StoredIndex,
    query_encoder: str | Encoder | None = None,
    *,
    device: str | None = None,
    mode: str = "parametric",
    topk: int = 768,
    **options: Any,
) -> SearchResult:
    """Search a stored index (``lexlens search --index``): the index opens and every option
    is checked before the query encoder loads (by default the index's own encoder, or its
    partner in the same vocabulary: ``splade-tiny`` for an ``efficientnet-lite0-lexical``
    image index)."""
    target = index if isinstance(index, StoredIndex) else open_index(index)
    options = dict(options, mode=mode, topk=topk)
    _precheck(options)
    options.pop("mode")
    options.pop("topk")
    modality = "image" if options.get("query_image") is not None else "text"
    encoder = _load(query_encoder or default_query_encoder(target, modality), device)
    return search(target, QuerySpec(encoder, mode, topk), **options)


def search_file(
    collection: str | Path,
    encoder: str | Encoder,
    *,
    device: str | None = None,
    mode: str = "parametric",
    topk: int = 768,
    **options: Any,
) -> SearchResult:
    """Search a small .txt/.csv/.jsonl collection encoded in memory (``--collection``)."""
    from lexlens.analysis.inputs import read_texts

    options = dict(options, mode=mode, topk=topk)
    _precheck(options)
    options.pop("mode")
    options.pop("topk")
    table = read_texts(collection, what="text")  # a bad file fails before the model loads
    model = _load(encoder, device)
    target = encode_collection(
        model, table.texts, ids=table.ids, labels=table.labels or None, k=topk,
        name=Path(str(collection)).name,
    )  # fmt: skip
    return search(target, QuerySpec(model, mode, topk), **options)


def evaluate_index(
    index: str | Path | StoredIndex,
    eval_file: str | Path,
    query_encoder: str | Encoder | None = None,
    *,
    device: str | None = None,
    mode: str = "parametric",
    topk: int = 768,
    **options: Any,
) -> EvalResult:
    """``lexlens search --index DIR --eval FILE``: a table of pairs or queries (see
    :func:`evaluate`); the file and options are checked before the encoder loads."""
    target = index if isinstance(index, StoredIndex) else open_index(index)
    kind, rows = read_eval_file(eval_file)
    _check_settings(
        "sr", "b", options.get("k_items"), options.get("coverage"), 10,
        options.get("magnitude", "sum"), 0,
    )  # fmt: skip
    if kind == "pairs" and not target.has_labels:
        raise InputError(f"{target.label}: the collection has no labels: pairs need labelled items")
    if mode not in ("parametric", "bow"):
        raise InputError(f"query mode must be 'parametric' or 'bow', not {mode!r}")
    check_topk(topk)
    encoder = _load(query_encoder or default_query_encoder(target, "text"), device)
    return evaluate(target, QuerySpec(encoder, mode, topk), kind, rows, **options)
