"""What an analysis may ask of a collection: one declared protocol for every kind of them.

A collection is items encoded once into one vocabulary and gated (``E = V ⊙ G``): a stored
index on disk (:mod:`lexlens.analysis.collections.store`) or a small collection held in
memory (:mod:`lexlens.analysis.collections.memory`). Every module outside
``analysis/collections/`` reads them only through this protocol — and, for what only a
collection in the stored format has (its folder, its typed manifest, its memory-mapped
arrays), through :class:`lexlens.analysis.collections.stored.StoredCollection`, which a
collection whose ``path`` is not ``None`` answers. None of them names the classes, reads a
manifest's keys or opens an index's files by path (``tests/core/test_collection_contract.py``
reads the code for it), so each analysis works on every kind, and a new kind plugs in by
answering these calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Collection(Protocol):
    """Items' gated sparse vectors in one vocabulary, with their metadata."""

    #: "text", "image" or "features": what the items are.
    @property
    def modality(self) -> str: ...

    #: The token of every dimension.
    @property
    def vocab(self) -> list[str]: ...

    #: The vocabulary's size (the vectors' width).
    @property
    def vocab_size(self) -> int: ...

    #: Whether items carry labels (exclusion metrics need them).
    @property
    def has_labels(self) -> bool: ...

    #: The registry name (or path) of the encoder that made the vectors.
    @property
    def encoder_name(self) -> str: ...

    #: Each item's L2 norm (float32, one per row).
    @property
    def norms(self) -> np.ndarray: ...

    def __len__(self) -> int: ...

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(columns, weights) of item ``i``'s vector."""
        ...

    def meta(self, rows: Sequence[int], columns: list[str] | None = None) -> list[dict]:
        """The metadata (id, text, image, labels…) of the items at ``rows``."""
        ...

    def column(self, name: str) -> list[Any]:
        """One metadata column for every item, in row order."""
        ...

    def describe(self) -> dict:
        """A short description for results (name or path, items, encoder)."""
        ...

    #: How messages name it (the folder as given, or the collection's name).
    @property
    def label(self) -> str: ...

    #: The folder it is stored in (a :class:`StoredCollection`), or ``None``: held in memory.
    @property
    def path(self) -> Path | None: ...

    #: The gate k its vectors were made with (-1: ungated).
    @property
    def gate_k(self) -> int: ...

    #: The spec that loads the encoder that made the vectors (its name when none was kept).
    @property
    def encoder_spec(self) -> str: ...

    #: The sha256 of the vocabulary, one token a line: two collections (or a collection and
    #: an encoder) share a space iff equal.
    @property
    def vocab_hash(self) -> str: ...

    #: What the collection holds, as a short digest: the same for a copy, another for any
    #: other vectors, vocabulary, encoder or gate.
    @property
    def fingerprint(self) -> str: ...

    #: The words its encoder knows it expresses (empty when it kept none).
    @property
    def known_words(self) -> frozenset[str]: ...

    #: The queries and judgements it keeps beside its items (``queries.jsonl``,
    #: ``qrels.tsv``: built from a benchmark), or ``None``.
    @property
    def benchmark_files(self) -> tuple[Path, Path] | None: ...

    def matrix(self) -> Any:
        """Every item's vector as one scipy CSR matrix ``[items × |V|]`` (float32)."""
        ...

    def kept_benchmark(self) -> dict | None:
        """How many queries and judgements it keeps (``queries``, ``judged_queries``,
        ``judgements``; ``kind`` and ``split`` when recorded), or ``None``."""
        ...
