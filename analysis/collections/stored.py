"""What an analysis may ask of a collection in the stored format, beyond what every
collection answers (:class:`~lexlens.analysis.core.collection.Collection`): its folder, its
typed manifest, its CSR arrays (memory-mapped, or held in memory by a re-gated view), the
float16 postings of a large one, its items read in batches, its card.

A collection whose ``path`` is not ``None`` is one (:func:`is_stored`); the stored index
(:mod:`.store`) answers it, and so does its view with other vectors
(``with_vectors``, e.g. re-gated at a smaller k).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, TypeGuard, runtime_checkable

import numpy as np

from lexlens.analysis.collections.manifest import Manifest
from lexlens.analysis.collections.npy_files import NPY_HEADER
from lexlens.analysis.collections.posting_blocks import StoredPostings
from lexlens.analysis.collections.store import MANIFEST, IndexBatch
from lexlens.analysis.core.collection import Collection
from lexlens.models.base import InputError


@runtime_checkable
class StoredCollection(Collection, Protocol):
    """A collection in the stored format: a folder with its manifest and arrays."""

    #: The index folder.
    @property
    def path(self) -> Path: ...

    #: What the build recorded (encoder, vocabulary, gate, source, counts, files).
    @property
    def manifest(self) -> Manifest: ...

    #: Stored non-zero weights over every item.
    @property
    def nnz(self) -> int: ...

    #: The CSR arrays: row pointers (int64 ``[N + 1]``), vocabulary ids (uint16 when the
    #: vocabulary fits, else int32) and weights (float32) of every item, in row order.
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    #: A large index's inverted postings (row pointers by term, items, float16 weights,
    #: their scale; items decoded by ``decode``), or ``None``.
    postings: StoredPostings | None

    def corrupt(self, why: str) -> InputError:
        """The one-line error that says the index is damaged (``why``) and how to mend it."""
        ...

    def rows(self, start: int, stop: int) -> Any:
        """Items ``[start, stop)`` as a scipy CSR matrix (float32)."""
        ...

    def iter_batches(
        self, batch_size: int = 4096, columns: list[str] | None = None
    ) -> Iterator[IndexBatch]:
        """Every item in order, ``batch_size`` at a time, with ids and metadata."""
        ...

    def mean_weights(self, batch_size: int = 65536) -> np.ndarray:
        """Every term's mean gated weight over the collection."""
        ...

    def strongest_readings(self, n: int = 30, evidence_items: int = 20_000) -> list[Any]:
        """The ``n`` strongest terms as words, each with how it reads against the items."""
        ...

    def image_path(self, meta: dict) -> Path | None:
        """Where an item's image is (``None`` for a text item)."""
        ...

    def card(self) -> dict:
        """What the collection holds, for lists and the Collections page."""
        ...

    def with_vectors(self, vectors: Any, gate_k: int, label: str) -> StoredCollection:
        """The same items, metadata and vocabulary with other vectors, held in memory."""
        ...


def is_stored(collection: Collection) -> TypeGuard[StoredCollection]:
    """Whether ``collection`` is in the stored format (it has a folder)."""
    return collection.path is not None


def reencoding_notes(collection: Collection) -> list[str]:
    """What an analysis that re-encodes ``collection``'s texts or queries against its stored
    vectors says of them: an accepted parity mismatch of imported vectors (none for a
    collection Lexlens encoded)."""
    note = collection.manifest.reencoding_note() if is_stored(collection) else None
    return [note] if note else []


#: The stored vectors' files (CSR and norms) and a large index's postings.
VECTOR_FILES = ("indptr.npy", "indices.npy", "data.npy", "norms.npy")
POSTING_FILES = (
    "postings_indptr.npy",
    "postings_items.npy",
    "postings_weights.npy",
    "postings_blocks.npy",
    "postings_scale.json",
)


def index_bytes(collection: Collection) -> int | None:
    """A stored index's bytes on disk (every file, the manifest included); a view re-gated
    in memory (``with_vectors``), the bytes its folder would hold at that gate: the stored
    files with the vectors' arrays replaced by the view's and no postings (as an index built
    at that gate below the postings' threshold); ``None`` for a collection held in memory."""
    if not is_stored(collection):
        return None
    files = dict(collection.manifest.files)
    total = sum(int(v) for v in files.values())
    manifest = collection.path / MANIFEST
    total += manifest.stat().st_size if manifest.is_file() else 0
    if "regated_from" not in collection.manifest.extra:
        return total
    total -= sum(int(files.get(name, 0)) for name in (*VECTOR_FILES, *POSTING_FILES))
    held = (collection.indptr, collection.indices, collection.data, collection.norms)
    return total + sum(NPY_HEADER + int(np.asarray(a).nbytes) for a in held)
