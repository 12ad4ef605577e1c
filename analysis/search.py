"""Search over a user's collection, and exclusion queries "A but not B" (SPEC.md §3).

Exclusion follows the sparse-representation method (SR, ICTIR 2025):

1. *Dimension extraction*: retrieve the top-K items for the single-concept query A; from
   them take ``D1``, the smallest set of dimensions holding ``coverage`` of those items'
   summed magnitude; likewise ``D2`` for B.
2. *Exclusion*: ``D = D1 \\ D2``; rank every item by its magnitude (sum of weights) on D.

Two baselines sit beside it: the single-line query "A without B" and the average-embedding
query ``emb(A) − emb(B)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.contrib import contributions
from lexlens.models.base import Capability, InputError, Needs

#: What this analysis needs of an encoder.
SEARCH_NEEDS = Needs("search", all_of=frozenset({Capability.TEXT_LEXICAL}))


@dataclass(frozen=True)
class Collection:
    """Encoded items: ids, their texts (or file names) and gated vectors ``[N, |V|]``."""

    ids: list[str]
    texts: list[str]
    vectors: np.ndarray
    labels: list[set[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.ids) == 0:
            raise InputError("the collection is empty")
        if self.vectors.shape[0] != len(self.ids):
            raise ValueError("one vector per item")


@dataclass(frozen=True)
class Hit:
    id: str
    text: str
    score: float
    top_contributions: list[dict]

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "text": self.text,
            "score": self.score,
            "top_contributions": self.top_contributions,
        }


def rank(scores: np.ndarray, top: int) -> np.ndarray:
    """Indices of the ``top`` highest scores, best first (ties by collection order)."""
    order = np.argsort(-scores, kind="stable")
    return order[: max(top, 0)]


def search(
    collection: Collection, query: np.ndarray, vocab: list[str], top: int = 10, explain: int = 5
) -> list[Hit]:
    """Inner-product search; each hit lists the terms that make its score."""
    scores = collection.vectors @ query
    hits = []
    for i in rank(scores, top):
        _, rows = contributions(query, collection.vectors[i], vocab)
        hits.append(
            Hit(
                collection.ids[i],
                collection.texts[i],
                float(scores[i]),
                [r.to_dict() for r in rows[:explain]],
            )
        )
    return hits


def covering_dimensions(vectors: np.ndarray, coverage: float) -> np.ndarray:
    """Smallest set of dimensions holding ``coverage`` of the vectors' summed magnitude."""
    if not 0 < coverage <= 1:
        raise InputError("coverage must be in (0, 1]")
    mass = np.abs(vectors).sum(axis=0)
    total = mass.sum()
    if total <= 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(-mass, kind="stable")
    cumulative = np.cumsum(mass[order]) / total
    n = int(np.searchsorted(cumulative, coverage - 1e-12) + 1)
    return order[:n]


@dataclass(frozen=True)
class Exclusion:
    """The dimension sets of an exclusion query and the resulting ranking."""

    include_dims: np.ndarray
    exclude_dims: np.ndarray
    kept_dims: np.ndarray
    hits: list[Hit]

    def to_dict(self, vocab: list[str]) -> dict:
        return {
            "include_terms": [vocab[i] for i in self.include_dims],
            "exclude_terms": [vocab[i] for i in self.exclude_dims],
            "kept_terms": [vocab[i] for i in self.kept_dims],
            "results": [h.to_dict() for h in self.hits],
        }


def exclusion_search(
    collection: Collection,
    query_a: np.ndarray,
    query_b: np.ndarray,
    vocab: list[str],
    *,
    top: int = 10,
    k_items: int = 10,
    coverage: float = 0.5,
    explain: int = 5,
) -> Exclusion:
    """ "A but not B" by dimension extraction and set difference (SR, seed 003)."""
    k_items = max(1, min(k_items, len(collection.ids)))
    d1 = covering_dimensions(
        collection.vectors[rank(collection.vectors @ query_a, k_items)], coverage
    )
    d2 = covering_dimensions(
        collection.vectors[rank(collection.vectors @ query_b, k_items)], coverage
    )
    kept = np.setdiff1d(d1, d2, assume_unique=True)
    kept = d1[np.isin(d1, kept)]  # keep D1's order (strongest first)
    mask = np.zeros(collection.vectors.shape[1], dtype=np.float32)
    mask[kept] = 1.0
    # Magnitude on D of each L2-normalised item: SR's embeddings are unit vectors, so an
    # item whose mass lies elsewhere (on B's dimensions, say) ranks lower.
    norms = np.linalg.norm(collection.vectors, axis=1)
    scores = (collection.vectors @ mask) / np.maximum(norms, 1e-12)
    hits = [
        Hit(
            collection.ids[i],
            collection.texts[i],
            float(scores[i]),
            [r.to_dict() for r in contributions(mask, collection.vectors[i], vocab)[1][:explain]],
        )
        for i in rank(scores, top)
    ]
    return Exclusion(d1, d2, kept, hits)


def average_embedding_query(query_a: np.ndarray, query_b: np.ndarray) -> np.ndarray:
    """Baseline: ``emb(A) − emb(B)`` (for one embedding each, the difference)."""
    return query_a - query_b


# ---------------------------------------------------------------------------- evaluation
def reciprocal_rank(ranked_relevant: list[bool], cutoff: int) -> float:
    for i, rel in enumerate(ranked_relevant[:cutoff]):
        if rel:
            return 1.0 / (i + 1)
    return 0.0


def ndcg(ranked_relevant: list[bool], n_relevant: int, cutoff: int) -> float:
    gains = sum(1.0 / np.log2(i + 2) for i, rel in enumerate(ranked_relevant[:cutoff]) if rel)
    ideal = sum(1.0 / np.log2(i + 2) for i in range(min(n_relevant, cutoff)))
    return gains / ideal if ideal > 0 else 0.0


def average_precision(ranked_relevant: list[bool], n_relevant: int, cutoff: int) -> float:
    hits, total = 0, 0.0
    for i, rel in enumerate(ranked_relevant[:cutoff]):
        if rel:
            hits += 1
            total += hits / (i + 1)
    denom = min(n_relevant, cutoff)
    return total / denom if denom > 0 else 0.0


def evaluate_exclusion(
    collection: Collection,
    pairs: list[tuple[str, str]],
    rankers: dict[str, Callable[[str, str], list[str]]],
    cutoff: int = 10,
) -> dict[str, dict[str, float]]:
    """MRR@1, MRR@10, NDCG@10, AP@10 per method over label pairs (A, B).

    An item is relevant for (A, B) when it carries label A and not B. Each ranker maps
    (A, B) to a ranked list of item ids.
    """
    if not collection.labels:
        raise InputError("the collection has no labels to evaluate against")
    labels = dict(zip(collection.ids, collection.labels, strict=True))
    out: dict[str, dict[str, float]] = {}
    for name, ranker in rankers.items():
        rows = []
        for a, b in pairs:
            relevant = {i for i, lab in labels.items() if a in lab and b not in lab}
            ranked = [i in relevant for i in ranker(a, b)]
            rows.append(
                (
                    reciprocal_rank(ranked, 1),
                    reciprocal_rank(ranked, cutoff),
                    ndcg(ranked, len(relevant), cutoff),
                    average_precision(ranked, len(relevant), cutoff),
                )
            )
        mean = np.mean(rows, axis=0) if rows else np.zeros(4)
        out[name] = dict(
            zip(
                ["MRR@1", f"MRR@{cutoff}", f"NDCG@{cutoff}", f"AP@{cutoff}"],
                map(float, mean),
                strict=True,
            )
        )
    return out


# ------------------------------------------------------------------------ building one
def read_labelled_csv(path) -> tuple[list[str], list[str], list[set[str]]]:
    """ids, texts and label sets from a CSV with ``text`` and optional ``id``, ``labels``.

    ``labels`` holds label names separated by ``;``. A .txt file is one text per line.
    """
    from pathlib import Path

    import pandas as pd

    from lexlens.analysis.cli.common import read_corpus

    path = Path(path)
    if path.suffix.lower() != ".csv":
        texts = read_corpus(path)
        return [str(i) for i in range(len(texts))], texts, []
    texts = read_corpus(path)  # validates the file and the text column
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame = frame[frame["text"].str.strip() != ""]
    ids = frame["id"].tolist() if "id" in frame.columns else [str(i) for i in range(len(texts))]
    if len(set(ids)) != len(ids):
        raise InputError(f"{path}: the id column has duplicates")
    labels = (
        [{x.strip() for x in cell.split(";") if x.strip()} for cell in frame["labels"]]
        if "labels" in frame.columns
        else []
    )
    return ids, texts, labels


def encode_collection(
    encoder,
    texts: list[str],
    *,
    ids: list[str] | None = None,
    labels: list[set[str]] | None = None,
    k: int = 768,
    batch: int = 64,
    progress: Callable[[float], None] | None = None,
) -> Collection:
    """Encode texts as documents and gate them (``E = V ⊙ G``) into a :class:`Collection`."""
    from lexlens.analysis.contrib import gate

    vectors = []
    for start in range(0, len(texts), batch):
        chunk = encoder.encode_texts(
            texts[start : start + batch], side="document", keep_units=False
        )
        vectors.extend(gate(e, encoder.vocab, k) for e in chunk)
        if progress:
            progress(min(1.0, (start + batch) / len(texts)))
    return Collection(
        ids or [str(i) for i in range(len(texts))], texts, np.stack(vectors), labels or []
    )
