"""What a source yields, before anything is encoded: an item, or an item left out and why."""

from __future__ import annotations

from dataclasses import dataclass

from lexlens.analysis.core.results import Record


@dataclass(frozen=True)
class SourceItem(Record):
    """One item of a source, before encoding.

    ``image`` is a path relative to the source's folder (posix), ``""`` for a text item.
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
