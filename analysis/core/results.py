"""The result contract every analysis follows.

An analysis returns one :class:`Result`: a frozen dataclass whose JSON document is derived
from its fields (as LIT's ``dtypes`` derive theirs), so the CLI's ``--json``, a page's
download and a notebook's ``to_dict()`` are the same document by construction. Small
nested records (a term, a contribution, a hit) are :class:`Record` s. A field that the JSON
leaves out is declared with :func:`internal`; a field whose JSON key differs from its
Python name (kept for documents older than the name) with :func:`json_key`.

A result's files (JSON, CSV tables, an HTML report) come from its ``files()`` method and
are written by :func:`lexlens.analysis.core.outputs.write_files`: one way for every
analysis, from the CLI's ``--out`` and a page's downloads alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

# Progress (the done fraction of the whole work, 0..1, and a short message; every analysis
# that takes long accepts one, and a job may raise from it to cancel the work) is defined in
# the lowest layer, where codebook fitting reports progress too: one type, re-exported here.
from lexlens.models.base import Progress as Progress

_INTERNAL = "lexlens_internal"
_KEY = "lexlens_json_key"


def internal(**kwargs: Any) -> Any:
    """A dataclass field kept on the result but left out of its JSON document."""
    return dataclasses.field(metadata={_INTERNAL: True}, **kwargs)


def json_key(key: str, **kwargs: Any) -> Any:
    """A dataclass field written under another JSON key than its Python name."""
    return dataclasses.field(metadata={_KEY: key}, **kwargs)


def plain(value: Any) -> Any:
    """Records become dicts, recursively through lists and dicts; anything else is as is."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


@dataclasses.dataclass(frozen=True)
class Record:
    """A small typed record whose JSON document is derived from its fields."""

    def to_dict(self) -> dict:
        """The JSON document: every field but :func:`internal` ones, in declaration order."""
        return {
            f.metadata.get(_KEY, f.name): plain(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if not f.metadata.get(_INTERNAL)
        }


@dataclasses.dataclass(frozen=True)
class Result(Record):
    """What one analysis returns: a record with the files it can be saved as."""

    #: The stem of the JSON file :meth:`files` writes (``terms.json``, ``search.json``…).
    file_stem: ClassVar[str] = "result"

    def files(self) -> dict[str, bytes]:
        """File name → bytes: the JSON document; results with tables or reports add theirs."""
        from lexlens.analysis.core.outputs import json_bytes

        return {f"{self.file_stem}.json": json_bytes(self)}


def progress_part(
    progress: Progress | None, lo: float, hi: float, prefix: str = ""
) -> Progress | None:
    """``progress`` mapped onto ``[lo, hi]`` of the whole bar, each message after ``prefix``."""
    if progress is None:
        return None

    def inner(fraction: float, message: str) -> None:
        progress(lo + (hi - lo) * min(max(float(fraction), 0.0), 1.0), prefix + message)

    return inner
