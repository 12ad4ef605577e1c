"""What the text-level search may edit, and how an edited input is made and re-encoded.

A text query's edits delete one of its words (split on whitespace, as typed); an image
query's edits occlude one cell of the encoder's patch grid (filled with the
preprocessing mean, ImageNet's, so the cell reads as "nothing" to the network). A text
target's edits insert one of the query's words into its text (appended). Provenance — the
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


@dataclass(frozen=True)
class Edit:
    """One edit: ``op`` delete (a query word), insert (a query word into the target item's
    text) or occlude (a cell of an image query); ``side`` query or document."""

    op: str
    side: str
    value: str  # the word, or the cell ("r1c2")
    position: int  # the word's (or cell's) place in the query; -1 for an insertion

    def to_dict(self) -> dict:
        """As the JSON names it: ``{op, side, word}`` (``cell`` for an occlusion)."""
        return {
            "op": self.op,
            "side": self.side,
            ("cell" if self.op == "occlude" else "word"): self.value,
        }


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
        from PIL import ImageDraw

        from lexlens.models.images import IMAGENET_MEAN

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

    def __init__(self, encoder: Encoder | None, text: str, gate_k: int) -> None:
        self.encoder, self.text, self.gate_k = encoder, text, gate_k

    def edited(self, inserted: tuple[str, ...]) -> str:
        return " ".join([self.text, *inserted]) if inserted else self.text

    def encode(self, texts: list[str]) -> list[np.ndarray]:
        """Edited items' gated vectors, encoded as documents (as the index was built)."""
        assert self.encoder is not None
        encs = self.encoder.encode_texts(list(texts), side="document", keep_units=False)
        return [gate(e, self.encoder.vocab, self.gate_k) for e in encs]


def insertable(query_words: Sequence[str], target_text: str) -> list[str]:
    """The query's words to insert into the target's text, each once: those the text lacks
    first (in query order), then those it holds (a repeated word may still move a
    contextual encoder's weights)."""
    have = {word_key(w) for w in target_text.split()}
    lacking: list[str] = []
    held: list[str] = []
    seen: set[str] = set()
    for word in query_words:
        key = word_key(word)
        if key and key not in seen:
            seen.add(key)
            (held if key in have else lacking).append(word.strip(".,;:!?\"'()") or word)
    return lacking + held
