"""Exclusion queries "A but not B" (Prachi, Bhatia and Bedathur, "Answering Multimodal
Exclusion Queries with Lightweight Sparse Disentangled Representations", ICTIR 2025): SR's
dimension sets and two baselines, each a ranking of a collection's items.

Exclusion methods
-----------------
``sr`` — the paper's sparse-representation method ("dimension extraction", then
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

The paper states none of: the meaning of "magnitude", K, the threshold ``th`` (our
``coverage``), whether items are normalised, or the wording of the single-label query. The
defaults here (``sum``, normalised, K = 10, coverage = 0.5, the label itself as the query)
are ours; every result records the settings it used.

``avg`` — the paper's "average embedding" baseline: ``E_q(A) − E_q(B)`` (one prompt each, so
the averages are single embeddings; the paper does not say what it averaged), ranked by
inner product; negative contributions come from B's terms.

``text`` — the paper's single-line query (SLQ): one text, by default "images of A without B"
(the paper's wording) for image collections and "A without B" for text collections.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lexlens.analysis.core.collection import Collection
from lexlens.analysis.core.vocabulary import is_special_token
from lexlens.analysis.core.words import (
    Reading,
    WordReader,
    item_words,
    text_words,
    words_of_tokens,
)
from lexlens.analysis.retrieval.queries import QuerySpec
from lexlens.analysis.retrieval.scorer import scorer_for
from lexlens.analysis.search.options import (
    COVERAGE,
    DEFAULT_COVERAGE,
    DEFAULT_K_ITEMS,
    SLQ_IMAGE,
    SLQ_TEMPLATE,
    SLQ_TEXT,
    SearchOptions,
    TableEvaluationOptions,
)


def slq_for(target: Collection, template: str | None) -> str:
    """The single-line query template: ``template`` (checked by its declaration), else the
    paper's wording for an image collection and ``A without B`` for a text one."""
    if template is not None:
        return SLQ_TEMPLATE.check(template)
    return SLQ_IMAGE if target.modality == "image" else SLQ_TEXT


@dataclass(frozen=True)
class ExclusionSettings:
    """What the exclusion methods read, resolved: SR's K, coverage, magnitude and
    normalisation, and the single-line query's wording."""

    k_items: int = DEFAULT_K_ITEMS
    coverage: float = DEFAULT_COVERAGE
    magnitude: str = "sum"
    normalize: bool = True
    slq: str = SLQ_TEXT

    @classmethod
    def of(
        cls, target: Collection, options: SearchOptions | TableEvaluationOptions
    ) -> ExclusionSettings:
        """The settings ``options`` give on ``target`` (a search's or a table evaluation's:
        the same shared declarations), SR's defaults where they give none."""
        k_items = DEFAULT_K_ITEMS if options.k_items is None else options.k_items
        coverage = DEFAULT_COVERAGE if options.coverage is None else options.coverage
        return cls(
            k_items,
            coverage,
            options.magnitude,
            options.normalize,
            slq_for(target, options.slq_template),
        )


def covering_dimensions(mass: np.ndarray, coverage: float) -> np.ndarray:
    """Smallest set of dimensions holding ``coverage`` of ``mass`` (strongest first)."""
    if coverage is None:
        raise COVERAGE.refuse(coverage)
    coverage = COVERAGE.check(coverage)
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
    target: Collection, q: np.ndarray, settings: ExclusionSettings
) -> tuple[np.ndarray, np.ndarray]:
    """(D, the rows of the top-K items) for one single-label query vector ``q``."""
    rows, _ = scorer_for(target).top(q, settings.k_items)
    mass = np.zeros(target.vocab_size, dtype=np.float64)
    for r in rows:
        cols, vals = target.row(int(r))
        w = vals.astype(np.float64)
        if settings.normalize and target.norms[int(r)] > 0:
            w = w / float(target.norms[int(r)])
        mass[cols] += w * w if settings.magnitude == "l2" else np.abs(w)
    return covering_dimensions(mass, settings.coverage), rows


#: One method's ranking: (rows, scores, the weights hits are explained with, SR's dimension
#: sets or ``None``, notes).
Ranking = tuple[np.ndarray, np.ndarray, np.ndarray, dict | None, list[str]]


def rank_method(
    target: Collection,
    spec: QuerySpec,
    method: str,
    a: str,
    b: str | None,
    *,
    n: int,
    settings: ExclusionSettings,
) -> Ranking:
    """The top ``n`` items for ``a`` (plain search when ``b`` is empty) or for "``a`` but not
    ``b``" by ``method``, as ``settings`` say."""
    if not b:
        q = spec.vector(a)
    elif method == "text":
        q = spec.vector(settings.slq.format(a=a, b=b))
    elif method == "avg":
        q = (spec.vector(a).astype(np.float64) - spec.vector(b).astype(np.float64)).astype(
            np.float32
        )
    else:
        return _rank_sr(target, spec, a, b, n, settings)
    rows, scores = scorer_for(target).top(q, n)
    return rows, scores, q, None, []


def _rank_sr(
    target: Collection, spec: QuerySpec, a: str, b: str, n: int, settings: ExclusionSettings
) -> Ranking:
    """SR: D = D1 \\ D2 from the top-K items of A and of B; items ranked by their magnitude
    on D (with the sets, in tokens, and what a reader should know about them)."""
    vocab = target.vocab
    qa, qb = spec.vector(a), spec.vector(b)
    d1, rows_a = dimension_set(target, qa, settings)
    d2, rows_b = dimension_set(target, qb, settings)
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
    shown = [_quoted(WordReader(text_words(a), vocab).read(t)) for t in overlap]
    notes = _sr_notes(a, b, rows_a.size, kept.size, shown)
    mask = np.zeros(target.vocab_size, dtype=np.float32)
    mask[kept] = 1.0
    if kept.size == 0:
        return np.zeros(0, np.int64), np.zeros(0), mask, dims, notes
    square = settings.magnitude == "l2"
    rows, scores = scorer_for(target).top(mask, n, normalize=settings.normalize, square=square)
    if square:
        scores = np.sqrt(np.maximum(scores, 0))
    return rows, scores, mask, dims, notes


#: The dimension sets of SR, by the prefix of their keys (``include_terms``…).
DIMENSION_SETS = ("include", "exclude", "kept")


def with_set_words(
    target: Collection,
    spec: QuerySpec,
    dims: dict,
    a: str,
    b: str,
    settings: ExclusionSettings,
    words: set[str],
    rows: np.ndarray,
) -> dict:
    """SR's dimension sets read as words: ``{kind}_words`` (the pieces of a word that an item
    behind the sets, a hit or the query spells joined) and ``{kind}_pieces``, the entries of
    ``{kind}_words`` that are no whole word of those texts (each with the word it belongs to,
    or ``None``): :class:`~lexlens.analysis.core.words.WordReader`. ``words``: the query's
    words (and the words the encoder knows); ``rows``: the hits."""
    behind = [dimension_set(target, spec.vector(q), settings)[1] for q in (a, b)]
    items = np.concatenate([*behind, np.asarray(rows, dtype=np.int64)])
    evidence = set(words).union(*(item_words(m) for m in target.meta(np.unique(items))))
    reader = WordReader(evidence, target.vocab)
    out = dict(dims)
    for kind in DIMENSION_SETS:
        out[f"{kind}_words"] = words_of_tokens(dims[f"{kind}_terms"], target.vocab, evidence)
    for kind in DIMENSION_SETS:
        out[f"{kind}_pieces"] = reader.pieces(out[f"{kind}_words"])
    return out


def set_labels(dims: dict, kind: str) -> list[str]:
    """One dimension set's words as a display shows them: a piece marked (``terri (piece of
    terrier)``), never as a word."""
    pieces = dims.get(f"{kind}_pieces") or {}
    return [Reading(w, w in pieces, pieces.get(w)).label for w in dims[f"{kind}_words"]]


def _quoted(reading: Reading) -> str:
    """A term of the query quoted in a note, a piece marked: ``'##ome' (piece of chrome)``."""
    if not reading.piece:
        return repr(reading.text)
    return (
        f"{reading.text!r} (piece of {reading.of})" if reading.of else f"{reading.text!r} (piece)"
    )


def _sr_notes(a: str, b: str, found: int, kept: int, overlap: list[str]) -> list[str]:
    """What a reader should know about SR's sets: nothing found for A, an empty D, query
    terms of A that B's items took out of D."""
    notes = []
    if found == 0:
        notes.append(f"no item shares a term with {a!r}: D1 is empty, nothing is ranked")
    elif kept == 0:
        same = a.strip().casefold() == b.strip().casefold()
        notes.append(
            "D = D1 \\ D2 is empty: every dimension of A's top items is also one of B's "
            f"({'A and B are the same query' if same else 'B covers A'}), "
            "so there is nothing to rank by: no results"
        )
    if overlap:
        notes.append(
            f"D2 (from the top items of {b!r}) holds {', '.join(overlap)}, "
            f"among the own top terms of the query {a!r}: they are removed from D, so items "
            "are ranked without them"
        )
    return notes


def _own_top_terms(q: np.ndarray, vocab: list[str], text: str, top: int = 10) -> set[int]:
    """A query's own words and its ``top`` strongest terms (dimension ids)."""
    nonzero = np.flatnonzero(q)
    strongest = nonzero[np.argsort(-q[nonzero], kind="stable")][:top]
    words = {w for w in text.casefold().split()}
    own = {int(i) for i in strongest}
    own |= {i for i in nonzero if vocab[i] in words and not is_special_token(vocab[i])}
    return own
