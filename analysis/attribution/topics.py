"""Topic view of a discrete code (RepMoT Figure 1): which texts share ``c_{i,j}`` and why.

Texts whose sub-vector ``i`` is quantised to the same centroid ``j`` are "about the same
topic" for that sub-vector. The topic's word cloud gathers, over those texts, the words
with the highest Integrated-Gradients attribution to sub-vector ``i`` (each text's top
``per_text`` positive words; a word's weight is the sum of its attributions). Words with no
letter or digit (punctuation) are left out of the cloud.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.attribution.ig import attribute_texts
from lexlens.analysis.attribution.subvector import SubvectorAttribution
from lexlens.analysis.attribution.validate import ATTRIBUTION_NEEDS
from lexlens.analysis.attribution.words import is_word
from lexlens.analysis.core.results import Progress
from lexlens.models.base import InputError, check_texts


@dataclass(frozen=True)
class Topic:
    """Code ``code`` of sub-vector ``subvector`` over a corpus."""

    subvector: int
    code: int
    indices: list[int]  # corpus positions of the texts assigned to the code
    texts: list[str]
    weights: dict[str, float]  # word → summed attribution, for a word cloud
    per_text: list[list[tuple[str, float]]] = field(default_factory=list)  # top words per text
    n_corpus: int = 0

    def top_words(self, k: int = 20) -> list[tuple[str, float]]:
        return sorted(self.weights.items(), key=lambda kv: -kv[1])[:k]

    def to_dict(self) -> dict:
        return {
            "subvector": self.subvector,
            "code": self.code,
            "indices": list(self.indices),
            "texts": list(self.texts),
            "weights": dict(self.weights),
            "per_text": [[[w, float(v)] for w, v in row] for row in self.per_text],
            "n_corpus": self.n_corpus,
        }


def topic_sizes(codes: np.ndarray, subvector: int) -> list[tuple[int, int]]:
    """``(code, number of texts)`` for sub-vector ``subvector``, largest first."""
    codes = np.asarray(codes)
    if codes.ndim != 2:
        raise InputError("codes must be [N, M]")
    if not 0 <= subvector < codes.shape[1]:
        raise InputError(f"sub-vector {subvector} out of range 0..{codes.shape[1] - 1}")
    counts = Counter(int(c) for c in codes[:, subvector])
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def topic_words(
    attributions: Sequence[SubvectorAttribution], subvector: int, per_text: int = 5
) -> tuple[dict[str, float], list[list[tuple[str, float]]]]:
    """Word-cloud weights from each text's top ``per_text`` positive words for ``subvector``."""
    weights: dict[str, float] = defaultdict(float)
    rows = []
    for a in attributions:
        scores = a.attributions[a.row(subvector)]
        order = np.argsort(-scores)
        top = []
        for j in order:
            if len(top) >= per_text or scores[j] <= 0:
                break
            word = a.words[j].lower()
            if is_word(word):
                top.append((word, float(scores[j])))
        for word, score in top:
            weights[word] += score
        rows.append(top)
    return dict(weights), rows


def code_topic(
    encoder,
    texts: list[str],
    subvector: int,
    code: int,
    *,
    codes: np.ndarray | None = None,
    attributions: Sequence[SubvectorAttribution] | None = None,
    steps: int | None = 16,
    per_text: int = 5,
    max_texts: int = 50,
    progress: Progress | None = None,
) -> Topic:
    """The texts assigned to ``c_{subvector, code}`` and their highly attributed words.

    ``codes`` ([N, M]) and ``attributions`` (one per text, covering ``subvector``) are
    reused when given; otherwise codes are computed and IG runs on the assigned texts only
    (at most ``max_texts`` of them, the first ones), for that one sub-vector.
    """
    check_texts(texts)
    ATTRIBUTION_NEEDS.check(encoder)
    if not 0 <= int(subvector) < encoder.m:
        raise InputError(f"sub-vector {subvector} out of range 0..{encoder.m - 1}")
    if not 0 <= int(code) < encoder.k:
        raise InputError(f"code {code} out of range 0..{encoder.k - 1}")
    if codes is None:
        codes = encoder.codes(texts)
    codes = np.asarray(codes)
    if codes.shape != (len(texts), encoder.m):
        raise InputError(f"codes must be [{len(texts)}, {encoder.m}], got {codes.shape}")
    members = [int(i) for i in np.nonzero(codes[:, subvector] == code)[0]][: int(max_texts)]
    if attributions is not None:
        if len(attributions) != len(texts):
            raise InputError("attributions must be given for every text, in order")
        attrs = [attributions[i] for i in members]
    elif members:
        attrs = attribute_texts(
            encoder,
            [texts[i] for i in members],
            steps=steps,
            subvectors=[int(subvector)],
            progress=progress,
        )
    else:
        attrs = []
    weights, rows = topic_words(attrs, int(subvector), per_text)
    return Topic(
        subvector=int(subvector),
        code=int(code),
        indices=members,
        texts=[texts[i] for i in members],
        weights=weights,
        per_text=rows,
        n_corpus=len(texts),
    )
