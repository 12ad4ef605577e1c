"""The topic of a discrete code (RepMoT, "Interpreting Dense Retrieval as Mixture of Topics",
Figure 1): which texts share the code ``c_{i,j}``, and which of their words decide it.

Texts whose sub-vector ``i`` is quantised to the same centroid ``j`` are "about the same
topic" for that sub-vector. The topic's word cloud gathers, over those texts, the words
with the highest Integrated-Gradients attribution to sub-vector ``i`` (each text's top
``per_text`` positive words; a word's weight is the sum of its attributions). Words with no
letter or digit (punctuation) are left out of the cloud. Everything comes from an
attribution run over a corpus (an ``AttributionResult``): no model runs again.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from lexlens.analysis.attribution.arguments import index_below
from lexlens.analysis.attribution.attribution import AttributionResult
from lexlens.analysis.attribution.subvector import SubvectorAttribution
from lexlens.analysis.attribution.words import is_word
from lexlens.analysis.core.results import Result
from lexlens.analysis.core.words import Term

#: Words of a topic cloud: each text's top positively attributed words.
DEFAULT_PER_TEXT = 5


@dataclass(frozen=True)
class Topic(Result):
    """Code ``code`` of sub-vector ``subvector`` over a corpus."""

    file_stem = "topic"

    subvector: int
    code: int
    indices: list[int]  # corpus positions of the texts assigned to the code
    texts: list[str]
    weights: dict[str, float]  # word → summed attribution, for a word cloud
    per_text: list[list[tuple[str, float]]] = field(default_factory=list)  # top words per text
    n_corpus: int = 0

    def cloud_terms(self) -> list[Term]:
        """The cloud's words as terms (heaviest first), as the word-cloud renderer draws them."""
        ranked = sorted(self.weights.items(), key=lambda kv: -kv[1])
        return [Term(word, weight, j) for j, (word, weight) in enumerate(ranked)]


def _subvector(result: AttributionResult, subvector: int) -> int:
    """A sub-vector of the run's codebook."""
    return index_below(subvector, result.m, "subvector", f"the run has M={result.m} sub-vectors")


def topic_sizes(result: AttributionResult, subvector: int) -> list[tuple[int, int]]:
    """``(code, number of texts)`` of sub-vector ``subvector`` over the run, largest first."""
    subvector = _subvector(result, subvector)
    counts = Counter(int(c) for c in result.codes()[:, subvector])
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
    result: AttributionResult, subvector: int, code: int, *, per_text: int = DEFAULT_PER_TEXT
) -> Topic:
    """The texts of an attribution run assigned to ``c_{subvector, code}`` and their most
    highly attributed words (the run must have attributed ``subvector``)."""
    subvector = _subvector(result, subvector)
    code = index_below(code, result.k, "code", f"each sub-vector has K={result.k} codes")
    members = [int(i) for i in np.nonzero(result.codes()[:, subvector] == int(code))[0]]
    attrs = [result.texts[i] for i in members]
    weights, rows = topic_words(attrs, subvector, per_text)
    return Topic(
        subvector=subvector,
        code=int(code),
        indices=members,
        texts=[a.text for a in attrs],
        weights=weights,
        per_text=rows,
        n_corpus=len(result.texts),
    )
