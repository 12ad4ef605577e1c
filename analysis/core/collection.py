"""What an analysis may ask of a collection: one declared protocol for every kind of them.

A collection is items encoded once into one vocabulary and gated (``E = V ⊙ G``): a stored
index on disk (:class:`lexlens.analysis.collections.store.StoredIndex`) or a small collection
held in memory (:class:`lexlens.analysis.collections.memory.MemoryCollection`). Search,
evaluation, deviation and compare read them only through this protocol, so each works on
both, and a new kind of collection plugs in by answering these calls.
"""

from __future__ import annotations

from collections.abc import Sequence
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
