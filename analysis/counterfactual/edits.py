"""What the text-level search may edit, and how an edited input is made and re-encoded.

A text query's edits delete one of its words (split on whitespace, as typed); an image
query's edits occlude one cell of the encoder's patch grid (filled with the
preprocessing mean, ImageNet's, so the cell reads as "nothing" to the network). A text
target's edits insert query words into its text, in order (appended, or at its start):
"give memory" and "memory give" are two edits of an order-sensitive encoder. The words
inserted are those a person would type (:func:`insertable`): whole words as typed, no
stop word unless asked, never one the text already holds. Provenance — the
input word (:mod:`lexlens.analysis.lexical.word_units`, the faithfulness checks' own)
or cell whose unit won the max pool of each query term — guides the search: deleting a
word is first predicted to remove the terms it produced.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from lexlens.analysis.core.gating import gate
from lexlens.analysis.core.grid import patch_boxes
from lexlens.analysis.retrieval.queries import QuerySpec
from lexlens.models.base import Encoder, LexicalEncoding
from lexlens.models.label_map import STOP_WORDS


@dataclass(frozen=True)
class Edit:
    """One edit: ``op`` delete (a query word), insert (a query word into the target item's
    text) or occlude (a cell of an image query); ``side`` query or document."""

    op: str
    side: str
    value: str  # the word, or the cell ("r1c2")
    position: int  # the word's (or cell's) place in the query; -1 for an insertion
    #: an insertion's place: "end" (appended) or "start", and its order among those inserted
    at: str = ""
    order: int = -1

    def to_dict(self) -> dict:
        """As the JSON names it: ``{op, side, word}`` (``cell`` for an occlusion; an
        insertion also ``at`` and ``order``, 1 for the first word inserted)."""
        out = {
            "op": self.op,
            "side": self.side,
            ("cell" if self.op == "occlude" else "word"): self.value,
        }
        if self.op == "insert":
            out.update(at=self.at, order=self.order + 1)
        return out


def _normal(text: str) -> str:
    """Lower case without accents (what an uncased WordPiece tokenizer compares)."""
    folded = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in folded if unicodedata.category(c) != "Mn")


@lru_cache(maxsize=4096)
def word_key(word: str) -> str:
    """A word as compared for insertion: without surrounding punctuation, lower case, no
    accents."""
    return _normal(word.strip(".,;:!?\"'()"))


class TextQuery:
    """A text query: its words, how an edited one reads and is encoded (by the query rule,
    :class:`~lexlens.analysis.retrieval.queries.QuerySpec`)."""

    kind = "text"

    def __init__(self, spec: QuerySpec, text: str) -> None:
        self.spec, self.text = spec, text
        self.words = text.split()
        #: the query as encoded whole (by :meth:`encode_one_with_units`)
        self.encoding: LexicalEncoding | None = None

    def encode_one_with_units(self) -> tuple[np.ndarray, LexicalEncoding | None]:
        """The query's vector and (parametric mode) its encoding with per-unit rows."""
        if self.spec.mode == "bow":
            vector, self.encoding = self.spec.encode([self.text])[0]
            return vector, None
        vector, self.encoding = self.spec.encode_with_units(self.text)
        return vector, self.encoding

    def edits(self) -> list[Edit]:
        """Deleting each word."""
        return [Edit("delete", "query", w, j) for j, w in enumerate(self.words)]

    def edited(self, deleted: frozenset[int]) -> str:
        """The query without the deleted words."""
        return " ".join(w for j, w in enumerate(self.words) if j not in deleted)

    def encode(self, inputs: list[Any]) -> list[np.ndarray]:
        """Edited queries' vectors, encoded in one batch."""
        return [vector for vector, _ in self.spec.encode(inputs)]

    def shown(self, deleted: frozenset[int]) -> str:
        return self.edited(deleted)


class ImageQuery:
    """An image query: the encoder's grid cells, occluded with the preprocessing mean."""

    kind = "image"

    def __init__(self, spec: QuerySpec, image: Any, label: str = "image") -> None:
        self.spec, self.image, self.label = spec, image, label
        self.vector, self.encoding = spec.image_with_units(image)
        rows, cols = self.encoding.grid or (1, 1)
        self.words = [f"r{r}c{c}" for r in range(rows) for c in range(cols)]
        self.boxes = patch_boxes((rows, cols), self.encoding.crop_box)

    def encode_one_with_units(self) -> tuple[np.ndarray, LexicalEncoding | None]:
        return self.vector.copy(), self.encoding

    def edits(self) -> list[Edit]:
        """Occluding each cell."""
        return [Edit("occlude", "query", cell, j) for j, cell in enumerate(self.words)]

    def edited(self, deleted: frozenset[int]) -> Any:
        """The image with the deleted cells filled with the preprocessing mean."""
        from PIL import ImageDraw  # heavy: PIL loads on first use

        from lexlens.models.images import IMAGENET_MEAN  # heavy: loads PIL

        picture = self.image.convert("RGB").copy()
        draw = ImageDraw.Draw(picture)
        width, height = picture.size
        fill = tuple(int(round(255 * m)) for m in IMAGENET_MEAN)
        for j in sorted(deleted):
            x0, y0, x1, y1 = self.boxes[j]
            draw.rectangle([x0 * width, y0 * height, x1 * width - 1, y1 * height - 1], fill=fill)
        return picture

    def encode(self, inputs: list[Any]) -> list[np.ndarray]:
        """Occluded images' gated vectors, encoded in one batch."""
        return self.spec.images(inputs)

    def shown(self, deleted: frozenset[int]) -> str:
        cells = [self.words[j] for j in sorted(deleted)]
        return "the image" + (" with " + ", ".join(cells) + " occluded" if cells else "")


class TextTarget:
    """A text item: its text, how an edited one reads and is encoded as a document."""

    def __init__(self, encoder: Encoder | None, text: str, gate_k: int, at: str = "end") -> None:
        self.encoder, self.text, self.gate_k, self.at = encoder, text, gate_k, at

    def edited(self, inserted: tuple[str, ...]) -> str:
        """The text with the words inserted, in their order, at its end (or start)."""
        if not inserted:
            return self.text
        if self.at == "start":
            return " ".join([*inserted, self.text])
        return " ".join([self.text, *inserted])

    def encode(self, texts: list[str]) -> list[np.ndarray]:
        """Edited items' gated vectors, encoded as documents (as the index was built)."""
        assert self.encoder is not None
        encs = self.encoder.encode_texts(list(texts), side="document", keep_units=False)
        return [gate(e, self.encoder.vocab, self.gate_k) for e in encs]


#: Punctuation around a word as typed that is not part of it.
SENTENCE_MARKS = ".,;:!?\"'"
BRACKETS = {"(": ")", "[": "]", "{": "}"}


def whole_word(typed: str) -> str:
    """A word as typed without the sentence punctuation around it and without brackets
    left unpaired at its ends ("(threads)," → "threads", "thread(s)" stays)."""
    word = typed
    while True:
        before = word
        word = word.strip(SENTENCE_MARKS)
        if word[:1] in BRACKETS and BRACKETS[word[0]] not in word:
            word = word[1:]
        closing = {v: k for k, v in BRACKETS.items()}
        if word[-1:] in closing and closing[word[-1]] not in word:
            word = word[:-1]
        if word[:1] in BRACKETS and word.endswith(BRACKETS[word[0]]):
            word = word[1:-1]
        if word == before:
            return word


def _broken(word: str) -> bool:
    """A piece a tokenizer's punctuation split would leave: an unpaired bracket inside."""
    return any(word.count(a) != word.count(b) for a, b in BRACKETS.items())


def insertable(
    query_words: Sequence[str], target_text: str, *, allow_stop_words: bool = False
) -> tuple[list[str], list[dict]]:
    """The query's words a person would insert into the target's text, each once in query
    order, and those left out with why: whole words as typed (:func:`whole_word`; none
    with an unpaired bracket inside, none without a letter or digit), no stop word
    (``models/data/stop_words.txt``) unless ``allow_stop_words``, never a word the text
    already holds (compared without case and accents)."""

    have = {word_key(whole_word(w)) for w in target_text.split()}
    kept: list[str] = []
    excluded: list[dict] = []
    seen: set[str] = set()
    for typed in query_words:
        word = whole_word(typed)
        key = word_key(word)
        if key in seen:
            continue
        seen.add(key)
        if not any(c.isalnum() for c in word):
            why = "no letter or digit"
        elif _broken(word):
            why = "a piece broken by punctuation"
        elif not allow_stop_words and key in STOP_WORDS:
            why = "a stop word (--allow-stop-words to insert it)"
        elif key in have:
            why = "already in the document"
        else:
            kept.append(word)
            continue
        excluded.append({"word": typed, "why": why})
    return kept, excluded
