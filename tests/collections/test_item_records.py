"""Each item's hit fields kept in small compressed blocks (``records.bin``): every field
reads back as it was given (empty, very long, non-ASCII texts, captions, labels, a missing
text), by row, by column and in batches, through both ways of writing an index; the file is
the documented zstd-framed JSON (decoded here with pyarrow, json and zlib alone); an index
written before the records reads and searches exactly as one with them; a truncated or
damaged file is refused in one line and never read as other text."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lexlens.analysis.collections import store, store_writer
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.collections.store_writer import IndexHeader, write_atomically, write_index
from lexlens.analysis.datasets.items import SkippedItems
from lexlens.analysis.search.search import search
from lexlens.models.base import InputError
from tests.collections.older_index import make_older
from tests.collections.test_store_reads import VOCAB, CountingEncoder

#: Texts a store must keep exactly: empty, far longer than a block, CJK and emoji (ZWJ and
#: skin-tone sequences), combining accents, line breaks, quotes and backslashes.
SPECIAL = [
    "",
    "w1 " + "long " * 60_000 + "w2",
    "猫が好き 🐈‍⬛ w3 中文 w4 한국어",
    "cafe\u0301 naïve w5 👍🏽 😀",
    'line\nbreak "quoted" back\\slash w6\ttab',
]
ITEMS = 150


def _items(n: int = ITEMS) -> list[dict]:
    """Every field of ``n`` items as the writer is given them (those it adds: defaults)."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        cols = np.sort(rng.choice(len(VOCAB), size=int(rng.integers(1, 5)), replace=False))
        if i % 10 < len(SPECIAL):
            text = SPECIAL[i % 10]
        else:
            text = f"item {i} " + " ".join(VOCAB[c] for c in cols)
        out.append(
            {
                "id": f"d{i}",
                "kind": "text",
                "image": "",
                "text": None if i == 17 else text,
                "captions": ["一只猫 🐱", "a cat"] if i % 7 == 3 else [],
                "labels": ["猫", "w2"] if i % 5 == 1 else [],
                "content_key": "",
                "size": 0,
                "mtime_ns": 0,
                "nnz": int(cols.size),
                "_cols": cols.astype(np.int32),
                "_weights": rng.uniform(0.1, 2.0, cols.size).astype(np.float32),
            }
        )
    return out


def _fields(item: dict) -> dict:
    return {k: v for k, v in item.items() if not k.startswith("_")}


def _by_rows(folder, items):
    """An index of ``items`` written item by item (``add``), row groups of 16."""
    rows = ((_fields(m), m["_cols"], m["_weights"]) for m in items)
    write_index(folder, VOCAB, rows, encoder={"name": "counting"})
    return open_index(folder)


def _by_batches(folder, items):
    """The same items written 40 at a time (``add_rows``, as a vector import writes)."""

    def fill(writer):
        for start in range(0, len(items), 40):
            part = items[start : start + 40]
            counts = [m["nnz"] for m in part]
            indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            vectors = (
                indptr,
                np.concatenate([m["_cols"] for m in part]),
                np.concatenate([m["_weights"] for m in part]),
            )
            texts = [m["text"] for m in part]
            writer.add_rows([m["id"] for m in part], texts, vectors, lambda n: f"item {n}")
        return writer.count, 0, SkippedItems()

    header = IndexHeader(
        encoder={"name": "counting", "fingerprint": "", "capabilities": []},
        gate_k=-1,
        modality="text",
        source={"path": "", "root": "", "kind": "external", "fingerprint": ""},
    )
    write_atomically(folder, VOCAB, fill, header)
    return open_index(folder)


@pytest.fixture(autouse=True)
def small_row_groups(monkeypatch):
    monkeypatch.setattr(store_writer, "ROW_GROUP", 16)


@pytest.mark.parametrize("write", [_by_rows, _by_batches], ids=["add", "add_rows"])
def test_every_field_reads_back_as_given_by_row_column_and_batch(tmp_path, write):
    items = _items()
    if write is _by_batches:  # a vector import's items: texts only, no captions or labels
        items = [m | {"captions": [], "labels": [], "text": m["text"] or ""} for m in items]
    ix = write(tmp_path / "ix", items)
    assert ix.records is not None and ix.records.blocks > ITEMS // 32
    expected = [_fields(m) | {"row": r} for r, m in enumerate(items)]
    assert ix.meta(range(ITEMS)) == expected
    assert [list(m) for m in ix.meta([5, 0])] == [list(expected[0])] * 2  # the fields' order
    rows = list(range(ITEMS))
    random.Random(3).shuffle(rows)
    picked = ix.meta(rows, ["text", "id", "nnz"])
    assert picked == [{k: expected[r][k] for k in ("text", "id", "nnz", "row")} for r in rows]
    for name in ("id", "kind", "image", "text", "captions", "labels", "nnz"):
        assert ix.column(name) == [m[name] for m in items], name
    batches = list(ix.iter_batches(batch_size=33, columns=["id", "text", "captions"]))
    assert [m["text"] for b in batches for m in b.meta] == [m["text"] for m in items]
    assert [b.ids for b in batches][-1] == [m["id"] for m in items[132:]]
    # the long text is held once: the Parquet file has no text or captions column
    assert {"text", "captions"}.isdisjoint(pq.read_schema(ix.path / "items.parquet").names)
    assert ix.path.joinpath("records.bin").stat().st_size < 60_000  # 300,000 chars compressed
    assert set(ix.manifest.files) >= {"records.bin", "records_index.npy"}
    with pytest.raises(KeyError, match="'colour' does not exist"):
        ix.meta([0], ["id", "colour"])


def test_the_records_file_is_zstd_framed_json_blocks_with_their_crc(tmp_path):
    items = _items()
    ix = _by_rows(tmp_path / "ix", items)
    bounds = np.load(ix.path / "records_index.npy").reshape(-1, 4)
    data = (ix.path / "records.bin").read_bytes()
    codec = pa.Codec("zstd")
    decoded = []
    for (first, start, raw_start, _), (stop, end, raw_end, crc) in zip(
        bounds[:-1], bounds[1:], strict=True
    ):
        raw = codec.decompress(data[start:end], decompressed_size=raw_end - raw_start)
        assert zlib.crc32(raw.to_pybytes()) == crc
        block = json.loads(raw.to_pybytes().decode("utf-8"))
        assert len(block) == stop - first
        decoded.extend(block)
    assert bounds[0].tolist() == [0, 0, 0, 0] and bounds[-1, :2].tolist() == [ITEMS, len(data)]
    fields = ("id", "kind", "image", "text", "captions", "labels")
    assert decoded == [[m[f] for f in fields] for m in items]


def test_an_index_written_before_the_records_reads_and_searches_the_same(tmp_path):
    items = _items()
    new = _by_rows(tmp_path / "new", items)
    shutil.copytree(new.path, tmp_path / "old")
    make_older(tmp_path / "old", [_fields(m) for m in items], row_group=16)
    old = open_index(tmp_path / "old")
    assert old.records is None and "text" in pq.read_schema(old.path / "items.parquet").names
    rows = [149, 0, 17, 1, 33, 31, 32, 64, 1]
    assert new.meta(rows) == old.meta(rows)
    assert new.meta(rows, ["text", "labels"]) == old.meta(rows, ["text", "labels"])
    for name in ("id", "text", "captions", "labels", "nnz"):
        assert new.column(name) == old.column(name), name
    assert [b.meta for b in new.iter_batches(50, ["id", "text"])] == [
        b.meta for b in old.iter_batches(50, ["id", "text"])
    ]
    for query in ("w3 w3 w7 w0", "w1 w2", "w5 w6 w4"):
        ours = search(new, CountingEncoder(), query, top=20, gate_k=-1)
        theirs = search(old, CountingEncoder(), query, top=20, gate_k=-1)
        assert ours.results and [dataclasses.asdict(h) for h in ours.results] == [
            dataclasses.asdict(h) for h in theirs.results
        ]
        assert [h.text for h in ours.results] == [items[h.row]["text"] or "" for h in ours.results]


def _one_line(call, *needles: str) -> str:
    with pytest.raises(InputError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, message
    return message


def test_a_truncated_records_file_is_refused_in_one_line(tmp_path):
    ix = _by_rows(tmp_path / "ix", _items())
    path = ix.path / "records.bin"
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:-10])
    _one_line(lambda: open_index(ix.path), "records.bin has", f"expected {size:,}", "rebuild")
    # a manifest that agrees with the shorter file: the blocks' bounds do not
    manifest = json.loads((ix.path / "manifest.json").read_text())
    manifest["files"]["records.bin"] = size - 10
    del manifest["checksums"]["records.bin"]
    (ix.path / "manifest.json").write_text(json.dumps(manifest))
    _one_line(lambda: open_index(ix.path), "records_index.npy does not span", "rebuild")


def test_a_missing_records_index_is_refused_in_one_line(tmp_path):
    ix = _by_rows(tmp_path / "ix", _items())
    (ix.path / "records_index.npy").unlink()
    _one_line(lambda: open_index(ix.path), "records_index.npy is missing")


def _rewrite_block(folder, block: int, change) -> None:
    """records.bin with block ``block``'s JSON changed by ``change`` (still valid zstd and
    JSON), its bounds moved to fit, its CRC the original's; the manifest's size updated."""
    bounds = np.load(folder / "records_index.npy").reshape(-1, 4)
    data = (folder / "records.bin").read_bytes()
    codec = pa.Codec("zstd")
    raws = []
    for (_, start, raw_start, _), (_, end, raw_end, _) in zip(bounds[:-1], bounds[1:], strict=True):
        raw = codec.decompress(data[start:end], decompressed_size=raw_end - raw_start)
        raws.append(raw.to_pybytes())
    raws[block] = change(raws[block])
    frames = [codec.compress(r, asbytes=True) for r in raws]
    bounds[1:, 1] = np.cumsum([len(f) for f in frames])
    bounds[1:, 2] = np.cumsum([len(r) for r in raws])
    (folder / "records.bin").write_bytes(b"".join(frames))
    store_writer.write_npy(folder / "records_index.npy", bounds.ravel())
    manifest = json.loads((folder / "manifest.json").read_text())
    for name in ("records.bin", "records_index.npy"):
        manifest["files"][name] = (folder / name).stat().st_size
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_a_damaged_block_is_refused_and_never_read_as_other_text(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "VERIFY_BYTES", 0)  # as a file too large to checksum at open
    items = _items()
    ix = _by_rows(tmp_path / "ix", items)
    block = int(np.searchsorted(ix.records._starts, 46, side="right") - 1)

    def other_text(raw: bytes) -> bytes:
        assert b"item 46 " in raw
        return raw.replace(b"item 46 ", b"item 47 ")

    _rewrite_block(ix.path, block, other_text)
    damaged = open_index(ix.path)
    _one_line(lambda: damaged.meta([46]), f"records.bin: block {block} is damaged", "CRC")
    _one_line(lambda: damaged.column("text"), "is damaged")
    assert damaged.meta([0, 149], ["text"]) == [
        {"text": items[r]["text"], "row": r} for r in (0, 149)
    ]
    # bytes flipped inside a frame: refused too (by zstd or by the CRC)
    ix = _by_rows(tmp_path / "flipped", items)
    bounds = np.load(ix.path / "records_index.npy").reshape(-1, 4)
    data = bytearray((ix.path / "records.bin").read_bytes())
    middle = (int(bounds[2, 1]) + int(bounds[3, 1])) // 2
    data[middle : middle + 4] = bytes(b ^ 0x5A for b in data[middle : middle + 4])
    (ix.path / "records.bin").write_bytes(bytes(data))
    flipped = open_index(ix.path)
    _one_line(lambda: flipped.meta([int(bounds[2, 0])]), "records.bin: block 2 is damaged")


def test_a_damaged_file_within_the_checked_size_is_refused_at_open(tmp_path):
    ix = _by_rows(tmp_path / "ix", _items())
    data = bytearray((ix.path / "records.bin").read_bytes())
    data[100] ^= 0xFF
    (ix.path / "records.bin").write_bytes(bytes(data))
    _one_line(lambda: open_index(ix.path), "records.bin was changed after the index was built")


def test_an_index_with_records_is_freed_as_soon_as_it_is_dropped(tmp_path):
    """No reference cycle keeps an opened index (and its memory maps) alive until a
    garbage collection."""
    import gc
    import weakref

    ix = _by_rows(tmp_path / "ix", _items(40))
    assert ix.meta([3], ["text"])[0]["text"] == SPECIAL[3]
    gc.disable()
    try:
        dropped = weakref.ref(ix)
        del ix
        assert dropped() is None
    finally:
        gc.enable()


def test_a_changed_list_of_one_read_never_reaches_the_next(tmp_path):
    items = _items(40)
    ix = _by_rows(tmp_path / "ix", items)
    first = ix.meta([3, 6])
    first[0]["captions"].append("changed")
    first[1]["labels"].append("changed")
    ix.column("captions")[3].append("changed")
    assert ix.meta([3, 6], ["captions", "labels"]) == [
        {"captions": items[r]["captions"], "labels": items[r]["labels"], "row": r} for r in (3, 6)
    ]
