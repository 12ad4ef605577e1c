"""What a source yields, before anything is encoded: an item, or an item left out and why;
and the one check every source's items pass through (:func:`checked_items`): an id a TREC
file can hold, each id once."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from lexlens.analysis.core.results import Record

#: What a TREC file (trec_eval's qrels and runs, Anserini's, Lexlens's own ``run.trec``)
#: splits its fields on: any whitespace, as ``str.split()`` and C's ``isspace``.
_WHITESPACE = re.compile(r"\s")
#: Characters a derived id (a file's path) writes as ``%XX`` (its UTF-8 bytes): whitespace,
#: and ``%`` itself so two paths never give the same id.
_ESCAPED = re.compile(r"[\s%]")


@dataclass(frozen=True)
class SourceItem(Record):
    """One item of a source, before encoding.

    ``image`` is a path relative to the source's folder (posix), ``""`` for a text item, or
    an absolute path to a file Lexlens wrote into its own cache (an image a dataset embeds).
    """

    id: str
    text: str = ""
    image: str = ""
    captions: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    where: str = ""  # "file:line" for messages


@dataclass(frozen=True)
class Skipped(Record):
    """An item left out of the index, and why (file or line, one-line reason)."""

    file: str
    reason: str


#: Skipped items a manifest lists (the first ones; its ``counts.skipped`` counts them all).
MAX_SKIPPED_IN_MANIFEST = 1000


class SkippedItems:
    """The items a build left out: how many, and the first :data:`MAX_SKIPPED_IN_MANIFEST`
    of them in order, the ones its manifest lists (memory stays bounded however many a
    source skips: a million empty rows are a count)."""

    def __init__(self) -> None:
        self.count = 0
        self.first: list[Skipped] = []

    def add(self, item: Skipped) -> None:
        """Count one more skipped item (kept when it is among the first ones)."""
        self.count += 1
        if len(self.first) < MAX_SKIPPED_IN_MANIFEST:
            self.first.append(item)


def id_problem(value: str, what: str = "id") -> str:
    """Why ``value`` cannot be an item's or a query's id (``""`` when it can): an empty id,
    or one holding whitespace — every TREC-format file (qrels, runs) splits on it."""
    if not value:
        return f"an empty {what}"
    if _WHITESPACE.search(value):
        return f"{what} {value!r} holds whitespace (TREC qrels and run files split on it)"
    return ""


def derived_id(path: str) -> str:
    """An id made from a file's path (a folder's image, a row without an ``id``): the path,
    with whitespace and ``%`` written as ``%XX`` (URL-style), so a file named
    ``my photo.jpg`` is kept as ``my%20photo.jpg`` instead of being refused."""
    return _ESCAPED.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), path)


def checked_items(
    items: Iterable[SourceItem | Skipped], on_skip: Callable[[Skipped], None] | None = None
) -> Iterator[SourceItem | Skipped]:
    """The items of any source as an index may store them: an item whose id
    :func:`id_problem` refuses, or whose id came earlier, becomes a :class:`Skipped` naming
    its file and line (``on_skip`` hears of each); the rest pass unchanged."""
    seen: set[bytes] = set()
    for item in items:
        if isinstance(item, SourceItem):
            why = id_problem(item.id)
            if not why:
                key = hashlib.blake2b(item.id.encode("utf-8"), digest_size=8).digest()
                if key in seen:
                    why = f"id {item.id!r} appears again"
                seen.add(key)
            if why:
                item = Skipped(item.where, f"{why}: skipped")
                if on_skip is not None:
                    on_skip(item)
        yield item
