"""The stored index format (version 2) and its reader.

An index is a folder:

======================= =========================================================
``manifest.json``       format and version, encoder name + weight fingerprint,
                        vocabulary hash, gate k, source fingerprint, counts, dates,
                        every file's size (written last: an index without it is not
                        an index)
``indptr.npy``          CSR row pointers, int64 ``[N + 1]``
``indices.npy``         CSR column (vocabulary) ids ``[nnz]``: uint16 when the
                        vocabulary has at most 65,536 terms (every BERT WordPiece
                        vocabulary: 30,522), else int32
``data.npy``            CSR weights of the gated vectors ``E = V ⊙ G``, float32 ``[nnz]``
``norms.npy``           L2 norm of each item's gated vector, float32 ``[N]``
``items.parquet``       one row per item: id, kind, image, text, captions, labels,
                        content key (what was encoded), file size and mtime (text and
                        captions in the records instead, when the index has them)
``records*``            each item's hit fields in small compressed blocks, so that a
                        hit reads a few dozen items, not a row group (:mod:`.records`)
``vocab.txt``           the output vocabulary, one token per line
``postings_*.npy``,     (large indexes only) the inverted index, for fast search: for
``postings_scale.json`` each term (``postings_indptr.npy``, int64 ``[|V| + 1]``) its
                        items ascending (``postings_items.npy``) and their weights
                        (``postings_weights.npy``, float16 of ``weight / scale``); the
                        items as uint16 within blocks of 65,536 rows, the blocks in
                        ``postings_blocks.npy`` (:mod:`.posting_blocks`), or int32
======================= =========================================================

Each array's dtype is read from its file: an index written before version 2 (int32 column
ids and posting items) opens and ranks as it did. A search over the compact layout reads
the same rows and weights — ids are integers, decoded exactly — so its rankings are the
same, bit for bit; it stores 6 bytes a non-zero in its CSR and 4 in its postings, where the
reference scipy CSR (int32 ids, float32 weights) takes 8.

The arrays are plain ``.npy`` files opened memory-mapped, so an index of a million items
opens in milliseconds and memory stays O(what a query touches). Writing one is
:mod:`.store_writer`; encoding a source into one is :mod:`.indexing`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.home import collections_dir, stored_names
from lexlens.analysis.collections.manifest import Manifest
from lexlens.analysis.collections.posting_blocks import StoredPostings, block_count
from lexlens.analysis.collections.records import (
    ITEM_FIELDS,
    RECORD_FIELDS,
    RECORDS,
    RECORDS_INDEX,
    StoredRecords,
)
from lexlens.analysis.collections.token_ids import token_dtype
from lexlens.analysis.core.arguments import path_argument
from lexlens.analysis.core.inputs import read_bytes
from lexlens.analysis.core.words import WordReader, item_words, top_terms
from lexlens.analysis.datasets.trec import Problems, read_qrels, read_queries
from lexlens.models.base import InputError, texts_digest

FORMAT = "lexlens-index"
#: 2: column ids uint16 when the vocabulary fits, posting items in 16-bit blocks (1 still read).
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
#: What an index argument may be (the one wording of its refusal).
INDEX_WANTED = "a stored index or its folder"
#: Rows per Parquet row group written: metadata of any item is one row group read away,
#: and a small group keeps that read short (a hit's text is decoded with 2,047 others, not
#: 8,191). Reading goes by the groups' sizes in the file's footer, so an index written
#: with other sizes (8,192 before) reads the same.
ROW_GROUP = 2048
#: Metadata row groups an opened index keeps decoded (the most recently read).
GROUPS_CACHED = 64
#: Inverted postings are stored from this many non-zeros on: below it a CSR product over
#: the whole index takes a few milliseconds and the postings would only double the bytes.
POSTINGS_MIN_NNZ = 2_000_000
#: float16 postings hold ``weight / scale``; ``scale`` puts the largest weight at this value.
POSTINGS_TOP = 1024.0
#: Relative and absolute rounding bounds of a float16 posting (round to nearest).
FP16_REL = 2.0**-11
FP16_ABS = 2.0**-25  # half the spacing of float16 subnormals, in scaled units


#: Files up to this size are checked against their checksum each time an index opens
#: (every file is checksummed when it is written; larger arrays are checked as they are read).
VERIFY_BYTES = 64 * 2**20


def file_checksum(path: Path) -> str:
    """BLAKE2b of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        while block := handle.read(2**20):
            digest.update(block)
    return digest.hexdigest()


#: Vocabularies hashed lately: ``id(list)`` → (the list, a copy of its tokens, its hash).
_HASHED: dict[int, tuple[list[str], list[str], str]] = {}
#: Vocabularies whose hashes are kept (an encoder's vocabulary is hashed at every query).
HASHES_KEPT = 8


def vocab_hash(vocab: list[str]) -> str:
    """sha256 of the vocabulary (one token per line): two encoders share a space iff equal.
    The hash of a list met lately is reused while its tokens are unchanged (the check
    compares the same string objects: far cheaper than hashing them again)."""
    kept = _HASHED.get(id(vocab))
    if kept is not None and kept[0] is vocab and kept[1] == vocab:
        return kept[2]
    digest = texts_digest(vocab, "\n")
    if isinstance(vocab, list):
        if len(_HASHED) >= HASHES_KEPT:
            _HASHED.pop(next(iter(_HASHED)))
        _HASHED[id(vocab)] = (vocab, list(vocab), digest)
    return digest


@dataclass(frozen=True)
class IndexBatch:
    """A batch of consecutive items: their rows ``[start, stop)`` as a scipy CSR matrix."""

    start: int
    stop: int
    vectors: Any  # scipy.sparse.csr_matrix [stop - start, |V|], float32
    ids: list[str]
    meta: list[dict]


def corrupt_index(label: str, why: str) -> InputError:
    """The one-line error that says the index ``label`` is damaged (``why``) and how to
    mend it."""
    return InputError(
        f"{label}: not a valid Lexlens index ({why}): rebuild it with `lexlens index`"
    )


class StoredIndex:
    """An opened index: memory-mapped CSR arrays, metadata on demand, the typed manifest.
    It answers the calls of a stored collection
    (:class:`~lexlens.analysis.collections.stored.StoredCollection`).

    Opening checks the manifest and the arrays' shapes against it (a truncated or
    corrupted index is refused with one line, never a traceback).
    """

    def __init__(self, path: str | Path) -> None:
        path = path_argument(path, "path", INDEX_WANTED)
        self.path = index_folder(path)
        self.label = str(path)
        self.manifest = read_manifest(self.path)
        try:
            self._open_arrays()
        except InputError:
            raise
        except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
            raise self.corrupt(
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            ) from None
        self._groups: dict[tuple, Any] = {}  # (row group, columns) → Arrow table, oldest first
        self._vocab: list[str] | None = None
        self._words: frozenset[str] | None = None

    def corrupt(self, why: str) -> InputError:
        """The one-line error that says this index is damaged and how to mend it."""
        return corrupt_index(self.label, why)

    def _open_arrays(self) -> None:
        m = self.manifest
        n, nnz, v = m.counts.items, m.counts.nnz, m.vocab.size
        files = m.files
        for name, size in files.items():
            path = self.path / name
            if not path.is_file():
                raise self.corrupt(f"{name} is missing")
            if path.stat().st_size != int(size):
                raise self.corrupt(
                    f"{name} has {path.stat().st_size:,} bytes, expected {int(size):,}"
                )
            expected = m.checksums.get(name)
            if expected and int(size) <= VERIFY_BYTES and file_checksum(path) != expected:
                raise self.corrupt(f"{name} was changed after the index was built")

        def load(name: str, dtype: Any, length: int) -> np.ndarray:
            """The array in ``name``, memory-mapped: ``length`` values of ``dtype`` (or of
            one of the dtypes of a tuple: the file says which)."""
            array = np.load(self.path / name, mmap_mode="r", allow_pickle=False)
            allowed = [np.dtype(d) for d in (dtype if isinstance(dtype, tuple) else (dtype,))]
            if array.dtype not in allowed or array.shape != (length,):
                wanted = " or ".join(str(d) for d in allowed)
                raise self.corrupt(
                    f"{name} holds {array.dtype}{array.shape}, expected {wanted}[{length}]"
                )
            return array

        ids = (np.int32, token_dtype(v))  # int32 before version 2, uint16 when |V| fits
        self.indptr = load("indptr.npy", np.int64, n + 1)
        self.indices = load("indices.npy", ids, nnz)
        self.data = load("data.npy", np.float32, nnz)
        self.norms = load("norms.npy", np.float32, n)
        if n and (int(self.indptr[0]) != 0 or int(self.indptr[-1]) != nnz):
            raise self.corrupt("row pointers do not span the stored weights")
        if n and np.any(np.diff(self.indptr) < 0):
            raise self.corrupt("row pointers go backwards")
        if not np.isfinite(self.norms).all() or (n and np.any(self.norms < 0)):
            raise self.corrupt("norms.npy holds a negative, NaN or infinite norm")
        self.postings = None
        if "postings_indptr.npy" in files:
            self.postings = self._open_postings(load)
        import pyarrow.parquet as pq  # heavy: pyarrow loads on first use

        self._parquet = pq.ParquetFile(self.path / "items.parquet")
        if self._parquet.metadata.num_rows != n:
            raise self.corrupt(
                f"items.parquet has {self._parquet.metadata.num_rows} rows, expected {n}"
            )
        footer = self._parquet.metadata
        sizes = [footer.row_group(g).num_rows for g in range(footer.num_row_groups)]
        self._group_starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.records: StoredRecords | None = None
        if RECORDS in files or RECORDS_INDEX in files:
            missing = RECORDS_INDEX if RECORDS in files else RECORDS
            if missing not in files:
                raise self.corrupt(f"the manifest lists no {missing}")
            # a function of the label, not a method: the index stays free of reference
            # cycles, so its memory maps close as soon as it is dropped
            self.records = StoredRecords(self.path, n, functools.partial(corrupt_index, self.label))
        parquet_fields = self._parquet.schema_arrow.names
        held = set(parquet_fields) | set(RECORD_FIELDS if self.records else ())
        self.fields = [f for f in ITEM_FIELDS if f in held] + [
            f for f in parquet_fields if f not in ITEM_FIELDS
        ]

    def _open_postings(self, load: Any) -> StoredPostings:
        """The inverted postings, checked: int32 items, or uint16 ones with their block
        table (:mod:`.posting_blocks`) spanning every term's postings."""
        m = self.manifest
        n, nnz, v = m.counts.items, m.counts.nnz, m.vocab.size
        recorded = json.loads((self.path / "postings_scale.json").read_text())
        indptr = load("postings_indptr.npy", np.int64, v + 1)
        weights = load("postings_weights.npy", np.float16, nnz)
        if "postings_blocks.npy" not in m.files:
            items = load("postings_items.npy", np.int32, nnz)
            return StoredPostings(indptr, items, weights, float(recorded["scale"]))
        block = recorded.get("block")
        if not isinstance(block, int) or isinstance(block, bool) or not 0 < block <= 2**16:
            raise self.corrupt(f"postings_scale.json gives a block of {block!r} rows")
        cells = block_count(n, block)
        blocks = load("postings_blocks.npy", np.int64, v * cells + 1)
        items = load("postings_items.npy", np.uint16, nnz)
        if not np.array_equal(blocks[::cells], indptr) or np.any(np.diff(blocks) < 0):
            raise self.corrupt("postings_blocks.npy does not follow the postings' terms")
        return StoredPostings(indptr, items, weights, float(recorded["scale"]), blocks, block)

    # -- basics ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.manifest.counts.items

    @property
    def nnz(self) -> int:
        """Stored non-zero weights over every item."""
        return self.manifest.counts.nnz

    @property
    def gate_k(self) -> int:
        """The gate k its vectors were stored with (-1: ungated)."""
        return self.manifest.gate_k

    @property
    def vocab_size(self) -> int:
        """Dimensions of the output vocabulary."""
        return self.manifest.vocab.size

    @property
    def vocab_hash(self) -> str:
        """The hash of the vocabulary (:func:`vocab_hash`), as the build recorded it."""
        recorded = self.manifest.vocab.hash
        return recorded if recorded is not None else vocab_hash(self.vocab)

    @property
    def vocab(self) -> list[str]:
        """The output vocabulary (``vocab.txt``, read once and checked against the manifest)."""
        if self._vocab is None:
            lines = (self.path / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
            if len(lines) != self.vocab_size:
                raise self.corrupt(f"vocab.txt has {len(lines)} tokens, expected {self.vocab_size}")
            expected = self.manifest.vocab.hash
            if expected is not None and vocab_hash(lines) != expected:
                raise self.corrupt("vocab.txt was changed after the index was built")
            self._vocab = lines
        return self._vocab

    @property
    def known_words(self) -> frozenset[str]:
        """The words the index's encoder knows it expresses (empty when it stored none)."""
        if self._words is None:
            path = self.path / "words.txt"
            text = path.read_text(encoding="utf-8") if path.is_file() else ""
            self._words = frozenset(w for w in text.split("\n") if w)
        return self._words

    @property
    def encoder_name(self) -> str:
        """The name of the encoder the vectors come from."""
        return self.manifest.encoder.name

    @property
    def encoder_spec(self) -> str:
        """The spec that loads the encoder the vectors come from (its name when the build
        recorded none)."""
        return self.manifest.encoder.loads_as

    @property
    def modality(self) -> str:
        """What the items are: "text", "image" or "features"."""
        recorded = self.manifest.modality
        return "text" if recorded is None else recorded

    @property
    def csr_bytes(self) -> int:
        """Bytes of the reference scipy CSR of the vectors (indptr int64, indices int32,
        data float32), whatever dtypes the index stores them in."""
        return 8 * (len(self) + 1) + 8 * self.nnz

    @property
    def disk_bytes(self) -> int:
        """Bytes of every file of the index, the manifest included."""
        return sum(self.manifest.files.values()) + ((self.path / MANIFEST).stat().st_size)

    # -- vectors --------------------------------------------------------------------------
    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Item ``i``'s sparse vector: (vocabulary ids int32, weights)."""
        a, b = int(self.indptr[i]), int(self.indptr[i + 1])
        cols = np.asarray(self.indices[a:b], dtype=np.int32)
        if cols.size and (cols.min() < 0 or cols.max() >= self.vocab_size):
            raise self.corrupt(f"item {i} has vocabulary ids out of range")
        return cols, self._finite(np.asarray(self.data[a:b]), f"item {i}")

    def _finite(self, weights: np.ndarray, what: str) -> np.ndarray:
        """``weights``, refused when one is NaN or infinite (a damaged ``data.npy``)."""
        if not np.isfinite(weights).all():
            raise self.corrupt(f"data.npy: {what} has a NaN or infinite weight")
        return weights

    def rows(self, start: int, stop: int) -> Any:
        """Items ``[start, stop)`` as a scipy CSR matrix (float32)."""
        import scipy.sparse as sp  # heavy: scipy loads on first use

        a, b = int(self.indptr[start]), int(self.indptr[stop])
        cols = np.asarray(self.indices[a:b], dtype=np.int32)
        if cols.size and (cols.min() < 0 or cols.max() >= self.vocab_size):
            raise self.corrupt(f"items {start}–{stop - 1} have vocabulary ids out of range")
        weights = self._finite(np.asarray(self.data[a:b]), f"items {start}–{stop - 1}")
        return sp.csr_matrix(
            (weights, cols, np.asarray(self.indptr[start : stop + 1]) - a),
            shape=(stop - start, self.vocab_size),
        )

    def matrix(self) -> Any:
        """Every item as one scipy CSR matrix (float32, read from the arrays)."""
        return self.rows(0, len(self))

    def with_vectors(self, vectors: Any, gate_k: int, label: str) -> StoredIndex:
        """This index's items, metadata and vocabulary with other vectors held in memory
        (``vectors``: one row per item, e.g. re-gated at ``gate_k``): the same folder opened
        again, its arrays, norms and manifest (gate k, non-zeros, ``regated_from``) those of
        the new vectors, ``label`` how messages name it; no postings."""
        import scipy.sparse as sp  # heavy: scipy loads on first use

        matrix = sp.csr_matrix(vectors)
        if matrix.shape != (len(self), self.vocab_size):
            raise ValueError(f"{matrix.shape} vectors for {len(self)} items of {self.vocab_size}")
        view = StoredIndex(self.path)  # its own handles (memory maps, metadata) on the folder
        stored, n = view.gate_k, len(view)
        view.indptr = matrix.indptr.astype(np.int64)
        view.indices = matrix.indices.astype(token_dtype(self.vocab_size))  # as a build would
        view.data = matrix.data.astype(np.float32)
        squares = np.bincount(
            np.repeat(np.arange(n), np.diff(view.indptr)),
            weights=view.data.astype(np.float64) ** 2,
            minlength=n,
        )
        view.norms = np.sqrt(squares).astype(np.float32)
        view.postings = None
        m = view.manifest
        view.manifest = dataclasses.replace(
            m,
            gate_k=gate_k,
            counts=dataclasses.replace(m.counts, nnz=int(view.indices.size)),
            extra={**m.extra, "regated_from": stored},
        )
        view.label = label
        return view

    def vector(self, i: int) -> np.ndarray:
        """Item ``i``'s dense gated vector ``[|V|]`` (float32)."""
        out = np.zeros(self.vocab_size, dtype=np.float32)
        cols, vals = self.row(i)
        out[cols] = vals
        return out

    def iter_batches(
        self, batch_size: int = 4096, columns: list[str] | None = None
    ) -> Iterator[IndexBatch]:
        """Every item in order, ``batch_size`` at a time: CSR rows with ids and metadata."""
        if batch_size < 1:
            raise InputError("batch size must be at least 1")
        for start in range(0, len(self), batch_size):
            stop = min(len(self), start + batch_size)
            meta = self.meta(range(start, stop), columns)
            yield IndexBatch(start, stop, self.rows(start, stop), [m["id"] for m in meta], meta)

    # -- metadata -------------------------------------------------------------------------
    def _read_groups(self, groups: list[int], columns: tuple[str, ...] | None) -> list[Any]:
        """Row groups ``groups`` of the metadata (only ``columns`` when given) as Arrow
        tables, in one read of those the cache lacks (the last 64 read are kept, so memory
        stays bounded however many items are looked up)."""
        found = {g: self._groups[(g, columns)] for g in groups if (g, columns) in self._groups}
        missing = [g for g in groups if g not in found]
        for start in range(0, len(missing), GROUPS_CACHED):
            batch = missing[start : start + GROUPS_CACHED]
            try:
                table = self._parquet.read_row_groups(
                    batch, columns=list(columns) if columns else None, use_threads=False
                )
            except Exception as exc:  # pyarrow raises its own types for damaged files
                raise self.corrupt(f"items.parquet: {str(exc).splitlines()[0]}") from None
            offset = 0
            for g in batch:
                size = int(self._group_starts[g + 1] - self._group_starts[g])
                found[g] = table.slice(offset, size)
                offset += size
                if len(self._groups) >= GROUPS_CACHED:
                    self._groups.pop(next(iter(self._groups)))
                self._groups[(g, columns)] = found[g]
        return [found[g] for g in groups]

    def meta(self, rows: Any, columns: list[str] | None = None) -> list[dict]:
        """Metadata dicts of the given rows (``id``, ``kind``, ``image``, ``text``,
        ``captions``, ``labels``, …), with ``row`` added. The fields the records hold
        (:mod:`.records`) are read from their blocks, the others from the row groups they
        fall in, at once; only the rows asked for become Python objects."""
        rows = [int(r) for r in rows]
        outside = next((r for r in rows if not 0 <= r < len(self)), None)
        if outside is not None:
            raise IndexError(f"row {outside} is outside the index's {len(self)} items")
        if columns:
            unknown = next((c for c in columns if c not in self.fields), None)
            if unknown is not None:
                raise KeyError(f"Field {unknown!r} does not exist in schema")
        if self.records is None:
            return self._parquet_meta(rows, columns)
        wanted = list(columns) if columns else self.fields
        kept = [c for c in wanted if c in RECORD_FIELDS]
        read = [c for c in wanted if c not in RECORD_FIELDS]
        held = self.records.rows(rows, kept) if kept else [{} for _ in rows]
        if not read:  # every field from the records, in the order asked
            for h, r in zip(held, rows, strict=True):
                h["row"] = r
            return held
        stored = self._parquet_meta(rows, read)
        return [
            {c: (h[c] if c in h else s[c]) for c in wanted} | {"row": s["row"]}
            for h, s in zip(held, stored, strict=True)
        ]

    def _parquet_meta(self, rows: list[int], columns: list[str] | None) -> list[dict]:
        """:meth:`meta` of rows in range, every field read from ``items.parquet``."""
        out: list[dict] = [{} for _ in rows]
        starts = self._group_starts
        groups = np.searchsorted(starts, np.asarray(rows, np.int64), side="right") - 1
        by_group: dict[int, list[int]] = {}
        for n, g in enumerate(groups.tolist()):
            by_group.setdefault(g, []).append(n)
        wanted = tuple(columns) if columns else None
        tables = self._read_groups(list(by_group), wanted)
        for (g, positions), table in zip(by_group.items(), tables, strict=True):
            picked = table.take([rows[n] - int(starts[g]) for n in positions]).to_pylist()
            for n, row in zip(positions, picked, strict=True):
                row["row"] = rows[n]
                out[n] = row
        return out

    def column(self, name: str) -> list:
        """One metadata column for every item (e.g. ``labels`` for an evaluation)."""
        parquet_fields = self._parquet.schema_arrow.names
        if self.records is not None and name in RECORD_FIELDS and name not in parquet_fields:
            return self.records.column(name)
        try:
            return self._parquet.read(columns=[name]).column(name).to_pylist()
        except Exception as exc:  # noqa: BLE001
            raise self.corrupt(f"items.parquet: {str(exc).splitlines()[0]}") from None

    def image_path(self, meta: dict) -> Path | None:
        """Absolute path of an item's image (``None`` for a text item)."""
        if not meta.get("image"):
            return None
        return Path(self.manifest.source.root) / meta["image"]

    @property
    def has_labels(self) -> bool:
        """Whether any item has labels (what an evaluation needs)."""
        return bool(self.manifest.counts.labelled)

    @property
    def fingerprint(self) -> str:
        """What the collection holds, as a digest: every stored file's checksum, the
        encoder's weights, the vocabulary, the gate and the item count. A copy or an
        unchanged rebuild has the same; any other build, or an update, another."""
        m = self.manifest
        held = {
            "files": dict(m.checksums) or dict(m.files),
            "encoder": m.encoder.fingerprint or m.encoder.name,
            "vocab": m.vocab.hash,
            "gate_k": m.gate_k,
            "items": len(self),
        }
        text = json.dumps(held, sort_keys=True, default=str).encode("utf-8")
        return hashlib.sha256(text).hexdigest()[:16]

    @property
    def benchmark_files(self) -> tuple[Path, Path] | None:
        """The queries and judgements the collection keeps beside its items (built from a
        benchmark source: ``queries.jsonl``, ``qrels.tsv``), or ``None``."""
        return benchmark_files(self.path)

    def kept_benchmark(self) -> dict | None:
        """How many queries and judgements the collection keeps (``queries``,
        ``judged_queries``, ``judgements``; ``kind`` and ``split`` when its build recorded
        them), or ``None``."""
        stored = self.benchmark_files
        if stored is None:
            return None
        benchmark = self.manifest.source.benchmark
        recorded = benchmark.to_dict() if benchmark is not None else {}
        if all(isinstance(recorded.get(k), int) for k in ("queries", "judgements")):
            keys = ("kind", "split", "queries", "judged_queries", "judgements")
            return {k: recorded[k] for k in keys if k in recorded}

        problems = Problems()
        qrels = read_qrels(stored[1], problems)
        return {
            "queries": len(read_queries(stored[0], problems)),
            "judged_queries": len(qrels),
            "judgements": sum(len(v) for v in qrels.values()),
        }

    def describe(self) -> dict:
        """How results name the collection they come from (``fingerprint``: which one)."""
        return {
            "name": self.path.name,
            "items": len(self),
            "encoder": self.encoder_name,
            "modality": self.manifest.modality,
            "stored": True,
            "fingerprint": self.fingerprint,
        }

    def card(self) -> dict:
        """What a collection holds, for lists and the Collections page: built from a
        benchmark, the queries and judgements it keeps (else ``None``)."""
        m = self.manifest
        kept = m.source.benchmark.to_dict() if m.source.benchmark is not None else {}
        return {
            "name": self.path.name,
            "path": str(self.path),
            "encoder": m.encoder.name,
            "modality": m.modality,
            "items": len(self),
            "nnz": self.nnz,
            "mean_nnz": self.nnz / max(1, len(self)),
            "gate_k": m.gate_k,
            "labelled": m.counts.labelled,
            "captioned": m.counts.captioned,
            "skipped": m.counts.skipped,
            "source": m.source.path,
            "created": m.created,
            "updated": m.updated,
            "disk_bytes": self.disk_bytes,
            "csr_bytes": self.csr_bytes,
            "postings": self.postings is not None,
            "queries": kept.get("queries"),
            "judged_queries": kept.get("judged_queries"),
            "judgements": kept.get("judgements"),
        }

    def mean_weights(self, batch_size: int = 65536) -> np.ndarray:
        """Mean gated weight of every term over the collection (streamed)."""
        total = np.zeros(self.vocab_size, dtype=np.float64)
        for start in range(0, self.nnz, batch_size * 64):
            stop = min(self.nnz, start + batch_size * 64)
            total += np.bincount(
                np.asarray(self.indices[start:stop]),
                weights=np.asarray(self.data[start:stop], dtype=np.float64),
                minlength=self.vocab_size,
            )
        return (total / max(1, len(self))).astype(np.float32)

    def strongest_terms(self, n: int = 30, evidence_items: int = 20_000) -> list[Any]:
        """The ``n`` terms of highest mean gated weight (:meth:`mean_weights`), strongest
        first, as words: pieces of a word the items spell (their texts, captions and labels,
        read from the first ``evidence_items``) or the encoder knows are joined into it when
        all its pieces are among the strongest, weighing as its strongest piece; any other
        piece is shown as it is. Terms that no item uses are left out."""
        return [term for term, _ in self.strongest_readings(n, evidence_items)]

    def strongest_readings(self, n: int = 30, evidence_items: int = 20_000) -> list[Any]:
        """:meth:`strongest_terms`, each with how it reads against the items' words (a
        :class:`~lexlens.analysis.core.words.Reading`): a whole word, or a piece ("##r"),
        which a display marks and never shows as a word."""

        words = set(self.known_words)
        columns = [c for c in ("text", "captions", "labels") if c in self.fields]
        if columns:
            for batch in self.iter_batches(batch_size=4096, columns=["id", *columns]):
                for meta in batch.meta:
                    words |= item_words(meta)
                if batch.stop >= evidence_items:
                    break
        terms = top_terms(
            self.mean_weights(), self.vocab, n, merge_pieces=True, words=words, lone_pieces=False
        )
        reader = WordReader(words, self.vocab)
        return [(t, reader.read(t.token)) for t in terms]


def benchmark_files(folder: Path) -> tuple[Path, Path] | None:
    """The queries and judgements an index folder keeps beside its items (``queries.jsonl``,
    ``qrels.tsv``), or ``None``: what a list of collections asks without opening each."""
    queries, qrels = folder / "queries.jsonl", folder / "qrels.tsv"
    return (queries, qrels) if queries.is_file() and qrels.is_file() else None


#: Names an unknown collection's message lists at most.
NAMES_LISTED = 20


def index_folder(path: str | Path) -> Path:
    """The folder an index argument names: an index folder at that path, else — a bare
    name, without a folder — the stored collection of that name in the workspace
    (``LEXLENS_HOME/collections/NAME``); a name that is neither a folder nor a stored
    collection is refused in one line listing the stored ones. Any other path is returned
    for :func:`read_manifest` to refuse."""
    folder = Path(path).expanduser()
    name = str(path)
    bare = Path(name).name == name and name not in ("", ".", "..")
    if not bare or (folder / MANIFEST).is_file():
        return folder
    stored = collections_dir() / name
    if stored.is_dir():
        return stored
    if folder.exists():
        return folder
    names = stored_names()
    listed = ", ".join(names[:NAMES_LISTED]) + (", …" if len(names) > NAMES_LISTED else "")
    known = f"stored: {listed}" if names else "none stored yet"
    raise InputError(
        f"--index {name}: no such folder, and no stored collection of that name in "
        f"{collections_dir()} ({known})"
    )


def read_manifest(path: Path) -> Manifest:
    """The typed manifest of an index folder, checked; one-line errors for anything else."""
    label = str(path)
    if not path.exists():
        raise InputError(f"--index {label}: not found")
    if not path.is_dir():
        raise InputError(
            f"--index {label}: is a file; an index is a folder built by `lexlens index`"
        )
    file = path / MANIFEST
    if not file.is_file():
        raise InputError(
            f"{label}: not a Lexlens index (no {MANIFEST}; an interrupted build leaves none): "
            "build it with `lexlens index`"
        )
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(
            f"{label}: {MANIFEST} is unreadable ({type(exc).__name__}): rebuild the index"
        ) from None
    try:
        if manifest.get("format") != FORMAT:
            raise ValueError("not a lexlens-index manifest")
        if int(manifest.get("format_version", -1)) > FORMAT_VERSION:
            raise ValueError(
                f"format version {manifest['format_version']} is newer than this Lexlens reads "
                f"({FORMAT_VERSION})"
            )
        for key in ("encoder", "vocab", "counts", "files", "source", "gate_k"):
            if key not in manifest:
                raise ValueError(f"missing {key!r}")
        for where, value in (
            ("counts.items", manifest["counts"]["items"]),
            ("counts.nnz", manifest["counts"]["nnz"]),
            ("vocab.size", manifest["vocab"]["size"]),
            ("gate_k", manifest["gate_k"]),
        ):
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{where} is {value!r}, not a whole number")
        return Manifest.read(manifest)
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        raise InputError(
            f"{label}: {MANIFEST} is not a valid manifest ({exc}): rebuild the index"
        ) from None


def open_index(path: str | Path | StoredIndex) -> StoredIndex:
    """Open an index folder (memory-mapped); one-line :class:`InputError` when invalid (an
    index opened already is returned as it is)."""
    return path if isinstance(path, StoredIndex) else StoredIndex(path)


#: Largest manifest read to tell whether a folder is a Lexlens index (one lists its files
#: and at most a few hundred skipped items: kilobytes).
MAX_MANIFEST_BYTES = 64 * 1024 * 1024


def is_lexlens_index(folder: Path) -> bool:
    """Whether ``folder`` holds a Lexlens index: its ``manifest.json`` a regular file, a JSON
    object whose ``format`` is :data:`FORMAT`. Only such a folder may be replaced by a
    build; another tool's ``manifest.json`` (any JSON, or none) makes it the user's."""
    try:
        data, _ = read_bytes(folder / MANIFEST, limit=MAX_MANIFEST_BYTES)
        manifest = json.loads(data.decode("utf-8"))
    except (InputError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == FORMAT


def existing_index(out: Path) -> StoredIndex | None:
    """The valid index already at ``out`` (what a rebuild may reuse), else ``None``."""
    if not (out / MANIFEST).is_file():
        return None
    try:
        return StoredIndex(out)
    except InputError:
        return None
