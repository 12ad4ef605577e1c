"""The arguments of the stored collections' entry points checked before anything is read —
and the one check of an index argument every capability uses (:func:`index_argument`: a
stored index or its folder, opened by :func:`~.store.open_index`). Each wrong type or value
is one :class:`~lexlens.models.base.InputError` that names the argument; the kinds every
capability shares (progress, encoder, device, text, path) are
:mod:`lexlens.analysis.core.arguments`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.store import INDEX_WANTED, StoredIndex, open_index
from lexlens.analysis.core.arguments import path_argument, shown
from lexlens.analysis.core.collection import Collection
from lexlens.models.base import InputError


def index_argument(index: Any, argument: str = "index") -> StoredIndex:
    """A stored index given opened, or opened from its folder (:func:`~.store.open_index`);
    anything else is refused naming ``argument``."""
    if not isinstance(index, StoredIndex):
        path_argument(index, argument, INDEX_WANTED)
    return open_index(index)


def collection_argument(collection: Any, argument: str, *, folders: bool = True) -> Collection:
    """Any :class:`~lexlens.analysis.core.collection.Collection` (a stored index, one held in
    memory) and, with ``folders``, a stored index's folder, opened."""
    if folders and isinstance(collection, (str, Path)):
        return index_argument(collection, argument)
    if isinstance(collection, Collection):
        return collection
    wanted = "a stored index, its folder" if folders else "a stored index"
    raise InputError(
        f"{argument} must be {wanted} or a collection held in memory, not {shown(collection)}"
    )


def data_roots(roots: Any) -> list[str | Path] | None:
    """``roots``: ``None`` (no restriction) or a list of folder paths."""
    if roots is None:
        return None
    listed = isinstance(roots, Sequence) and not isinstance(roots, (str, bytes))
    if listed and all(isinstance(r, (str, Path)) and str(r).strip() for r in roots):
        return list(roots)
    raise InputError(f"roots must be a list of folder paths (or None), not {shown(roots)}")


def uploaded_files(files: Any) -> list[tuple[str, bytes]]:
    """``files``: ``None`` or a list of (file name, bytes) pairs."""
    if files is None:
        return []
    if isinstance(files, (list, tuple)):
        pairs = [f for f in files if isinstance(f, (list, tuple)) and len(f) == 2]
        if len(pairs) == len(files) and all(
            isinstance(n, str) and isinstance(d, (bytes, bytearray)) for n, d in pairs
        ):
            return [(n, d) for n, d in pairs]
    raise InputError(f"files must be a list of (file name, bytes) pairs, not {shown(files)}")


def one_of(value: Any, name: str, choices: Sequence[str]) -> str:
    """``value``: one of ``choices``."""
    if isinstance(value, str) and value in choices:
        return value
    raise InputError(f"{name} {value!r}: one of {', '.join(choices)}")
