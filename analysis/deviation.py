"""Semantic deviation (Exact@k, Semantic@k) and co-activation (FLOPs), after D2S (SPEC.md §2).

- ``Exact@k``: share of the k highest-weighted output terms that are tokens of the caption.
- ``Semantic@k``: mean over those k terms of the best cosine similarity to any caption
  token, in a *static* token-embedding space (default: the encoder's own input
  word-embedding table; a GloVe-format text file can replace it).
- ``FLOPs``: expected number of dimensions two random items both activate,
  ``Σ_j p_A(j) · p_B(j)`` with ``p`` the per-dimension activation rates.

Special and ``[unused]`` tokens are excluded on both sides (from the top-k and from the
caption's tokens), and so are tokens with no static vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lexlens.analysis.terms import is_special_token, top_terms
from lexlens.models.base import Capability, InputError, LexicalEncoding, Needs

#: What this analysis needs of an encoder.
DEVIATION_NEEDS = Needs("semantic deviation", all_of=frozenset({Capability.TEXT_LEXICAL}))


@dataclass(frozen=True)
class StaticEmbeddings:
    """Unit-normalised context-free token vectors, looked up by token string."""

    vectors: np.ndarray  # [n, d], rows L2-normalised
    index: dict[str, int]

    @classmethod
    def from_table(cls, table: np.ndarray, tokens: list[str]) -> StaticEmbeddings:
        norms = np.linalg.norm(table, axis=1, keepdims=True)
        vectors = (table / np.maximum(norms, 1e-12)).astype(np.float32)
        return cls(vectors, {t: i for i, t in enumerate(tokens)})

    @classmethod
    def from_glove(cls, path: str | Path, *, limit: int | None = None) -> StaticEmbeddings:
        """Read a GloVe-format text file (``word v1 v2 …`` per line)."""
        path = Path(path)
        if not path.is_file():
            raise InputError(f"static embedding file not found: {path}")
        tokens, rows, dim = [], [], None
        with path.open(encoding="utf-8", errors="replace") as handle:
            for n, line in enumerate(handle, 1):
                parts = line.rstrip().split(" ")
                if len(parts) < 2:
                    continue
                try:
                    vec = np.asarray(parts[1:], dtype=np.float32)
                except ValueError:
                    raise InputError(f"{path}:{n}: not a GloVe line (word then numbers)") from None
                if dim is None:
                    dim = vec.shape[0]
                elif vec.shape[0] != dim:
                    raise InputError(f"{path}:{n}: {vec.shape[0]} numbers, expected {dim}")
                tokens.append(parts[0])
                rows.append(vec)
                if limit and len(rows) >= limit:
                    break
        if not rows:
            raise InputError(f"{path} holds no vectors")
        return cls.from_table(np.stack(rows), tokens)

    def has(self, token: str) -> bool:
        return token in self.index


@dataclass(frozen=True)
class CaptionDeviation:
    text: str
    exact: float
    semantic: float
    top_terms: list[str]
    caption_tokens: list[str]

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "exact_at_k": self.exact,
            "semantic_at_k": self.semantic,
            "top_terms": self.top_terms,
            "caption_tokens": self.caption_tokens,
        }


def caption_tokens(units: list[str], static: StaticEmbeddings) -> list[str]:
    """The caption's own tokens that count: no special tokens, each with a static vector."""
    seen: dict[str, None] = {}
    for unit in units:
        if not is_special_token(unit) and static.has(unit):
            seen.setdefault(unit, None)
    return list(seen)


def deviation(
    weights: np.ndarray,
    vocab: list[str],
    caption: list[str],
    static: StaticEmbeddings,
    k: int = 20,
    *,
    text: str = "",
) -> CaptionDeviation:
    """Exact@k and Semantic@k of one sparse vector against its caption's tokens.

    Fewer than ``k`` positive terms count as misses (the denominator stays ``k``), as in
    the paper's definition.
    """
    if k <= 0:
        raise InputError("k must be a positive number")
    if not caption:
        raise InputError(f"caption {text[:40]!r} has no usable token")
    terms = [t.token for t in top_terms(weights, vocab, k) if static.has(t.token)][:k]
    own = set(caption)
    exact = sum(t in own for t in terms) / k
    if terms:
        sims = (
            static.vectors[[static.index[t] for t in terms]]
            @ static.vectors[[static.index[c] for c in caption]].T
        )
        semantic = float(np.clip(sims.max(axis=1), -1.0, 1.0).sum()) / k
    else:
        semantic = 0.0
    return CaptionDeviation(text, exact, semantic, terms, caption)


def activation_rates(vectors: np.ndarray, threshold: float = 0.0) -> np.ndarray:
    """Per-dimension share of items whose weight exceeds ``threshold`` (``p(j)``)."""
    return (np.asarray(vectors) > threshold).mean(axis=0)


def flops(a: np.ndarray, b: np.ndarray | None = None, threshold: float = 0.0) -> float:
    """Co-activation ``Σ_j p_A(j) p_B(j)`` (SPLADE's FLOPs when ``b`` is ``a``).

    Equals the mean over all pairs (one of ``a``, one of ``b``) of the number of dimensions
    both activate: the expected posting-list work of a query–document match.
    """
    p_a = activation_rates(a, threshold)
    p_b = p_a if b is None else activation_rates(b, threshold)
    return float(np.dot(p_a, p_b))


def dataset_deviation(
    encodings: list[LexicalEncoding],
    texts: list[str],
    vocab: list[str],
    static: StaticEmbeddings,
    k: int = 20,
    *,
    gate_k: int = -1,
) -> dict:
    """Exact@k, Semantic@k (means and per caption) and FLOPs over a caption set.

    FLOPs and active dimensions are read on the gated vectors ``E = V ⊙ G`` (``gate_k``
    top dimensions plus own tokens; -1 = ungated), since a VDR ``V`` is positive everywhere.
    """
    from lexlens.analysis.contrib import gate

    per = [
        deviation(e.weights, vocab, caption_tokens(e.units, static), static, k, text=t)
        for e, t in zip(encodings, texts, strict=True)
    ]
    stacked = np.stack([gate(e, vocab, gate_k) for e in encodings])
    return {
        "k": k,
        "gate_k": gate_k,
        "n": len(per),
        "exact_at_k": float(np.mean([p.exact for p in per])),
        "semantic_at_k": float(np.mean([p.semantic for p in per])),
        "flops": flops(stacked),
        "mean_active_dims": float((stacked > 0).sum(axis=1).mean()),
        "per_caption": [p.to_dict() for p in per],
    }


def mean_term_weights(encodings: list[LexicalEncoding]) -> np.ndarray:
    """Average value of every dimension over a collection (VDR App. D dataset view)."""
    return np.mean(np.stack([e.weights for e in encodings]), axis=0)
