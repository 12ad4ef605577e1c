"""A large index's inverted postings as read back, their item ids in 16-bit blocks.

Each term's postings list the rows that use it, ascending. Stored as int32 a row costs 4
bytes a posting; stored as its low part ``row mod B`` (uint16, ``B`` =
:data:`POSTINGS_BLOCK` = 65,536 rows) it costs 2, and the high part — which block of ``B``
rows a posting falls in — is shared by a whole run of a term's postings, so it is kept once
per (term, block) cell rather than once per posting: ``postings_blocks.npy``, int64
``[|V| · K + 1]`` with ``K = ⌈N / B⌉`` blocks, entry ``t · K + k`` the position of term
``t``'s first posting in block ``k`` (a cumulative count: cell ``(t, k)`` spans
``[P[t·K + k], P[t·K + k + 1])``; ``P[t·K]`` is the term's start, the last entry the number
of postings). It is the two-level layout of partitioned posting lists — a small header per
partition, short fixed-width ids within it (Ottaviano and Venturini, "Partitioned
Elias–Fano Indexes", SIGIR 2014) — with fixed-width 16-bit ids instead of Elias–Fano codes:
decoding is one ``repeat`` and one addition over the ranges a query reads, nothing else.

A decoded row is the stored row exactly (integer arithmetic), so a search over blocked
postings touches, bounds and rescores the very items it would over int32 ones: its ranking
is the same, bit for bit. The blocks are written when their table's ``8 · (|V| · K + 1)``
bytes are less than the 2 bytes saved on each posting (:func:`blocks_pay`), else the items
are int32 as in indexes written before, and those still read as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Rows per block of posting item ids: each id is stored as ``row mod POSTINGS_BLOCK``.
POSTINGS_BLOCK = 2**16


def block_count(items: int, block: int) -> int:
    """Blocks of ``block`` rows that ``items`` rows fill (the last one possibly part-full)."""
    return -(-items // block)


def blocks_pay(vocab_size: int, items: int, nnz: int, block: int = POSTINGS_BLOCK) -> bool:
    """Whether 16-bit item ids with their block table take fewer bytes than int32 ids:
    the table's ``8 · (|V| · K + 1)`` bytes against the 2 bytes saved on each posting."""
    if items == 0 or nnz == 0 or block > 2**16:
        return False
    return 8 * (vocab_size * block_count(items, block) + 1) < 2 * nnz


@dataclass(frozen=True, eq=False)
class StoredPostings:
    """A stored index's inverted postings: for each term ``t`` its postings
    ``[indptr[t], indptr[t + 1])`` (items ascending) in ``items`` and ``weights`` (float16
    of ``weight / scale``). ``items`` holds the rows (int32), or — when ``blocks`` is given
    (the table of the module docstring, ``block`` rows a block) — their low parts (uint16),
    which :meth:`decode` turns into rows."""

    indptr: np.ndarray
    items: np.ndarray
    weights: np.ndarray
    scale: float
    blocks: np.ndarray | None = None
    block: int = POSTINGS_BLOCK

    def decode(self, low: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """The rows (int32) of the postings ``items[a:b]`` for each ``(a, b)`` of ``starts``
        and ``stops``, concatenated, from what was read of them (``low``); int32 items are
        returned as they are."""
        if self.blocks is None:
            return low
        table = self.blocks
        per_term = (table.shape[0] - 1) // (self.indptr.shape[0] - 1)
        starts, stops = np.asarray(starts, np.int64), np.asarray(stops, np.int64)
        first = np.searchsorted(table, starts, side="right") - 1  # the cell holding a
        spans = np.maximum(np.searchsorted(table, stops, side="left") - first, 0)
        ends = np.cumsum(spans)
        cells = np.arange(int(ends[-1]) if ends.size else 0) + np.repeat(
            first - ends + spans, spans
        )
        begins = np.maximum(table[cells], np.repeat(starts, spans))
        counts = np.maximum(np.minimum(table[cells + 1], np.repeat(stops, spans)) - begins, 0)
        rows = np.repeat(((cells % per_term) * self.block).astype(np.int32), counts)
        rows += low
        return rows

    def term_rows(self, term: int) -> np.ndarray:
        """The rows (ascending) of term ``term``'s postings."""
        a, b = int(self.indptr[term]), int(self.indptr[term + 1])
        return self.decode(np.asarray(self.items[a:b]), np.array([a]), np.array([b]))
