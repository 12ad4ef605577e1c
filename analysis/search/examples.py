"""Example queries for a collection, taken from what it holds: its labels (as A the commonest
label the items' texts or captions also use, and as B the one that most often comes with A
while some A items lack it, so "A but not B" leaves items to find), else the words its texts
or captions use most."""

from __future__ import annotations

from collections import Counter

from lexlens.analysis.core.collection import Collection
from lexlens.analysis.core.words import text_words
from lexlens.analysis.search.table_evaluation import item_ids, labelled

#: Words never offered as an example query on their own.
FILLER = frozenset({"a", "an", "the", "of", "on", "in", "and", "with", "to", "at", "by", "for"})


def example_queries(target: Collection, sample: int = 2000) -> tuple[str, str]:
    """``(A, B)``: a query and an exclusion that make sense on ``target`` (B may be empty)."""
    words = _words(target, sample)
    labels = labelled(target)
    if labels:
        counts = Counter(label for item in labels for label in item)

        def rank(lab: str, count: Counter) -> tuple:
            return (lab not in words, -count[lab], lab)  # labels the items' words use first

        if counts:
            a = sorted(counts, key=lambda lab: rank(lab, counts))[0]
            with_a = Counter(lab for item in labels if a in item for lab in item if lab != a)
            kept = [lab for lab in with_a if with_a[lab] < counts[a]]
            b = sorted(kept, key=lambda lab: rank(lab, with_a))[0] if kept else ""
            return a, b
    common = sorted(words, key=lambda w: (-words[w], w))
    return (common[0] if common else "", "")


def _words(target: Collection, sample: int) -> Counter:
    """How often each word occurs in the texts and captions of the first ``sample`` items."""
    words: Counter[str] = Counter()
    n = min(len(item_ids(target)), sample)
    for meta in target.meta(range(n)):
        text = " ".join([str(meta.get("text") or ""), *map(str, meta.get("captions") or [])])
        words.update(w for w in text_words(text) if w not in FILLER and len(w) > 2)
    return words
