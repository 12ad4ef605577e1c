"""Words that differ only by their ending: Snowball's English stemmer (the Porter2 algorithm,
through the ``snowballstemmer`` package) says "terminate" and "terminates" are one word, so a
query word its relevant item spells in another form is not missing from it."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

#: How a variant is shown: the query's word, then the item's.
VARIANT = "{word} ≈ {variant}"


@lru_cache(maxsize=1)
def _stemmer():
    """The English Snowball stemmer (one, reused)."""
    import snowballstemmer  # heavy: snowballstemmer loads on first use

    return snowballstemmer.stemmer("english")


def stem(word: str) -> str:
    """A word's Snowball (English) stem: ``terminates`` → ``termin``."""
    return _stemmer().stemWord(word)


def missing_and_variants(
    words: Iterable[str], spelled: Iterable[str]
) -> tuple[list[str], list[str]]:
    """Of ``words``, those ``spelled`` holds neither as written nor in a form with the same
    Snowball stem (sorted), and the variants found (``"terminate ≈ terminates"``, sorted; the
    item's form is the first in alphabetical order when it spells several)."""
    spelled = set(spelled)
    forms: dict[str, str] = {}
    for form in sorted(spelled):
        forms.setdefault(stem(form), form)
    missing, variants = [], []
    for word in sorted(set(words)):
        if word in spelled:
            continue
        form = forms.get(stem(word))
        if form is None:
            missing.append(word)
        else:
            variants.append(VARIANT.format(word=word, variant=form))
    return missing, variants
