"""Each text item's own input token ids, kept with its stored vector.

An analysis of a stored collection that compares an item's terms with its own tokens
(D2S's Exact@k and Semantic@k) reads them here instead of running the encoder again. The
ids are the text's input tokens as the encoder cut them (``[CLS]``/``[SEP]`` included, up to
its token limit), each as its position in the index's vocabulary (``vocab.txt``; an input
token outside it, which can never be a term, is left out), one ragged array for the index:

======================= ===============================================================
``token_indptr.npy``    row pointers, int64 ``[N + 1]``
``token_ids.npy``       the ids, uint16 when the vocabulary fits (≤ 65,536 ids), else
                        int32; item ``i``'s are ``token_ids[indptr[i]:indptr[i + 1]]``
======================= ===============================================================

An item with no row (an image, or a text whose ids were not given to the writer) has an
empty one; an index built before these files existed has neither, and its readers
tokenise the stored texts again (the tokenizer only, no model forward).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.manifest import Manifest

TOKEN_IDS = "token_ids.npy"
TOKEN_INDPTR = "token_indptr.npy"


#: Vocabularies whose maps are kept: (the list, each id's first id with its string,
#: string → first id), keyed by the list's id.
_MAPS: dict[int, tuple[list[str], np.ndarray, dict[str, int]]] = {}


def _vocab_maps(vocab: list[str]) -> tuple[np.ndarray, dict[str, int]]:
    cached = _MAPS.get(id(vocab))
    if cached is None or cached[0] is not vocab:
        positions: dict[str, int] = {}
        for i, t in enumerate(vocab):
            positions.setdefault(t, i)
        canon = np.fromiter((positions[t] for t in vocab), dtype=np.int64, count=len(vocab))
        if len(_MAPS) >= 8:
            _MAPS.clear()
        cached = _MAPS[id(vocab)] = (vocab, canon, positions)
    return cached[1], cached[2]


def vocab_positions(vocab: list[str]) -> dict[str, int]:
    """Token string → its first position in ``vocab`` (built once per vocabulary list)."""
    return _vocab_maps(vocab)[1]


def canonical_ids(vocab: list[str]) -> np.ndarray:
    """Each vocabulary id's first id with the same token string (tokens compare as strings)."""
    return _vocab_maps(vocab)[0]


def units_to_ids(units: Sequence[str], vocab: list[str]) -> np.ndarray:
    """Input tokens (strings) as positions in ``vocab``, int32; tokens outside it left out."""
    positions = vocab_positions(vocab)
    return np.fromiter((positions[u] for u in units if u in positions), dtype=np.int32)


def token_dtype(vocab_size: int) -> np.dtype:
    """The compact dtype of token ids for a vocabulary of ``vocab_size`` entries."""
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.int32)


class StoredTokenIds:
    """The token ids of an opened index (memory-mapped), or ``None`` rows when it has none."""

    def __init__(self, path: Path, manifest: Manifest, corrupt: Any) -> None:
        files = manifest.files
        self.present = TOKEN_IDS in files and TOKEN_INDPTR in files
        self.indptr: np.ndarray | None = None
        self.ids: np.ndarray | None = None
        if not self.present:
            return
        n, v = manifest.counts.items, manifest.vocab.size
        indptr = np.load(path / TOKEN_INDPTR, mmap_mode="r", allow_pickle=False)
        ids = np.load(path / TOKEN_IDS, mmap_mode="r", allow_pickle=False)
        if indptr.dtype != np.int64 or indptr.shape != (n + 1,):
            raise corrupt(f"{TOKEN_INDPTR} holds {indptr.dtype}{indptr.shape}, expected {n + 1}")
        if ids.dtype != token_dtype(v) or ids.ndim != 1:
            raise corrupt(f"{TOKEN_IDS} holds {ids.dtype}{ids.shape}, expected {token_dtype(v)}")
        if n and (int(indptr[0]) != 0 or int(indptr[-1]) != ids.shape[0]):
            raise corrupt(f"{TOKEN_INDPTR} does not span {TOKEN_IDS}")
        self.indptr, self.ids, self.vocab_size, self.corrupt = indptr, ids, v, corrupt

    def rows(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Items ``[start, stop)``: (row pointers from 0, ids int64), or ``None`` when the
        index keeps no token ids."""
        if self.indptr is None or self.ids is None:
            return None
        pointers = np.asarray(self.indptr[start : stop + 1], dtype=np.int64)
        if np.any(np.diff(pointers) < 0):
            raise self.corrupt(f"{TOKEN_INDPTR} goes backwards in items {start}–{stop - 1}")
        ids = np.asarray(self.ids[pointers[0] : pointers[-1]], dtype=np.int64)
        if ids.size and int(ids.max()) >= self.vocab_size:
            raise self.corrupt(f"{TOKEN_IDS}: items {start}–{stop - 1} have ids out of range")
        return pointers - pointers[0], ids

    def row(self, i: int) -> np.ndarray | None:
        """Item ``i``'s token ids (int32), or ``None`` when the index keeps none."""
        rows = self.rows(i, i + 1)
        return None if rows is None else rows[1].astype(np.int32)


#: The token ids of each opened index (forgotten with the index).
_BY_INDEX: weakref.WeakKeyDictionary[Any, StoredTokenIds] = weakref.WeakKeyDictionary()


def stored_token_ids(index: Any) -> StoredTokenIds:
    """The token ids an opened :class:`~.store.StoredIndex` keeps (opened once per index)."""
    found = _BY_INDEX.get(index)
    if found is None:
        found = StoredTokenIds(index.path, index.manifest, index.corrupt)
        _BY_INDEX[index] = found
    return found


def ragged(rows: Sequence[np.ndarray | Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ids as (row pointers int64 ``[n + 1]``, ids int64)."""
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    ids = np.concatenate([np.asarray(r, dtype=np.int64) for r in rows]) if rows else None
    return indptr, ids if ids is not None else np.zeros(0, np.int64)
