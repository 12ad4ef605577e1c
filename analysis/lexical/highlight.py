"""Which words of a text to mark, and how to shorten a text honestly.

:func:`highlight_spans` reads a text's words as :func:`~lexlens.analysis.core.words.text_words`
does (runs of letters and digits, compared lower-cased) and marks each one that is a query
word, a term of one side (the words favouring one item of a failure, the words that make a
hit's score…) or, given the vocabulary, a word one of whose WordPiece pieces is such a term
("colourful" when the term is ``colour`` or ``##ful``). A word is marked once, with the
first side (in the order given) it belongs to, and whether it is a query word too.
Front ends draw the spans (escaped); nothing here is HTML.

:func:`preview` cuts a long text at a word boundary and says so with "…", never mid-word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lexlens.analysis.core.results import Record
from lexlens.analysis.core.vocabulary import token_positions
from lexlens.analysis.core.words import text_words
from lexlens.models.label_map import STOP_WORDS
from lexlens.models.wordpiece import wordpiece_split

#: A word of a text: a run of letters and digits (as ``core.words.text_words`` reads it).
WORD = re.compile(r"[^\W_]+")
#: Characters a preview shows before it cuts (at a word boundary).
PREVIEW_CHARS = 300
ELLIPSIS = "…"


@dataclass(frozen=True)
class Span(Record):
    """One marked word of a text: ``text[start:end]``, the side its term is on (``""``:
    a query word only) and whether the query spells it; ``term`` is what matched."""

    start: int
    end: int
    side: str
    query: bool
    term: str


def content_words(text: str) -> set[str]:
    """The words a text spells that are not English function words
    (models/data/stop_words.txt): the query words marked and checked for a mismatch."""
    return text_words(text) - STOP_WORDS


def _pieces(word: str, known: Mapping[str, object] | set[str] | None) -> list[str]:
    """A word's WordPiece pieces in ``known`` (none without a vocabulary)."""
    if known is None:
        return []
    return wordpiece_split(word, known) or []


def highlight_spans(
    text: str,
    query_words: Iterable[str] = (),
    sides: Mapping[str, Iterable[str]] | None = None,
    vocab: Sequence[str] | None = None,
) -> list[Span]:
    """The words of ``text`` to mark, in text order: those in ``query_words`` or in one of
    ``sides`` (side name → its terms: words or vocabulary tokens), matched lower-cased; with
    ``vocab``, also a word whose WordPiece pieces include a side's term."""
    query = {w.casefold() for w in query_words}
    side_terms = [(name, {t.casefold() for t in terms}) for name, terms in (sides or {}).items()]
    known = None
    if vocab is not None:
        known = token_positions(vocab) if isinstance(vocab, list) else set(vocab)
    spans = []
    for match in WORD.finditer(text):
        word = match.group().casefold()
        side, term = "", ""
        for name, terms in side_terms:
            if word in terms:
                side, term = name, word
                break
            piece = next((p for p in _pieces(word, known) if p in terms), None)
            if piece is not None:
                side, term = name, piece
                break
        if side or word in query:
            spans.append(Span(match.start(), match.end(), side, word in query, term or word))
    return spans


def preview(text: str, limit: int = PREVIEW_CHARS) -> tuple[str, bool]:
    """(the text's first ``limit`` characters or fewer, ending on a whole word followed by
    "…", and whether it was cut); a text that fits is returned whole."""
    if len(text) <= limit:
        return text, False
    cut = text[: limit + 1]
    boundary = max(cut.rfind(c) for c in " \t\n")
    shown = cut[:boundary] if boundary > 0 else cut[:limit]
    if boundary <= 0:  # one long word: cut before the word's part that does not fit
        last = list(WORD.finditer(shown))
        if last and last[-1].end() == len(shown) and last[-1].start() > 0:
            shown = shown[: last[-1].start()]
    return shown.rstrip() + ELLIPSIS, True


def score_spans(
    text: str, query: str, contributions: Iterable[Mapping], vocab: Sequence[str] | None = None
) -> list[Span]:
    """The spans of an item's ``text`` for a score: the query's content words, and the terms
    whose contribution (rows with ``token``, ``contribution`` and, when joined, ``pieces``)
    adds to the score (side ``"match"``)."""
    terms: set[str] = set()
    for row in contributions:
        if row["contribution"] > 0:
            terms.add(str(row["token"]))
            terms.update(row.get("pieces") or [])
    return highlight_spans(text, content_words(query), {"match": terms}, vocab)
