"""Which words each ranking of the masking evaluation keeps, and the masked sequence.

Rankings are over a document's **candidates**, its words with a letter or digit
(punctuation and symbols are never kept and never counted); stop words stay candidates, as
in RepMoT. **How many**: ``max(1, floor(keep · n_candidates + 0.5))``. Tail / Head keep the
last / first words; Rand a random set; TF = count of the word in the document, IDF =
``log(N / df)`` over the whole evaluation corpus, TF-IDF their product; GlobalT = IG of the
whole vector; MoT = IG of sub-vector i; RandT = IG of another sub-vector j(i) ≠ i. Ties
are broken by a seeded random order of the document's words.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from lexlens.analysis.attribution.words import is_word

POSITION = ("Tail", "Rand", "Head")
FREQUENCY = ("IDF", "TF", "TF-IDF")
ATTRIBUTION = ("RandT", "GlobalT", "MoT")
RANKINGS = POSITION + FREQUENCY + ATTRIBUTION
#: Reference rows (not rankings): no word masked (the quantisation error) / every word.
REFERENCE_ROWS = ("(none masked)", "(all masked)")


def keep_count(n_words: int, keep: float) -> int:
    """Words kept: ``max(1, floor(keep · n + 0.5))``, at most ``n`` (0 when ``n`` is 0)."""
    if n_words <= 0:
        return 0
    return min(n_words, max(1, math.floor(keep * n_words + 0.5)))


def candidates(words: Sequence[str]) -> list[int]:
    """Indices of the words that may be kept: those with a letter or digit."""
    return [j for j, w in enumerate(words) if is_word(w)]


def idf_table(word_lists: Sequence[Sequence[str]]) -> dict[str, float]:
    """``log(N / df)`` per lower-cased candidate word over the documents."""
    df: Counter[str] = Counter()
    for words in word_lists:
        df.update({w.lower() for w in words if is_word(w)})
    n = len(word_lists)
    return {w: math.log(n / c) for w, c in df.items()}


def _top(cand: list[int], scores: np.ndarray, tiebreak: np.ndarray, k: int) -> frozenset[int]:
    """The ``k`` candidates with the highest scores; ties by the random order ``tiebreak``."""
    s = np.asarray(scores, dtype=np.float64)[cand]
    order = np.lexsort((tiebreak[cand], -s))
    return frozenset(cand[int(j)] for j in order[:k])


def ranking_sets(
    words: list[str],
    attributions: np.ndarray,
    global_attributions: np.ndarray,
    idf: dict[str, float],
    keep: float,
    rng: np.random.Generator,
) -> tuple[dict[str, frozenset[int]], list[frozenset[int]]]:
    """Kept word sets: the shared rankings by name, and MoT's set for each sub-vector."""
    n = len(words)
    cand = candidates(words)
    k = keep_count(len(cand), keep)
    tiebreak = rng.permutation(n)
    lower = [w.lower() for w in words]
    tf_counts = Counter(lower[j] for j in cand)
    tf = np.array([tf_counts.get(w, 0) for w in lower], dtype=np.float64)
    idf_v = np.array([idf.get(w, 0.0) for w in lower], dtype=np.float64)
    picked = rng.choice(len(cand), size=k, replace=False) if cand else []
    shared = {
        "Tail": frozenset(cand[len(cand) - k :]) if k else frozenset(),
        "Head": frozenset(cand[:k]),
        "Rand": frozenset(cand[int(j)] for j in picked),
        "IDF": _top(cand, idf_v, tiebreak, k),
        "TF": _top(cand, tf, tiebreak, k),
        "TF-IDF": _top(cand, tf * idf_v, tiebreak, k),
        "GlobalT": _top(cand, global_attributions, tiebreak, k),
        "(none masked)": frozenset(range(n)),
        "(all masked)": frozenset(),
    }
    mot = [_top(cand, row, tiebreak, k) for row in attributions]
    return shared, mot


def masked_ids(
    ids: list[int], groups: list[list[int]], kept: frozenset[int], fill_id: int | None
) -> list[int]:
    """``ids`` with the pieces of words not in ``kept`` replaced by ``fill_id`` (or deleted)."""
    drop = {j for w, idx in enumerate(groups) if w not in kept for j in idx}
    if fill_id is None:
        return [t for j, t in enumerate(ids) if j not in drop]
    return [fill_id if j in drop else t for j, t in enumerate(ids)]
