"""Writing a stored index (the format: :mod:`.store`): gated sparse rows and item metadata
streamed into CSR ``.npy`` files and Parquet, the inverted postings of large indexes built
in chunks, and the folder swapped into place atomically.

Writes are atomic: the new index is built in a temporary folder beside ``--out``, every
file is fsynced, then the folder is swapped into place (Linux ``renameat2`` exchange, or two
renames). A full disk or an interrupted run leaves the previous index as it was and no
half-written folder that looks valid.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import mmap
import os
import shutil
import struct
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.store import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    POSTINGS_MIN_NNZ,
    POSTINGS_TOP,
    ROW_GROUP,
    StoredIndex,
    vocab_hash,
)
from lexlens.models.base import InputError

_NPY_HEADER = 128


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    """A version-1.0 ``.npy`` header of exactly :data:`_NPY_HEADER` bytes."""
    text = f"{{'descr': '{dtype.str}', 'fortran_order': False, 'shape': ({length},), }}"
    pad = _NPY_HEADER - 10 - len(text) - 1
    return (
        b"\x93NUMPY\x01\x00"
        + struct.pack("<H", _NPY_HEADER - 10)
        + (text + " " * pad + "\n").encode("latin1")
    )


class NpyAppender:
    """Append 1-D arrays to a ``.npy`` file whose length is known only at the end."""

    def __init__(self, path: Path, dtype: Any) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self.length = 0
        self._handle = open(path, "wb")  # noqa: SIM115
        self._handle.write(b"\0" * _NPY_HEADER)

    def append(self, values: np.ndarray) -> None:
        """Write ``values`` after what is there (as this file's dtype)."""
        array = np.ascontiguousarray(values, dtype=self.dtype)
        if array.size:
            self._handle.write(memoryview(array).cast("B"))
            self.length += int(array.size)

    def close(self) -> int:
        """Write the header, fsync and close; returns the file's size in bytes."""
        self._handle.seek(0)
        self._handle.write(_npy_header(self.dtype, self.length))
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        return _NPY_HEADER + self.length * self.dtype.itemsize

    def abort(self) -> None:
        """Close the file unfinished (the build's temporary folder is removed anyway)."""
        with contextlib.suppress(OSError):
            self._handle.close()


def _write_npy(path: Path, array: np.ndarray) -> int:
    out = NpyAppender(path, array.dtype)
    try:
        out.append(array.ravel())
        return out.close()
    except BaseException:
        out.abort()
        raise


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


_META_SCHEMA = None


def _meta_schema():
    global _META_SCHEMA
    if _META_SCHEMA is None:
        import pyarrow as pa

        _META_SCHEMA = pa.schema(
            [
                ("id", pa.string()),
                ("kind", pa.string()),
                ("image", pa.string()),
                ("text", pa.string()),
                ("captions", pa.list_(pa.string())),
                ("labels", pa.list_(pa.string())),
                ("content_key", pa.string()),
                ("size", pa.int64()),
                ("mtime_ns", pa.int64()),
                ("nnz", pa.int32()),
            ]
        )
    return _META_SCHEMA


class IndexWriter:
    """Streams gated sparse rows and item metadata into a folder (CSR + Parquet)."""

    def __init__(self, folder: Path, vocab_size: int) -> None:
        import pyarrow.parquet as pq

        self.folder = folder
        self.vocab_size = vocab_size
        self.indices = NpyAppender(folder / "indices.npy", np.int32)
        self.data = NpyAppender(folder / "data.npy", np.float32)
        self.indptr: list[int] = [0]
        self.norms: list[float] = []
        self.nonnegative = True
        self.max_weight = 0.0
        self.labelled = 0
        self.captioned = 0
        self._rows: list[dict] = []
        self._parquet = pq.ParquetWriter(
            folder / "items.parquet", _meta_schema(), compression="zstd"
        )
        self.ids: set[str] = set()

    @property
    def count(self) -> int:
        """Items added so far."""
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        """Non-zero weights added so far."""
        return self.indptr[-1]

    def add(self, meta: dict, indices: np.ndarray, data: np.ndarray) -> None:
        """One item: its metadata row and its sparse gated vector (sorted indices)."""
        if meta["id"] in self.ids:
            raise InputError(
                f"{meta.get('where') or 'source'}: the id {meta['id']!r} appears twice"
            )
        self.ids.add(meta["id"])
        data = np.asarray(data, dtype=np.float32)
        if data.size and not np.all(np.isfinite(data)):
            raise InputError(f"{meta.get('where')}: the encoder gave NaN or infinite weights")
        self.indices.append(indices)
        self.data.append(data)
        self.indptr.append(self.indptr[-1] + int(data.size))
        self.norms.append(float(np.sqrt(np.sum(data.astype(np.float64) ** 2))))
        if data.size:
            self.nonnegative &= bool(data.min() >= 0)
            self.max_weight = max(self.max_weight, float(np.abs(data).max()))
        self.labelled += bool(meta.get("labels"))
        self.captioned += bool(meta.get("captions"))
        row = {k: meta.get(k) for k in _meta_schema().names}
        row["nnz"] = int(data.size)
        self._rows.append(row)
        if len(self._rows) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self._rows:
            self._parquet.write_table(
                pa.Table.from_pylist(self._rows, schema=_meta_schema()), row_group_size=ROW_GROUP
            )
            self._rows = []

    def close(self, vocab: list[str], postings: bool | None = None) -> dict[str, int]:
        """Finish every file (fsynced); returns ``{file name: bytes}``."""
        self._flush()
        self._parquet.close()
        sizes = {"indices.npy": self.indices.close(), "data.npy": self.data.close()}
        sizes["indptr.npy"] = _write_npy(
            self.folder / "indptr.npy", np.asarray(self.indptr, np.int64)
        )
        sizes["norms.npy"] = _write_npy(
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
        with contextlib.suppress(Exception):
            self._parquet.close()


def _read_chunk(path: Path, dtype: Any, start: int, count: int) -> np.ndarray:
    """``count`` values from element ``start`` of a 1-D ``.npy`` we wrote (plain reads:
    no memory map, so the pages read do not stay in this process's memory)."""
    dtype = np.dtype(dtype)
    return np.fromfile(path, dtype=dtype, count=count, offset=_NPY_HEADER + start * dtype.itemsize)


def _drop_pages(mapped: mmap.mmap) -> None:
    """Write a shared mapping's dirty pages and drop them from this process's memory."""
    mapped.flush()
    with contextlib.suppress(AttributeError, OSError, ValueError):
        mapped.madvise(mmap.MADV_DONTNEED)


def write_postings(folder: Path, vocab_size: int, max_weight: float) -> dict[str, int]:
    """The inverted index of the CSR in ``folder``, built in chunks (memory O(chunk)).

    For each term: the items that use it (int32, ascending) and their weights as float16
    of ``weight / scale`` (``scale`` puts the largest weight at :data:`POSTINGS_TOP`; a
    non-zero weight never rounds to 0). Search scores from them approximately, then
    rescores its candidates exactly from the CSR rows (see
    :func:`lexlens.analysis.search.ranking.top_items`). The CSR is read with plain reads
    and the output's pages are written back and dropped after every chunk, so the
    process's resident memory stays near one chunk whatever the index's size.
    """
    indptr = np.load(folder / "indptr.npy")
    n, nnz = indptr.shape[0] - 1, int(indptr[-1])
    step = 4_000_000
    counts = np.zeros(vocab_size, dtype=np.int64)
    for start in range(0, nnz, step):
        chunk = _read_chunk(folder / "indices.npy", np.int32, start, min(step, nnz - start))
        counts += np.bincount(chunk, minlength=vocab_size)
    p_indptr = np.zeros(vocab_size + 1, dtype=np.int64)
    np.cumsum(counts, out=p_indptr[1:])
    scale = max_weight / POSTINGS_TOP if max_weight > 0 else 1.0
    tiny = np.float16(2.0**-24)
    items_path, weights_path = folder / "postings_items.npy", folder / "postings_weights.npy"
    files = []
    for path, dtype in ((items_path, np.int32), (weights_path, np.float16)):
        with open(path, "wb") as handle:
            handle.write(_npy_header(np.dtype(dtype), nnz))
            handle.truncate(_NPY_HEADER + nnz * np.dtype(dtype).itemsize)
        handle = open(path, "r+b")  # noqa: SIM115
        mapped = mmap.mmap(handle.fileno(), 0) if nnz else None
        view = (
            np.frombuffer(mapped, dtype=dtype, count=nnz, offset=_NPY_HEADER)
            if mapped is not None
            else np.zeros(0, dtype)
        )
        files.append((handle, mapped, view))
    (_, items_map, items), (_, weights_map, weights) = files
    try:
        cursor = p_indptr[:-1].copy()
        rows_per_chunk = max(1, step // max(1, nnz // max(n, 1)))
        for r0 in range(0, n, rows_per_chunk):
            r1 = min(n, r0 + rows_per_chunk)
            a, b = int(indptr[r0]), int(indptr[r1])
            if a == b:
                continue
            cols = _read_chunk(folder / "indices.npy", np.int32, a, b - a)
            vals = _read_chunk(folder / "data.npy", np.float32, a, b - a)
            rows = np.repeat(np.arange(r0, r1, dtype=np.int32), np.diff(indptr[r0 : r1 + 1]))
            order = np.argsort(cols, kind="stable")
            cols, rows, vals = cols[order], rows[order], vals[order]
            starts = np.flatnonzero(np.r_[True, cols[1:] != cols[:-1]])
            group = np.repeat(starts, np.diff(np.r_[starts, cols.size]))
            positions = cursor[cols] + (np.arange(cols.size) - group)
            halves = (vals / scale).astype(np.float16)
            lost = (halves == 0) & (vals != 0)
            halves[lost] = np.copysign(tiny, vals[lost]).astype(np.float16)
            items[positions] = rows
            weights[positions] = halves
            np.add.at(cursor, cols[starts], np.diff(np.r_[starts, cols.size]))
            for mapped in (items_map, weights_map):
                if mapped is not None:
                    _drop_pages(mapped)
    finally:
        del items, weights, view
        files = [(handle, mapped) for handle, mapped, _ in files]  # drop the array views
        for handle, mapped in files:
            if mapped is not None:
                mapped.flush()
                mapped.close()
            os.fsync(handle.fileno())
            handle.close()
    sizes = {
        "postings_items.npy": items_path.stat().st_size,
        "postings_weights.npy": weights_path.stat().st_size,
        "postings_indptr.npy": _write_npy(folder / "postings_indptr.npy", p_indptr),
    }
    (folder / "postings_scale.json").write_text(json.dumps({"scale": scale}))
    sizes["postings_scale.json"] = (folder / "postings_scale.json").stat().st_size
    return sizes


def check_out(out: Path) -> None:
    """``--out`` can hold a new index: a new or empty folder, or an index to replace."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: is a file, not a folder")
    if out.is_dir() and not (out / MANIFEST).is_file() and any(out.iterdir()):
        raise InputError(
            f"--out {out}: exists and is not a Lexlens index: choose a new or empty folder "
            "(nothing there is overwritten)"
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
    _fsync_dir(out.parent)


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


def _seal(tmp: Path, out: Path, manifest: dict) -> None:
    """Write the manifest last (fsynced), then swap the finished folder into place."""
    data = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    with open(tmp / MANIFEST, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    _fsync_dir(tmp)
    _install(tmp, out)


def write_atomically(
    out: Path,
    vocab: list[str],
    fill: Callable[[IndexWriter], tuple[int, int, list[dict]]],
    *,
    encoder: dict,
    gate_k: int,
    modality: str,
    source: dict,
    postings: bool | None = None,
    created: str | None = None,
) -> dict:
    """Write an index at ``out`` and return its manifest; ``out`` changes only when the new
    index is complete.

    ``fill(writer)`` adds the items and returns ``(encoded, reused, skipped)`` (skipped: a
    ``{file, reason}`` dict per item left out). The files are written into a temporary
    folder beside ``out``, fsynced, the manifest last, then swapped into place. Any failure
    removes the temporary folder; a full disk or another write error is one line saying
    that the previous index is unchanged (or that nothing was written).
    """
    tmp = out.parent / f".{out.name}.building-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    had_index = (out / MANIFEST).is_file()
    tmp.mkdir()
    writer = None
    try:
        writer = IndexWriter(tmp, len(vocab))
        encoded, reused, skipped = fill(writer)
        counts = {
            "items": writer.count,
            "nnz": writer.nnz,
            "encoded": encoded,
            "reused": reused,
            "skipped": len(skipped),
            "labelled": writer.labelled,
            "captioned": writer.captioned,
        }
        nonnegative = writer.nonnegative
        files = writer.close(vocab, postings)
        writer = None
        now = datetime.now(UTC).isoformat(timespec="seconds")
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "encoder": encoder,
            "vocab": {"size": len(vocab), "hash": vocab_hash(vocab)},
            "gate_k": gate_k,
            "modality": modality,
            "source": source,
            "counts": counts,
            "skipped": skipped[:1000],
            "created": created or now,
            "updated": now,
            "files": files,
            "nonnegative": nonnegative,
            "lexlens": _version(),
        }
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
    as an index: ``rows`` yields ``(meta, indices, weights)`` with ``meta`` holding at least
    ``id`` (and optionally ``text``, ``image``, ``captions``, ``labels``). ``encoder`` is the
    manifest's encoder entry (``name`` at least). Atomic like every build."""
    out = Path(out).expanduser()
    check_out(out)

    def fill(writer: IndexWriter) -> tuple[int, int, list[dict]]:
        for meta, cols, vals in rows:
            order = np.argsort(cols, kind="stable")
            full = {"kind": modality, "image": "", "text": "", "captions": [], "labels": [],
                    "content_key": "", "size": 0, "mtime_ns": 0} | dict(meta)  # fmt: skip
            writer.add(full, np.asarray(cols, np.int32)[order], np.asarray(vals, np.float32)[order])
        return writer.count, 0, []

    write_atomically(
        out, vocab, fill, encoder={"fingerprint": "", "capabilities": []} | dict(encoder),
        gate_k=gate_k, modality=modality, postings=postings,
        source={"path": "", "root": "", "kind": "external", "fingerprint": ""} | dict(source or {}),
    )  # fmt: skip
    return StoredIndex(out)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("lexlens")
    except Exception:  # noqa: BLE001
        return "unknown"
