"""What Compare derives from a stored index at a gate k, made once and reused.

A comparison of two stored collections (or two gates of one) needs, per side, the index's
vectors at that gate (the stored ones, or re-gated: :mod:`.regate`), its item ids, and the
side's statistics — semantic deviation, FLOPs and the vocabulary's mean weights — which
read every stored vector. None of these depends on the query, so a second query on the
same sides only searches. They are kept here, per process, in a bounded least-recently
used cache keyed by the index's identity (its resolved folder and a digest of its
manifest, which every build or update rewrites: a changed index is another key, and the
entries of its older state are dropped) and the gate k; statistics also by the text
encoder and Exact@k's k. The queries and judgements a collection keeps are read once per
identity too.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.collections.token_ids import stored_token_ids
from lexlens.analysis.compare.regate import held_bytes, regated_index
from lexlens.analysis.core.results import Progress
from lexlens.analysis.deviation.deviation import deviation_of_index
from lexlens.analysis.deviation.result import DeviationResult
from lexlens.models.base import Encoder

#: Sides kept (two comparisons' worth), and the bytes of re-gated vectors they may hold.
MAX_SIDES = 6
MAX_BYTES = 1 << 30


def index_identity(ix: StoredCollection) -> str:
    """What names an index's current state: its resolved folder and its manifest's digest."""
    manifest = json.dumps(ix.manifest.to_dict(), sort_keys=True, default=str).encode("utf-8")
    return f"{Path(ix.path).resolve()}#{hashlib.sha256(manifest).hexdigest()[:16]}"


def encoder_key(encoder: Encoder) -> str:
    """What names a loaded text encoder in a cache key (its name, folder and device)."""
    return f"{encoder.name}|{encoder.source}|{getattr(encoder, 'device', '')}"


@dataclass
class SideStatistics:
    """A side's collection statistics: its deviation (FLOPs, vocabulary statistics
    included) and every term's mean gated weight."""

    deviation: DeviationResult
    mean_weights: np.ndarray


@dataclass
class GatedSide:
    """One index at one gate k: its vectors (the stored collection, or its view re-gated)
    and its statistics per (text encoder, k of Exact@k); ``memory_bytes``: those of
    re-gated vectors held in memory (0 for memory-mapped stored ones)."""

    target: StoredCollection
    memory_bytes: int = 0
    statistics: dict[tuple[str, int], SideStatistics] = field(default_factory=dict)


@dataclass
class SideCache:
    """A bounded least-recently-used store of :class:`GatedSide` (one per process)."""

    max_sides: int = MAX_SIDES
    max_bytes: int = MAX_BYTES
    sides: OrderedDict[tuple, GatedSide] = field(default_factory=OrderedDict)
    kept: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"hits": 0, "misses": 0})
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def side(
        self,
        ix: StoredCollection,
        k: int,
        encoder: Encoder | None,
        progress: Progress | None = None,
    ) -> GatedSide:
        """``ix`` at gate ``k`` (re-gated from its stored vectors when smaller), made once."""
        identity = index_identity(ix)
        tokens = (
            "stored"
            if ix.modality != "text" or stored_token_ids(ix).present
            else (encoder_key(encoder) if encoder is not None else "none")
        )
        key = (identity, k, tokens)
        found = self._get(key)
        if found is not None:
            return found
        if k == ix.gate_k:
            made = GatedSide(ix)
        else:
            view = regated_index(ix, k, encoder, progress)
            made = GatedSide(view, held_bytes(view))
        self._put(key, made)
        return made

    def statistics(
        self, side: GatedSide, encoder: Encoder, k: int, progress: Progress | None = None
    ) -> SideStatistics:
        """A side's deviation and mean weights with ``encoder`` at Exact@k's ``k``, made once."""
        key = (encoder_key(encoder), k)
        with self.lock:
            found = side.statistics.get(key)
        if found is not None:
            self.counts["hits"] += 1
            return found
        self.counts["misses"] += 1
        made = SideStatistics(
            deviation_of_index(side.target, encoder, k=k, max_rows=0, progress=progress),
            side.target.mean_weights(),
        )
        with self.lock:
            side.statistics[key] = made
        return made

    def per_index(
        self, ix: StoredCollection, what: str, read: Callable[[StoredCollection], Any]
    ) -> Any:
        """``read(ix)``, read once per index state and ``what`` (e.g. its item ids, the
        queries and judgements it keeps)."""
        key = (index_identity(ix), what)
        with self.lock:
            if key in self.kept:
                return self.kept[key]
        found = read(ix)
        with self.lock:
            if len(self.kept) >= 4 * self.max_sides:
                self.kept.pop(next(iter(self.kept)))
            self.kept[key] = found
        return found

    def item_rows(self, ix: StoredCollection) -> dict[str, int]:
        """The row of each item id of ``ix`` (read once per index state)."""
        return self.per_index(
            ix, "rows", lambda i: {str(d): r for r, d in enumerate(i.column("id"))}
        )

    def clear(self) -> None:
        """Forget every side (the next comparison reads the stored vectors again)."""
        with self.lock:
            self.sides.clear()
            self.kept.clear()

    def _get(self, key: tuple) -> GatedSide | None:
        with self.lock:
            found = self.sides.get(key)
            if found is not None:
                self.sides.move_to_end(key)
                self.counts["hits"] += 1
            else:
                self.counts["misses"] += 1
            return found

    def _put(self, key: tuple, side: GatedSide) -> None:
        folder = key[0].rsplit("#", 1)[0]
        with self.lock:
            for old in [o for o in self.sides if o[0] != key[0] and o[0].startswith(folder + "#")]:
                del self.sides[old]  # the same folder in an older state: changed since
            if side.memory_bytes > self.max_bytes:
                return  # too large to keep: used once
            self.sides[key] = side
            while len(self.sides) > self.max_sides or (
                sum(s.memory_bytes for s in self.sides.values()) > self.max_bytes
            ):
                self.sides.popitem(last=False)


#: The process's cache (a page's jobs and a notebook's calls share it).
SIDE_CACHE = SideCache()
