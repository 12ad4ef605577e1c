"""Writing a stored index (the format: :mod:`.store`): gated sparse rows and item metadata
streamed into CSR ``.npy`` files (:mod:`.npy_files`) and Parquet, the inverted postings of
large indexes (:mod:`.postings`), and the folder swapped into place atomically.

Writes are atomic: the new index is built in a temporary folder beside ``--out``, every
file is fsynced, then the folder is swapped into place (Linux ``renameat2`` exchange, or two
renames). A full disk or an interrupted run leaves the previous index as it was and no
half-written folder that looks valid.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import errno
import json
import os
import shutil
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.manifest import (
    Counts,
    EncoderEntry,
    ImportEntry,
    Manifest,
    SourceEntry,
    VocabEntry,
)
from lexlens.analysis.collections.npy_files import NpyAppender, write_npy
from lexlens.analysis.collections.postings import write_postings
from lexlens.analysis.collections.records import ITEM_FIELDS, MOVED_FIELDS, RecordWriter
from lexlens.analysis.collections.seen_ids import SeenIds
from lexlens.analysis.collections.store import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    POSTINGS_MIN_NNZ,
    ROW_GROUP,
    StoredIndex,
    file_checksum,
    is_lexlens_index,
    vocab_hash,
)
from lexlens.analysis.collections.token_ids import TOKEN_IDS, TOKEN_INDPTR, token_dtype
from lexlens.analysis.core.outputs import fsync_dir
from lexlens.analysis.datasets.items import SkippedItems
from lexlens.models.base import InputError


@dataclass(frozen=True)
class IndexHeader:
    """What a manifest says of how an index was made: its encoder entry, gate k, modality,
    source entry, and when it was first created (``None``: now)."""

    encoder: dict
    gate_k: int
    modality: str
    source: dict
    created: str | None = None


#: What fills an index: adds the items to the writer, returns (encoded, reused, skipped).
Fill = Callable[["IndexWriter"], tuple[int, int, SkippedItems]]


_META_SCHEMA = None


def _meta_schema():
    """The schema of ``items.parquet``: every item field but those only the records hold
    (:data:`~.records.MOVED_FIELDS`)."""
    global _META_SCHEMA
    if _META_SCHEMA is None:
        import pyarrow as pa  # heavy: pyarrow loads on first use

        types = {
            "id": pa.string(),
            "kind": pa.string(),
            "image": pa.string(),
            "text": pa.string(),
            "captions": pa.list_(pa.string()),
            "labels": pa.list_(pa.string()),
            "content_key": pa.string(),
            "size": pa.int64(),
            "mtime_ns": pa.int64(),
            "nnz": pa.int32(),
        }
        _META_SCHEMA = pa.schema([(f, types[f]) for f in ITEM_FIELDS if f not in MOVED_FIELDS])
    return _META_SCHEMA


class IndexWriter:
    """Streams gated sparse rows and item metadata into a folder (CSR, Parquet and the
    hit records of :mod:`.records`)."""

    def __init__(self, folder: Path, vocab_size: int) -> None:
        import pyarrow.parquet as pq  # heavy: pyarrow loads on first use

        self.folder = folder
        self.vocab_size = vocab_size
        # Column ids as uint16 when every id fits (|V| ≤ 65,536), else int32 (see .store).
        self.indices = NpyAppender(folder / "indices.npy", token_dtype(vocab_size))
        self.data = NpyAppender(folder / "data.npy", np.float32)
        # Each item's input token ids (empty row: none given); written only if some are.
        self.token_ids = NpyAppender(folder / TOKEN_IDS, token_dtype(vocab_size))
        self.token_indptr = array.array("q", [0])
        # Typed arrays: 8 bytes an item each, not a Python number (≈32 bytes) in a list.
        self.indptr = array.array("q", [0])
        self.norms = array.array("d")
        self.nonnegative = True
        self.max_weight = 0.0
        self.largest_id = -1  # the largest vocabulary id written
        self.labelled = 0
        self.captioned = 0
        self._rows: list[dict] = []
        # What add_rows gave and no row group holds yet: ids and non-zeros (the texts go
        # straight into the records).
        self._texts: tuple[list, list] = ([], [])
        self._parquet = pq.ParquetWriter(
            folder / "items.parquet", _meta_schema(), compression="zstd"
        )
        self.records = RecordWriter(folder)
        self.ids = SeenIds()  # 16 bytes an id, not a set of strings

    @property
    def count(self) -> int:
        """Items added so far."""
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        """Non-zero weights added so far."""
        return self.indptr[-1]

    def add(
        self,
        meta: dict,
        indices: np.ndarray,
        data: np.ndarray,
        token_ids: np.ndarray | None = None,
    ) -> None:
        """One item: its metadata row, its sparse gated vector (sorted indices) and, for a
        text, its input token ids as the encoder read them (:mod:`.token_ids`)."""
        if self.ids.add([meta["id"]]) is not None:
            raise InputError(
                f"{meta.get('where') or 'source'}: the id {meta['id']!r} appears twice"
            )
        data = np.asarray(data, dtype=np.float32)
        if data.size and not np.all(np.isfinite(data)):
            raise InputError(f"{meta.get('where')}: the encoder gave NaN or infinite weights")
        self._check_ids(indices, lambda _: str(meta.get("where") or meta["id"]))
        self.indices.append(indices)
        self.data.append(data)
        self.indptr.append(self.indptr[-1] + int(data.size))
        if token_ids is not None and len(token_ids):
            token_ids = np.asarray(token_ids)
            if int(token_ids.min()) < 0 or int(token_ids.max()) >= self.vocab_size:
                raise InputError(
                    f"{meta.get('where') or meta['id']}: token ids outside the vocabulary"
                )
            self.token_ids.append(token_ids)
        self.token_indptr.append(self.token_ids.length)
        self.norms.append(float(np.sqrt(np.sum(data.astype(np.float64) ** 2))))
        if data.size:
            self.nonnegative &= bool(data.min() >= 0)
            self.max_weight = max(self.max_weight, float(np.abs(data).max()))
        self.labelled += bool(meta.get("labels"))
        self.captioned += bool(meta.get("captions"))
        if self._texts[0]:
            raise ValueError("add after add_rows: an index is written one way")
        row = {k: meta.get(k) for k in ITEM_FIELDS}
        row["nnz"] = int(data.size)
        self.records.add(row)
        for name in MOVED_FIELDS:
            del row[name]
        self._rows.append(row)
        if len(self._rows) >= ROW_GROUP:
            self._flush()

    def add_rows(
        self,
        ids: list[str],
        texts: list[str],
        vectors: tuple[np.ndarray, np.ndarray, np.ndarray],
        where: Callable[[int], str],
    ) -> None:
        """Many text items at once (vectors made elsewhere, no token ids): their ids, texts
        and vectors as CSR parts ``(indptr, indices, data)``, each row's indices sorted and
        unrepeated; checked and written as :meth:`add` writes one (``where(n)``: how a
        message names the ``n``-th)."""
        indptr, indices, data = vectors
        data = np.asarray(data, dtype=np.float32)
        if data.size and not np.all(np.isfinite(data)):
            raise InputError(f"{where(0)}: NaN or infinite weights")
        repeated = self.ids.add(ids)
        if repeated is not None:
            raise InputError(f"{where(repeated)}: the id {ids[repeated]!r} appears twice")
        counts = np.diff(indptr)
        self._check_ids(indices, where, indptr)
        self.indices.append(indices)
        self.data.append(data)
        self.indptr.extend((self.indptr[-1] + np.cumsum(counts)).tolist())
        self.token_indptr.extend([self.token_ids.length] * len(ids))
        rows = np.repeat(np.arange(len(ids)), counts)
        squares = np.bincount(rows, weights=data.astype(np.float64) ** 2, minlength=len(ids))
        self.norms.extend(np.sqrt(squares).tolist())
        if data.size:
            self.nonnegative &= bool(data.min() >= 0)
            self.max_weight = max(self.max_weight, float(np.abs(data).max()))
        if self._rows:  # row groups hold ROW_GROUP rows each: one way of adding per index
            raise ValueError("add_rows after add: an index is written one way")
        for item, text in zip(ids, texts, strict=True):
            self.records.add(
                {
                    "id": item,
                    "kind": "text",
                    "image": "",
                    "text": text,
                    "captions": [],
                    "labels": [],
                }
            )
        self._texts[0].extend(ids)
        self._texts[1].extend(counts.tolist())
        while len(self._texts[0]) >= ROW_GROUP:
            self._flush_texts(ROW_GROUP)

    def _check_ids(
        self, indices: np.ndarray, where: Callable[[int], str], indptr: np.ndarray | None = None
    ) -> None:
        """Refuse negative vocabulary ids, and widen the stored ids to int32 at the first
        that uint16 cannot hold (a vocabulary grown while reading may pass 65,536 terms):
        no id is ever wrapped into another term's. ``where(n)`` names the ``n``-th row of
        ``indptr`` (one row when ``None``). Ids beyond the final vocabulary are refused when
        the index is closed (:meth:`close`: its size is known then)."""
        indices = np.asarray(indices)
        if not indices.size:
            return
        low, high = int(indices.min()), int(indices.max())
        if low < 0:
            bad = int(np.flatnonzero(indices < 0)[0])
            row = 0 if indptr is None else int(np.searchsorted(indptr, bad, side="right")) - 1
            raise InputError(f"{where(row)}: a negative vocabulary id ({int(indices[bad])})")
        if high > np.iinfo(self.indices.dtype).max:
            self.indices.widen(np.int32)
        self.largest_id = max(self.largest_id, high)

    def _flush_texts(self, count: int) -> None:
        """The first ``count`` rows given to :meth:`add_rows` as one row group."""
        import pyarrow as pa  # heavy: pyarrow loads on first use

        ids, nnz = (column[:count] for column in self._texts)
        for column in self._texts:
            del column[:count]
        n = len(ids)
        empty = pa.array([""] * n, pa.string())
        none = pa.array([[]] * n, pa.list_(pa.string()))
        zeros = pa.array(np.zeros(n, np.int64))
        columns = {
            "id": pa.array(ids, pa.string()),
            "kind": pa.array(["text"] * n, pa.string()),
            "image": empty,
            "labels": none,
            "content_key": empty,
            "size": zeros,
            "mtime_ns": zeros,
            "nnz": pa.array(np.asarray(nnz, np.int32)),
        }
        table = pa.Table.from_pydict(columns, schema=_meta_schema())
        self._parquet.write_table(table, row_group_size=ROW_GROUP)

    def _flush(self) -> None:
        import pyarrow as pa  # heavy: pyarrow loads on first use

        if self._texts[0]:
            self._flush_texts(len(self._texts[0]))
        if self._rows:
            self._parquet.write_table(
                pa.Table.from_pylist(self._rows, schema=_meta_schema()), row_group_size=ROW_GROUP
            )
            self._rows = []

    def close(self, vocab: list[str], postings: bool | None = None) -> dict[str, int]:
        """Finish every file (fsynced); returns ``{file name: bytes}``."""
        if self.largest_id >= self.vocab_size:
            raise InputError(
                f"vocabulary id {self.largest_id:,} is outside the {self.vocab_size:,} terms "
                "of the vocabulary"
            )
        if self.indices.dtype.itemsize < token_dtype(self.vocab_size).itemsize:
            self.indices.widen(np.int32)  # a vocabulary over 65,536 terms stores int32 ids
        self._flush()
        self._parquet.close()
        sizes = {"indices.npy": self.indices.close(), "data.npy": self.data.close()}
        sizes.update(self.records.close())
        if self.token_ids.length:
            sizes[TOKEN_IDS] = self.token_ids.close()
            sizes[TOKEN_INDPTR] = write_npy(
                self.folder / TOKEN_INDPTR, np.asarray(self.token_indptr, np.int64)
            )
        else:  # no item came with token ids (images, vectors made elsewhere)
            self.token_ids.abort()
            (self.folder / TOKEN_IDS).unlink(missing_ok=True)
        sizes["indptr.npy"] = write_npy(
            self.folder / "indptr.npy", np.asarray(self.indptr, np.int64)
        )
        sizes["norms.npy"] = write_npy(
            self.folder / "norms.npy", np.asarray(self.norms, np.float32)
        )
        with open(self.folder / "items.parquet", "rb+") as handle:
            os.fsync(handle.fileno())
        sizes["items.parquet"] = (self.folder / "items.parquet").stat().st_size
        text = "".join(t.replace("\n", " ") + "\n" for t in vocab).encode("utf-8")
        with open(self.folder / "vocab.txt", "wb") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        sizes["vocab.txt"] = len(text)
        nnz = self.indptr[-1]
        if postings if postings is not None else nnz >= POSTINGS_MIN_NNZ:
            sizes.update(write_postings(self.folder, self.vocab_size, self.max_weight))
        return sizes

    def abort(self) -> None:
        """Close every file unfinished, after a failed build."""
        self.indices.abort()
        self.data.abort()
        self.token_ids.abort()
        self.records.abort()
        with contextlib.suppress(Exception):
            self._parquet.close()


def check_out(out: Path) -> None:
    """``--out`` can hold a new index: a new or empty folder, or a Lexlens index to replace
    (:func:`~.store.is_lexlens_index`: its manifest's format says so); any other folder
    holds a user's files and is refused, whatever its names (``manifest.json``, ``data.npy``)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not is_lexlens_index(out):
        named = (out / MANIFEST).exists()
        found = f"its {MANIFEST} is not a Lexlens index's" if named else "it holds other files"
        raise InputError(
            f"--out {out}: exists and is not a Lexlens index ({found}): choose a new or empty "
            "folder (nothing there is overwritten)"
        )
    parent = out.parent if str(out.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        probe = parent / f".{out.name}.probe-{uuid.uuid4().hex[:8]}"
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        raise InputError(f"--out {out}: cannot write there ({exc.strerror or exc})") from None


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False if unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    result = fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return result == 0


def _install(tmp: Path, out: Path) -> None:
    """Put the finished folder ``tmp`` at ``out`` (replacing an old index) atomically."""
    if out.exists():
        if _exchange(tmp, out):
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, out)
    fsync_dir(out.parent)


def clean_stale(out: Path) -> None:
    """Remove temporary folders an interrupted build of ``out`` left beside it."""
    parent = out.parent if str(out.parent) else Path(".")
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            if entry.name.startswith((f".{out.name}.building-", f".{out.name}.old-")):
                pid = entry.name.rsplit("-", 2)[-2] if ".building-" in entry.name else ""
                if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
                    continue
                shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _keep_user_files(out: Path, tmp: Path, new_files: set[str]) -> None:
    """Carry the files a user keeps in an index folder (a report folder, notes) into the
    new build, as hard links: a rebuild replaces only the index's own files, and until the
    swap the old folder is whole."""
    if not (out / MANIFEST).is_file():
        return
    try:
        old_files = set(json.loads((out / MANIFEST).read_text(encoding="utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        old_files = set()
    own = old_files | new_files | {MANIFEST}
    for entry in out.iterdir():
        if entry.name in own:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, tmp / entry.name, symlinks=True, copy_function=os.link)
        else:
            os.link(entry, tmp / entry.name, follow_symlinks=False)


def _seal(tmp: Path, out: Path, manifest: Manifest) -> None:
    """Write the manifest last (fsynced), then swap the finished folder into place."""
    data = manifest.to_json()
    with open(tmp / MANIFEST, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    fsync_dir(tmp)
    _install(tmp, out)


def write_atomically(
    out: Path,
    vocab: list[str],
    fill: Fill,
    header: IndexHeader,
    *,
    postings: bool | None = None,
    extra: dict[str, bytes] | None = None,
    imported: Callable[[], ImportEntry] | None = None,
) -> Manifest:
    """Write an index at ``out`` and return its manifest; ``out`` changes only when the new
    index is complete. ``extra`` files (a benchmark's queries and judgements) are written
    with it and listed, with their sizes, among its files.

    ``fill(writer)`` adds the items and returns ``(encoded, reused, skipped)`` (skipped:
    the count of items left out and the first of them, which the manifest lists: up to
    :data:`~lexlens.analysis.datasets.items.MAX_SKIPPED_IN_MANIFEST`). The files are
    written into a temporary folder beside ``out``, fsynced, the manifest last, then
    swapped into place. Any failure removes the temporary folder; a full disk or another
    write error is one line saying that the previous index is unchanged (or that nothing
    was written). ``imported`` (vectors encoded elsewhere) gives, once they are all added,
    what the manifest records of their import.
    """
    encoder = EncoderEntry.from_dict(header.encoder, "encoder")  # checked before any work
    tmp = out.parent / f".{out.name}.building-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    had_index = (out / MANIFEST).is_file()
    tmp.mkdir()
    writer = None
    try:
        writer = IndexWriter(tmp, len(vocab))
        encoded, reused, skipped = fill(writer)
        counts = Counts(
            items=writer.count,
            nnz=writer.nnz,
            encoded=encoded,
            reused=reused,
            skipped=skipped.count,
            labelled=writer.labelled,
            captioned=writer.captioned,
        )
        nonnegative = writer.nonnegative
        files = writer.close(vocab, postings)
        writer = None
        for name, data in (extra or {}).items():
            with open(tmp / name, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            files[name] = len(data)
        now = datetime.now(UTC).isoformat(timespec="seconds")
        manifest = Manifest(
            format=FORMAT,
            format_version=FORMAT_VERSION,
            encoder=encoder,
            vocab=VocabEntry(size=len(vocab), hash=vocab_hash(vocab)),
            gate_k=header.gate_k,
            modality=header.modality,
            source=SourceEntry.from_dict(header.source, "source"),
            counts=counts,
            skipped=tuple(skipped.first),
            created=header.created or now,
            updated=now,
            files=files,
            checksums={name: file_checksum(tmp / name) for name in files},
            nonnegative=nonnegative,
            lexlens=_version(),
            imported=None if imported is None else imported(),
        )
        _keep_user_files(out, tmp, set(files))
        _seal(tmp, out, manifest)
    except BaseException as exc:
        if writer is not None:
            writer.abort()
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            why = "the disk is full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
            kept = "the previous index is unchanged" if had_index else "nothing was written"
            raise InputError(f"could not write the index at {out} ({why}): {kept}") from None
        raise
    return manifest


def write_index(
    out: str | Path,
    vocab: list[str],
    rows: Any,
    *,
    encoder: dict,
    gate_k: int = -1,
    modality: str = "text",
    source: dict | None = None,
    postings: bool | None = None,
) -> StoredIndex:
    """Store vectors made elsewhere (another tool's sparse vectors, a synthetic benchmark)
    as an index: ``rows`` yields ``(meta, indices, weights)``, or ``(meta, indices, weights,
    token_ids)`` for texts (their input token ids, :mod:`.token_ids`), with ``meta`` holding at
    least ``id`` (and optionally ``text``, ``image``, ``captions``, ``labels``). ``encoder`` is the
    manifest's encoder entry (``name`` at least). Atomic like every build."""
    out = Path(out).expanduser()
    check_out(out)

    def fill(writer: IndexWriter) -> tuple[int, int, SkippedItems]:
        for meta, cols, vals, *token_ids in rows:
            order = np.argsort(cols, kind="stable")
            full = {
                "kind": modality,
                "image": "",
                "text": "",
                "captions": [],
                "labels": [],
                "content_key": "",
                "size": 0,
                "mtime_ns": 0,
            } | dict(meta)
            writer.add(
                full,
                np.asarray(cols, np.int32)[order],
                np.asarray(vals, np.float32)[order],
                token_ids[0] if token_ids else None,
            )
        return writer.count, 0, SkippedItems()

    header = IndexHeader(
        encoder={"fingerprint": "", "capabilities": []} | dict(encoder),
        gate_k=gate_k,
        modality=modality,
        source={"path": "", "root": "", "kind": "external", "fingerprint": ""} | dict(source or {}),
    )
    write_atomically(out, vocab, fill, header, postings=postings)
    return StoredIndex(out)


def _version() -> str:
    try:
        return version("lexlens")
    except Exception:  # noqa: BLE001
        return "unknown"
