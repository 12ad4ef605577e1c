"""Each item's hit fields — what a hit shows and reads its words from — kept so that one
item's are read without decoding thousands of others.

A search shows each hit's id, kind, image, text, captions and labels. Read from the
Parquet metadata, every hit decodes its whole row group (2,048 rows, a column chunk per
field); here the items are cut into small blocks, each compressed on its own, so a hit
costs one block of a few dozen items:

======================= ===============================================================
``records.bin``         zstd frames, one per block; a frame is the UTF-8 JSON array of
                        its items, each the array of :data:`RECORD_FIELDS` in that order
``records_index.npy``   int64 ``[B + 1, 4]`` stored flat: for each block boundary the
                        items before it, the frame's byte offset, the JSON's byte offset,
                        and the CRC-32 of the JSON of the block it closes (the first row
                        zeros, the last the item count and both totals)
======================= ===============================================================

A block whose JSON does not match its CRC-32 (a damaged file that keeps its size) is
refused, never read as other text.

A field held here and not needed by a columnar scan (:data:`MOVED_FIELDS`: text and
captions) is left out of ``items.parquet``, so nothing is stored twice but the small
fields a scan reads by column (id, kind, image, labels). An index built before these
files existed has neither, and every field is read from its Parquet file as before.
"""

from __future__ import annotations

import array
import mmap
import operator
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from lexlens.analysis.collections.npy_files import write_npy
from lexlens.models.base import InputError

RECORDS = "records.bin"
RECORDS_INDEX = "records_index.npy"
#: The fields of a record, in the order each record lists them.
RECORD_FIELDS = ("id", "kind", "image", "text", "captions", "labels")
#: The fields whose values are lists of strings.
LIST_FIELDS = ("captions", "labels")
#: Fields held only in the records (``items.parquet`` of an index with records lacks them).
MOVED_FIELDS = ("text", "captions")
#: Every metadata field an index writes, in the order its rows list them.
ITEM_FIELDS = (
    "id",
    "kind",
    "image",
    "text",
    "captions",
    "labels",
    "content_key",
    "size",
    "mtime_ns",
    "nnz",
)
#: A block closes at this many items, or sooner at :data:`BLOCK_BYTES` of JSON: a hit
#: decodes its block's items and no more.
BLOCK_ITEMS = 32
BLOCK_BYTES = 16 * 1024
#: Blocks an opened index keeps decoded (the most recently read).
BLOCKS_CACHED = 256


def _codec() -> Any:
    import pyarrow as pa  # heavy: pyarrow loads on first use

    return pa.Codec("zstd", compression_level=3)


class RecordWriter:
    """Streams items' records into ``records.bin`` a block at a time (bounded memory)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._file = open(folder / RECORDS, "wb")  # noqa: SIM115 (closed by close/abort)
        self._codec = _codec()
        self._pending: list[list] = []
        self._pending_bytes = 0
        # Per boundary: items, frame bytes, JSON bytes, the closed block's CRC-32.
        self._bounds = array.array("q", [0, 0, 0, 0])

    def add(self, row: dict) -> None:
        """One item's metadata row (its :data:`RECORD_FIELDS` are kept)."""
        record = [row.get(name) for name in RECORD_FIELDS]
        self._pending.append(record)
        strings = [record[0], record[2], record[3], *(record[4] or []), *(record[5] or [])]
        self._pending_bytes += 16 + sum(len(v) for v in strings if isinstance(v, str))
        if len(self._pending) >= BLOCK_ITEMS or self._pending_bytes >= BLOCK_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        data = orjson.dumps(self._pending)
        frame = self._codec.compress(data, asbytes=True)
        self._file.write(frame)
        items, written, raw, _ = self._bounds[-4:]
        self._bounds.extend(
            [items + len(self._pending), written + len(frame), raw + len(data), zlib.crc32(data)]
        )
        self._pending, self._pending_bytes = [], 0

    def close(self) -> dict[str, int]:
        """Finish both files (fsynced); returns ``{file name: bytes}``."""
        self._flush()
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        index = np.asarray(self._bounds, np.int64)
        return {
            RECORDS: int(self._bounds[-3]),
            RECORDS_INDEX: write_npy(self.folder / RECORDS_INDEX, index),
        }

    def abort(self) -> None:
        """Close the file unfinished, after a failed build."""
        self._file.close()


class StoredRecords:
    """The records of an opened index: its block bounds in memory, its frames
    memory-mapped; blocks are decoded as items are asked for (the last 256 kept)."""

    def __init__(self, folder: Path, items: int, corrupt: Callable[[str], InputError]) -> None:
        self._corrupt = corrupt
        flat = np.load(folder / RECORDS_INDEX, allow_pickle=False)
        if flat.dtype != np.int64 or flat.ndim != 1 or flat.size % 4 or flat.size < 4:
            raise corrupt(f"{RECORDS_INDEX} holds {flat.dtype}{flat.shape}, not block bounds")
        bounds = flat.reshape(-1, 4)
        size = (folder / RECORDS).stat().st_size
        if bounds[0].any() or int(bounds[-1, 0]) != items or int(bounds[-1, 1]) != size:
            raise corrupt(
                f"{RECORDS_INDEX} does not span the {items:,} items and {size:,} bytes of {RECORDS}"
            )
        steps = np.diff(bounds, axis=0)
        if steps.size and (np.any(steps[:, 0] <= 0) or np.any(steps[:, 1:3] < 0)):
            raise corrupt(f"{RECORDS_INDEX}: block bounds go backwards")
        self._bounds = bounds
        self._starts = np.ascontiguousarray(bounds[:, 0])
        self._codec = _codec()
        self._blocks: dict[int, list] = {}
        self._map: mmap.mmap | None = None
        if size:
            with open(folder / RECORDS, "rb") as handle:
                self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)

    @property
    def blocks(self) -> int:
        """Blocks the items are cut into."""
        return len(self._bounds) - 1

    def _block(self, b: int) -> list:
        """Block ``b``'s records, decoded (or kept from a recent read)."""
        kept = self._blocks.get(b)
        if kept is not None:
            return kept
        (first, start, raw_start, _), (stop, end, raw_end, crc) = self._bounds[b : b + 2].tolist()
        assert self._map is not None  # a block exists, so the file holds bytes
        try:
            data = self._codec.decompress(
                self._map[start:end], decompressed_size=raw_end - raw_start, asbytes=True
            )
            if zlib.crc32(data) != crc:
                raise ValueError("its CRC-32 does not match")
            records = orjson.loads(data)
        except Exception as exc:  # pyarrow and orjson raise their own types for damaged bytes
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise self._corrupt(f"{RECORDS}: block {b} is damaged ({why})") from None
        fields = len(RECORD_FIELDS)
        if (
            not isinstance(records, list)
            or len(records) != stop - first
            or any(not isinstance(r, list) or len(r) != fields for r in records)
        ):
            raise self._corrupt(f"{RECORDS}: block {b} does not hold its {stop - first} items")
        if len(self._blocks) >= BLOCKS_CACHED:
            self._blocks.pop(next(iter(self._blocks)))
        self._blocks[b] = records
        return records

    def rows(self, rows: list[int], fields: list[str]) -> list[dict]:
        """The ``fields`` of each item at ``rows`` (in range), in that order, as dicts."""
        positions = [RECORD_FIELDS.index(f) for f in fields]
        wanted = np.asarray(rows, np.int64)
        blocks = np.searchsorted(self._starts, wanted, side="right") - 1
        places = (wanted - self._starts[blocks]).tolist()
        # the lists (captions, labels) are copied: a caller may change what it is given,
        # never the blocks kept for the next read
        lists = [f for f in fields if f in LIST_FIELDS]
        pick = operator.itemgetter(*positions)
        one = len(positions) == 1
        out = []
        decoded: dict[int, list] = {}
        for b, place in zip(blocks.tolist(), places, strict=True):
            block = decoded.get(b)
            if block is None:
                block = decoded[b] = self._block(b)
            values = pick(block[place])
            item = {fields[0]: values} if one else dict(zip(fields, values, strict=True))
            for f in lists:
                if item[f] is not None:
                    item[f] = list(item[f])
            out.append(item)
        return out

    def column(self, field: str) -> list:
        """One field of every item, in order (each block decoded once, none kept)."""
        position = RECORD_FIELDS.index(field)
        kept, self._blocks = self._blocks, {}
        try:  # the blocks decoded here are dropped, so their lists are the caller's own
            return [record[position] for b in range(self.blocks) for record in self._block(b)]
        finally:
            self._blocks = kept
