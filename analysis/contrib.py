"""Query ⊙ document contributions (VDR's retrieval reasoning, SPEC.md §1).

``sim(q, p) = E_q · E_p`` with ``E(x) = V(x) ⊙ G(x)``: the gate keeps the top-k dimensions
and the input's own tokens. The element-wise product gives each vocabulary term's share
of the score; the shares sum exactly to the score (both are computed in float64 from the
same vectors).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lexlens.analysis.terms import own_tokens
from lexlens.models.base import Capability, InputError, LexicalEncoding, Needs

#: What this analysis needs of an encoder.
CONTRIB_NEEDS = Needs("query ⊙ document contributions", all_of=frozenset({Capability.TEXT_LEXICAL}))


def bag_of_words(encoding: LexicalEncoding, vocab: list[str]) -> np.ndarray:
    """Binary ``bow(x)`` over the output vocabulary: the input's own tokens (none for images).

    Matched by token string, so it holds for encoders whose output dimensions are a slice
    or subset of the tokenizer's ids (VDR's shifted and "valid" vocabularies).
    """
    own = own_tokens(encoding)
    return np.fromiter((t in own for t in vocab), dtype=np.float32, count=len(vocab))


def gate(encoding: LexicalEncoding, vocab: list[str], k: int) -> np.ndarray:
    """``E(x) = V(x) ⊙ G(x)``; ``G`` = top-k of ``V`` or the input's own tokens.

    ``k = -1`` keeps every dimension; ``k = 0`` keeps the bag-of-words dimensions only.
    """
    weights = encoding.weights
    if k < 0 or k >= weights.shape[0]:
        return weights.copy()
    mask = bag_of_words(encoding, vocab) > 0
    if k > 0:
        mask[np.argpartition(-weights, k - 1)[:k]] = True
    return np.where(mask, weights, 0.0).astype(np.float32)


@dataclass(frozen=True)
class Contribution:
    token: str
    index: int
    query_weight: float
    doc_weight: float
    contribution: float

    def to_dict(self) -> dict:
        return {
            "token": self.token,
            "index": self.index,
            "query_weight": self.query_weight,
            "doc_weight": self.doc_weight,
            "contribution": self.contribution,
        }


def contributions(
    query: np.ndarray, doc: np.ndarray, vocab: list[str]
) -> tuple[float, list[Contribution]]:
    """The score ``query · doc`` and every non-zero term's share, largest first."""
    if query.shape != doc.shape or query.shape[0] != len(vocab):
        raise InputError(
            f"query ({query.shape[0]} dims) and document ({doc.shape[0]} dims) are not in the "
            f"same {len(vocab)}-term vocabulary: pick encoders that share one"
        )
    product = query.astype(np.float64) * doc.astype(np.float64)
    nonzero = np.flatnonzero(product)
    order = nonzero[np.argsort(-product[nonzero], kind="stable")]
    rows = [
        Contribution(vocab[i], int(i), float(query[i]), float(doc[i]), float(product[i]))
        for i in order
    ]
    return float(product.sum()), rows
