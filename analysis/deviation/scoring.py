"""Exact@k and Semantic@k of one item: its top-k terms against its caption's tokens (D2S)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.core.results import Record, internal
from lexlens.analysis.core.vocabulary import is_special_token, special_mask
from lexlens.analysis.core.words import Term, merge_word_pieces
from lexlens.analysis.deviation.static_embeddings import StaticEmbeddings

# ----------------------------------------------------------------------------- one item


def caption_terms(units: Iterable[str]) -> list[str]:
    """A caption's own tokens that count: no special tokens, each once, in order."""
    return list(dict.fromkeys(u for u in units if not is_special_token(u)))


@dataclass(frozen=True)
class ItemDeviation(Record):
    """Exact@k and Semantic@k of one item (a caption, or an image against its captions)."""

    id: str
    text: str  # the caption, or the image's name
    positive_terms: int  # non-special terms with E > 0
    cap: float  # min(k, positive_terms) / k: the most Exact@k can be under denominator k
    matches: int  # top-k terms that are caption tokens
    semantic_sum: float = internal()  # Σ over top-k of the best cosine to a caption token
    denominator: int
    exact_at_k: float  # matches / denominator
    semantic_at_k: float  # semantic_sum / denominator
    top_terms: list[str]
    caption_tokens: list[str]
    no_vector: int  # top-k terms without a static vector (add 0 to Semantic@k)
    #: the top-k terms for reading: pieces of a word the caption spells joined into it
    top_words: list[str] = field(default_factory=list)


def denominator_of(k: int, positive: int, denominator: str) -> int:
    """``k`` (the paper) or ``min(k, positive)`` (at least 1: no term → 0 either way)."""
    return k if denominator == "k" else max(1, min(k, positive))


@dataclass(frozen=True)
class Scorer:
    """What scoring an item needs, prepared once per run."""

    vocab: list[str]
    special: np.ndarray  # [|V|] bool
    static: StaticEmbeddings
    static_rows: np.ndarray  # [|V|] row in static.vectors or -1
    k: int
    denominator: str

    @classmethod
    def build(cls, vocab: list[str], static: StaticEmbeddings, k: int, denominator: str) -> Scorer:
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
        evidence: set[str] | frozenset[str] = frozenset(),
    ) -> ItemDeviation:
        """One item's metrics; ``words=False`` skips ``top_words`` (display only), for items
        that are counted but not kept as rows. ``evidence``: the words the item's texts spell,
        into which ``top_words`` joins pieces (a caption's tokens, each once, no longer say
        which pieces sat side by side)."""
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
        return self.item(
            item_id,
            text,
            (top, val[order]),
            caption,
            counts=(int(idx.size), matches, int(rows.size - with_vec.size)),
            semantic_sum=semantic_sum,
            evidence=evidence if words else None,
        )

    def item(
        self,
        item_id: str,
        text: str,
        top: tuple[np.ndarray, np.ndarray],
        caption: list[str],
        *,
        counts: tuple[int, int, int],
        semantic_sum: float,
        evidence: set[str] | frozenset[str] | None,
    ) -> ItemDeviation:
        """The row of an item scored already: its top terms (ids, weights, best first),
        ``counts`` = (positive terms, matches, top terms without a static vector), its
        Semantic@k sum; ``evidence`` ``None`` skips ``top_words``."""
        positive, matches, no_vector = counts
        ids, weights = top
        den = denominator_of(self.k, positive, self.denominator)
        return ItemDeviation(
            id=item_id,
            text=text,
            positive_terms=positive,
            cap=min(self.k, positive) / self.k,
            matches=matches,
            semantic_sum=semantic_sum,
            denominator=den,
            exact_at_k=matches / den,
            semantic_at_k=semantic_sum / den,
            top_terms=[self.vocab[i] for i in ids],
            caption_tokens=list(caption),
            no_vector=no_vector,
            top_words=[]
            if evidence is None
            else [
                t.token
                for t in merge_word_pieces(
                    [
                        Term(self.vocab[i], float(w), int(i))
                        for i, w in zip(ids, weights, strict=True)
                    ],
                    self.vocab,
                    set(evidence),
                )
            ],
        )
