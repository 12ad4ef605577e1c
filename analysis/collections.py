"""Stored collections: a researcher's dataset encoded once, kept sparse on disk, reopened
instantly (issue 8).

A *source* is a folder of images (recursive), a .txt/.csv/.jsonl of texts, or a .csv/.jsonl
of items with ``image`` (a path relative to that file) and/or ``text``, and optional ``id``,
``caption`` (several columns allowed: ``caption``, ``caption_2``, ``captions``…) and
``labels`` (``|``-separated). :func:`build_index` streams it through an encoder in batches
and writes an *index* folder:

===================== ===========================================================
``manifest.json``     format and version, encoder name + weight fingerprint,
                      vocabulary hash, gate k, source fingerprint, counts, dates,
                      every file's size (written last: an index without it is not
                      an index)
``indptr.npy``        CSR row pointers, int64 ``[N + 1]``
``indices.npy``       CSR column (vocabulary) ids, int32 ``[nnz]``
``data.npy``          CSR weights of the gated vectors ``E = V ⊙ G``, float32 ``[nnz]``
``norms.npy``         L2 norm of each item's gated vector, float32 ``[N]``
``items.parquet``     one row per item: id, kind, image, text, captions, labels,
                      content key (what was encoded), file size and mtime
``vocab.txt``         the output vocabulary, one token per line
``postings_*.npy``    (large indexes only) the inverted index: for each term its
                      items (int32) and weights (float16, scaled), for fast search
===================== ===========================================================

The arrays are plain ``.npy`` files opened memory-mapped, so an index of a million items
opens in milliseconds and memory stays O(what a query touches).

Writes are atomic: the new index is built in a temporary folder beside ``--out``, every
file is fsynced, then the folder is swapped into place (Linux ``renameat2`` exchange, or two
renames). A full disk or an interrupted run leaves the previous index as it was and no
half-written folder that looks valid. Re-indexing reuses every stored vector whose content
(text, or image bytes) is unchanged under the same encoder fingerprint and gate k: an
unchanged source encodes nothing, three added files encode three.
"""

from __future__ import annotations

import contextlib
import csv
import ctypes
import errno
import hashlib
import json
import mmap
import os
import re
import shutil
import struct
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.features_index import FEATURE_SOURCES, is_features_source
from lexlens.analysis.inputs import LABEL_SEPARATOR, parse_labels
from lexlens.models.base import Capability, Encoder, InputError, Needs

FORMAT = "lexlens-index"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
#: Image files a folder source picks up (case-insensitive).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp")
#: Rows per Parquet row group: metadata of any item is one row group read away.
ROW_GROUP = 8192
#: Inverted postings are stored from this many non-zeros on: below it a CSR product over
#: the whole index takes a few milliseconds and the postings would only double the bytes.
POSTINGS_MIN_NNZ = 2_000_000
#: float16 postings hold ``weight / scale``; ``scale`` puts the largest weight at this value.
POSTINGS_TOP = 1024.0
#: Relative and absolute rounding bounds of a float16 posting (round to nearest).
FP16_REL = 2.0**-11
FP16_ABS = 2.0**-25  # half the spacing of float16 subnormals, in scaled units

#: What indexing needs of an encoder: texts or images into a vocabulary.
INDEX_NEEDS = Needs(
    "a stored collection", any_of=frozenset({Capability.TEXT_LEXICAL, Capability.IMAGE_LEXICAL})
)

Progress = Callable[[int, int, str], None]  # (done, total, note)


# ------------------------------------------------------------------------------ workspace
def workspace() -> Path:
    """The workspace folder (``LEXLENS_HOME``, default ``~/.lexlens``)."""
    return Path(os.environ.get("LEXLENS_HOME") or Path.home() / ".lexlens").expanduser()


def collections_dir() -> Path:
    return workspace() / "collections"


def sources_dir() -> Path:
    """Where the app keeps uploaded sources (the images thumbnails are drawn from)."""
    return workspace() / "sources"


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_name(name: str) -> str:
    """A collection name: letters, digits, ``._-``, at most 64 characters."""
    name = (name or "").strip()
    if not _NAME.match(name):
        raise InputError(
            f"collection name {name!r}: use 1–64 letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit)"
        )
    return name


# ---------------------------------------------------------------------------- fingerprints
def vocab_hash(vocab: list[str]) -> str:
    """sha256 of the vocabulary (one token per line): two encoders share a space iff equal."""
    digest = hashlib.sha256()
    for token in vocab:
        digest.update(token.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


_FINGERPRINTS: dict[int, tuple[Any, str]] = {}


def encoder_fingerprint(encoder: Encoder) -> str:
    """A hash of the encoder's weights: every tensor, module and array it holds.

    Two loads of the same checkpoint give the same fingerprint; any changed weight (or a
    changed class→vocabulary map) gives another, so stored vectors are only reused when
    they would be computed again identically.
    """
    cached = _FINGERPRINTS.get(id(encoder))
    if cached is not None and cached[0] is encoder:
        return cached[1]
    import torch

    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{type(encoder).__module__}.{type(encoder).__qualname__}".encode())
    digest.update(vocab_hash(list(getattr(encoder, "vocab", []) or [])).encode())
    digest.update(repr(bool(encoder.bow_normalize)).encode())

    def feed(name: str, value: Any, depth: int = 0) -> None:
        if isinstance(value, torch.nn.Module):
            for key, tensor in sorted(value.state_dict().items()):
                feed(f"{name}.{key}", tensor, depth)
        elif isinstance(value, torch.Tensor):
            array = value.detach().cpu().contiguous()
            digest.update(f"{name}:{array.dtype}:{tuple(array.shape)}".encode())
            digest.update(array.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, np.ndarray):
            digest.update(f"{name}:{value.dtype}:{value.shape}".encode())
            digest.update(np.ascontiguousarray(value).tobytes())
        elif depth == 0 and hasattr(value, "__dict__") and not isinstance(value, type):
            for key, inner in sorted(vars(value).items()):
                feed(f"{name}.{key}", inner, depth + 1)

    for key, value in sorted(vars(encoder).items()):
        feed(key, value)
    fingerprint = digest.hexdigest()
    _FINGERPRINTS[id(encoder)] = (encoder, fingerprint)
    return fingerprint


def _content_key(kind: str, payload: bytes) -> str:
    return hashlib.blake2b(kind.encode() + b"\0" + payload, digest_size=16).hexdigest()


# --------------------------------------------------------------------------------- sources
@dataclass(frozen=True)
class SourceItem:
    """One item of a source, before encoding.

    ``image`` is a path relative to the source's folder (posix), ``""`` for a text item.
    """

    id: str
    text: str = ""
    image: str = ""
    captions: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    where: str = ""  # "file:line" for messages


@dataclass(frozen=True)
class Skipped:
    """An item left out of the index, and why (file or line, one-line reason)."""

    file: str
    reason: str

    def to_dict(self) -> dict:
        return {"file": self.file, "reason": self.reason}


@dataclass
class Source:
    """A resolved source: where it is, what kind, and how to read its items."""

    path: Path
    kind: str  # "folder" | "txt" | "csv" | "jsonl"
    root: Path  # the folder image paths are relative to
    label: str  # the name shown in messages
    has_images: bool = False
    has_texts: bool = False
    skipped: list[Skipped] = field(default_factory=list)


def open_source(path: str | Path, *, label: str | None = None) -> Source:
    """Check a source path and tell its kind; nothing is read beyond a header."""
    p = Path(path).expanduser()
    shown = label or str(path)
    if not p.exists():
        raise InputError(f"--source {shown}: not found")
    if p.is_dir():
        return Source(p, "folder", p, shown, has_images=True)
    suffix = p.suffix.lower()
    if suffix not in (".txt", ".csv", ".jsonl", *FEATURE_SOURCES):
        raise InputError(
            f"--source {shown}: expected a folder of images, a .txt, .csv or .jsonl file, or "
            "dense features (.npy, .safetensors, .parquet), not "
            f"{suffix or 'a file without extension'}"
        )
    if not os.access(p, os.R_OK):
        raise InputError(f"--source {shown}: permission denied (cannot read the file)")
    if suffix in FEATURE_SOURCES:  # read by lexlens.analysis.features_index
        return Source(p, "features", p.parent, shown)
    source = Source(p, suffix[1:], p.parent, shown)
    if source.kind == "txt":
        source.has_texts = True
    elif source.kind == "csv":
        header = _csv_header(p, shown)
        columns = {h.strip().lower() for h in header}
        source.has_images = "image" in columns
        source.has_texts = "text" in columns
        if not (source.has_images or source.has_texts):
            raise InputError(
                f"{shown}: needs an 'image' or a 'text' column "
                f"(columns: {', '.join(h for h in header if h) or 'none'})"
            )
    else:
        keys: set[str] = set()
        for _, row in _jsonl_rows(p, shown):
            keys |= set(row)
        source.has_images = "image" in keys
        source.has_texts = "text" in keys
        if not (source.has_images or source.has_texts):
            raise InputError(
                f"{shown}: needs an 'image' or a 'text' field "
                f"(fields: {', '.join(sorted(keys)) or 'none'})"
            )
    return source


def _open_text(path: Path, label: str):
    try:
        return open(path, encoding="utf-8-sig", newline="")  # noqa: SIM115
    except PermissionError:
        raise InputError(f"{label}: permission denied (cannot read the file)") from None
    except OSError as exc:
        raise InputError(f"{label}: cannot read the file ({exc.strerror or exc})") from None


def _csv_header(path: Path, label: str) -> list[str]:
    with _open_text(path, label) as handle:
        try:
            header = next(csv.reader(handle, strict=True), None)
        except UnicodeDecodeError:
            raise InputError(f"{label}: not UTF-8 text: save the file as UTF-8") from None
        except csv.Error as exc:
            raise InputError(f"{label}: not a readable CSV ({exc})") from None
    if not header:
        raise InputError(f"{label}: the CSV is empty (no header row)")
    return header


_CAPTION_COLUMN = re.compile(r"^captions?(?:[ _-]?\d+)?$")


def _csv_rows(path: Path, label: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of a CSV, streamed; several ``caption`` columns become a list."""
    with _open_text(path, label) as handle:
        reader = csv.reader(handle, strict=True)
        try:
            header = [h.strip() for h in next(reader)]
            lowered = [h.lower() for h in header]
            caption_cols = [i for i, h in enumerate(lowered) if _CAPTION_COLUMN.match(h)]
            for cells in reader:
                line = reader.line_num
                if not any(c.strip() for c in cells):
                    continue
                if len(cells) > len(header):
                    raise InputError(
                        f"{label}: line {line} has more cells than the header's {len(header)}"
                    )
                row: dict[str, Any] = {}
                for i, cell in enumerate(cells):
                    if i not in caption_cols and lowered[i]:
                        row[lowered[i]] = cell
                row["captions"] = [cells[i] for i in caption_cols if i < len(cells)]
                yield line, row
        except UnicodeDecodeError:
            raise InputError(
                f"{label}: not UTF-8 text (near line {reader.line_num + 1}): save it as UTF-8"
            ) from None
        except csv.Error as exc:
            raise InputError(
                f"{label}: not a readable CSV (line {reader.line_num}: {exc})"
            ) from None


def _jsonl_rows(path: Path, label: str) -> Iterator[tuple[int, dict[str, Any]]]:
    with _open_text(path, label) as handle:
        line = 0
        try:
            for line, raw in enumerate(handle, start=1):  # noqa: B007
                if not raw.strip():
                    continue
                try:
                    row = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{label}: line {line} is not JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise InputError(f"{label}: line {line} must be a JSON object")
                row = {str(k).lower(): v for k, v in row.items()}
                caps = []
                for key in sorted(k for k in row if _CAPTION_COLUMN.match(k)):
                    value = row.pop(key)
                    caps.extend(value if isinstance(value, list) else [value])
                row["captions"] = [str(c) for c in caps if c is not None]
                yield line, row
        except UnicodeDecodeError:
            raise InputError(
                f"{label}: not UTF-8 text (near line {line + 1}): save it as UTF-8"
            ) from None


def _inside(root: Path, relative: str) -> str | None:
    """``relative`` normalised inside ``root`` (posix), or ``None`` when it leaves it.

    Checked on the path as written (``..`` and absolute paths elsewhere are refused);
    symbolic links a user placed inside the folder are followed as they are.
    """
    raw = relative.strip().replace("\\", "/")
    if not raw:
        return None
    candidate = Path(raw)
    root_abs = Path(os.path.abspath(root))
    full = Path(os.path.normpath(candidate if candidate.is_absolute() else root_abs / candidate))
    try:
        return full.relative_to(root_abs).as_posix()
    except ValueError:
        return None


def iter_items(source: Source) -> Iterator[SourceItem | Skipped]:
    """The source's items in order (or :class:`Skipped` notes), streamed."""
    if source.kind == "folder":
        yield from _folder_items(source)
        return
    if source.kind == "txt":
        with _open_text(source.path, source.label) as handle:
            n = 0
            try:
                for line, raw in enumerate(handle, start=1):
                    text = raw.strip()
                    if text:
                        yield SourceItem(str(n), text=text, where=f"{source.label}:{line}")
                        n += 1
            except UnicodeDecodeError:
                raise InputError(f"{source.label}: not UTF-8 text: save it as UTF-8") from None
        return
    rows = (
        _csv_rows(source.path, source.label)
        if source.kind == "csv"
        else _jsonl_rows(source.path, source.label)
    )
    for n, (line, row) in enumerate(rows):
        where = f"{source.label}:{line}"
        text = str(row.get("text") or "").strip()
        image_cell = str(row.get("image") or "").strip()
        image = ""
        if image_cell:
            image = _inside(source.root, image_cell) or ""
            if not image:
                yield Skipped(
                    where, f"image path {image_cell!r} leaves the source's folder: refused"
                )
                continue
        if not text and not image:
            yield Skipped(where, "neither an image nor a text")
            continue
        item_id = str(row.get("id") or "").strip() or (image if image else str(n))
        captions = tuple(c.strip() for c in row.get("captions", []) if str(c).strip())
        yield SourceItem(
            item_id,
            text=text,
            image=image,
            captions=captions,
            labels=tuple(sorted(parse_labels(row.get("labels")))),
            where=where,
        )


def _folder_items(source: Source) -> Iterator[SourceItem]:
    for dirpath, dirnames, filenames in os.walk(source.path, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or not name.lower().endswith(IMAGE_SUFFIXES):
                continue
            rel = (Path(dirpath) / name).relative_to(source.path).as_posix()
            yield SourceItem(rel, image=rel, where=f"{source.label}/{rel}")


def source_fingerprint(source: Source) -> str:
    """A cheap fingerprint of the source: its file's bytes, and each image's size and mtime."""
    digest = hashlib.sha256(f"{source.kind}\0".encode())
    if source.kind != "folder":
        try:
            with open(source.path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError as exc:
            raise InputError(f"{source.label}: cannot read the file ({exc.strerror})") from None
    if source.has_images:
        for item in iter_items(source):
            if isinstance(item, SourceItem) and item.image:
                digest.update(item.image.encode("utf-8") + b"\0")
                try:
                    st = (source.root / item.image).stat()
                    digest.update(f"{st.st_size}:{st.st_mtime_ns}\n".encode())
                except OSError:
                    digest.update(b"missing\n")
    return digest.hexdigest()


def count_items(source: Source) -> int:
    """An upper bound of the number of items (for the progress bar), cheaply."""
    if source.kind == "folder":
        return sum(
            1
            for _, dirs, files in os.walk(source.path)
            for f in files
            if not f.startswith(".") and f.lower().endswith(IMAGE_SUFFIXES)
        )
    try:
        with open(source.path, "rb") as handle:
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    except OSError:
        return 0
    return max(lines - (1 if source.kind == "csv" else 0), 1)


# --------------------------------------------------------------------------- .npy writing
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


# ------------------------------------------------------------------------------ the writer
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
        self._rows: list[dict] = []
        self._parquet = pq.ParquetWriter(
            folder / "items.parquet", _meta_schema(), compression="zstd"
        )
        self.ids: set[str] = set()

    @property
    def count(self) -> int:
        return len(self.indptr) - 1

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
    :func:`lexlens.analysis.search.top_items`). The CSR is read with plain reads and the
    output's pages are written back and dropped after every chunk, so the process's
    resident memory stays near one chunk whatever the index's size.
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


# ------------------------------------------------------------------------------ the reader
@dataclass(frozen=True)
class IndexBatch:
    """A batch of consecutive items: their rows ``[start, stop)`` as a scipy CSR matrix."""

    start: int
    stop: int
    vectors: Any  # scipy.sparse.csr_matrix [stop - start, |V|], float32
    ids: list[str]
    meta: list[dict]


class StoredIndex:
    """An opened index: memory-mapped CSR arrays, metadata on demand, the manifest.

    Opening checks the manifest and the arrays' shapes against it (a truncated or
    corrupted index is refused with one line, never a traceback).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
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
        self._groups: dict[int, list[dict]] = {}
        self._vocab: list[str] | None = None

    def corrupt(self, why: str) -> InputError:
        return InputError(
            f"{self.label}: not a valid Lexlens index ({why}): rebuild it with `lexlens index`"
        )

    def _open_arrays(self) -> None:
        m = self.manifest
        n, nnz, v = int(m["counts"]["items"]), int(m["counts"]["nnz"]), int(m["vocab"]["size"])
        files = m.get("files", {})
        for name, size in files.items():
            path = self.path / name
            if not path.is_file():
                raise self.corrupt(f"{name} is missing")
            if path.stat().st_size != int(size):
                raise self.corrupt(
                    f"{name} has {path.stat().st_size:,} bytes, expected {int(size):,}"
                )

        def load(name: str, dtype: Any, length: int) -> np.ndarray:
            array = np.load(self.path / name, mmap_mode="r", allow_pickle=False)
            if array.dtype != np.dtype(dtype) or array.shape != (length,):
                raise self.corrupt(f"{name} holds {array.dtype}{array.shape}, expected {length}")
            return array

        self.indptr = load("indptr.npy", np.int64, n + 1)
        self.indices = load("indices.npy", np.int32, nnz)
        self.data = load("data.npy", np.float32, nnz)
        self.norms = load("norms.npy", np.float32, n)
        if n and (int(self.indptr[0]) != 0 or int(self.indptr[-1]) != nnz):
            raise self.corrupt("row pointers do not span the stored weights")
        if n and np.any(np.diff(self.indptr) < 0):
            raise self.corrupt("row pointers go backwards")
        self.postings = None
        if "postings_indptr.npy" in files:
            scale = json.loads((self.path / "postings_scale.json").read_text())["scale"]
            self.postings = (
                load("postings_indptr.npy", np.int64, v + 1),
                load("postings_items.npy", np.int32, nnz),
                load("postings_weights.npy", np.float16, nnz),
                float(scale),
            )
        import pyarrow.parquet as pq

        self._parquet = pq.ParquetFile(self.path / "items.parquet")
        if self._parquet.metadata.num_rows != n:
            raise self.corrupt(
                f"items.parquet has {self._parquet.metadata.num_rows} rows, expected {n}"
            )

    # -- basics ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.manifest["counts"]["items"])

    @property
    def nnz(self) -> int:
        return int(self.manifest["counts"]["nnz"])

    @property
    def vocab_size(self) -> int:
        return int(self.manifest["vocab"]["size"])

    @property
    def vocab(self) -> list[str]:
        if self._vocab is None:
            lines = (self.path / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
            if len(lines) != self.vocab_size:
                raise self.corrupt(f"vocab.txt has {len(lines)} tokens, expected {self.vocab_size}")
            self._vocab = lines
        return self._vocab

    @property
    def encoder_name(self) -> str:
        return str(self.manifest["encoder"]["name"])

    @property
    def modality(self) -> str:
        return str(self.manifest.get("modality", "text"))

    @property
    def csr_bytes(self) -> int:
        """Bytes of the CSR arrays alone (indptr int64, indices int32, data float32)."""
        return 8 * (len(self) + 1) + 8 * self.nnz

    @property
    def disk_bytes(self) -> int:
        return sum(int(s) for s in self.manifest.get("files", {}).values()) + (
            (self.path / MANIFEST).stat().st_size
        )

    # -- vectors --------------------------------------------------------------------------
    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Item ``i``'s sparse vector: (vocabulary ids, weights)."""
        a, b = int(self.indptr[i]), int(self.indptr[i + 1])
        cols = np.asarray(self.indices[a:b])
        if cols.size and (cols.min() < 0 or cols.max() >= self.vocab_size):
            raise self.corrupt(f"item {i} has vocabulary ids out of range")
        return cols, np.asarray(self.data[a:b])

    def rows(self, start: int, stop: int):
        """Items ``[start, stop)`` as a scipy CSR matrix (float32)."""
        import scipy.sparse as sp

        a, b = int(self.indptr[start]), int(self.indptr[stop])
        cols = np.asarray(self.indices[a:b])
        if cols.size and (cols.min() < 0 or cols.max() >= self.vocab_size):
            raise self.corrupt(f"items {start}–{stop - 1} have vocabulary ids out of range")
        return sp.csr_matrix(
            (np.asarray(self.data[a:b]), cols, np.asarray(self.indptr[start : stop + 1]) - a),
            shape=(stop - start, self.vocab_size),
        )

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
    def _group(self, g: int) -> list[dict]:
        if g not in self._groups:
            if len(self._groups) > 64:
                self._groups.clear()
            try:
                self._groups[g] = self._parquet.read_row_group(g).to_pylist()
            except Exception as exc:  # pyarrow raises its own types for damaged files
                raise self.corrupt(f"items.parquet: {str(exc).splitlines()[0]}") from None
        return self._groups[g]

    def meta(self, rows: Any, columns: list[str] | None = None) -> list[dict]:
        """Metadata dicts of the given rows (``id``, ``kind``, ``image``, ``text``,
        ``captions``, ``labels``, …), with ``row`` added."""
        out = []
        for r in rows:
            r = int(r)
            row = dict(self._group(r // ROW_GROUP)[r % ROW_GROUP])
            row["row"] = r
            out.append({k: row[k] for k in columns} | {"row": r} if columns else row)
        return out

    def column(self, name: str) -> list:
        """One metadata column for every item (e.g. ``labels`` for an evaluation)."""
        try:
            return self._parquet.read(columns=[name]).column(name).to_pylist()
        except Exception as exc:  # noqa: BLE001
            raise self.corrupt(f"items.parquet: {str(exc).splitlines()[0]}") from None

    def image_path(self, meta: dict) -> Path | None:
        """Absolute path of an item's image (``None`` for a text item)."""
        if not meta.get("image"):
            return None
        return Path(self.manifest["source"]["root"]) / meta["image"]

    @property
    def has_labels(self) -> bool:
        return bool(self.manifest["counts"].get("labelled", 0))

    def card(self) -> dict:
        """What a collection holds, for lists and the Collections page."""
        m = self.manifest
        return {
            "name": self.path.name,
            "path": str(self.path),
            "encoder": m["encoder"]["name"],
            "modality": m.get("modality"),
            "items": len(self),
            "nnz": self.nnz,
            "mean_nnz": self.nnz / max(1, len(self)),
            "gate_k": m["gate_k"],
            "labelled": m["counts"].get("labelled", 0),
            "captioned": m["counts"].get("captioned", 0),
            "skipped": m["counts"].get("skipped", 0),
            "source": m["source"]["path"],
            "created": m.get("created"),
            "updated": m.get("updated"),
            "disk_bytes": self.disk_bytes,
            "csr_bytes": self.csr_bytes,
            "postings": self.postings is not None,
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


def read_manifest(path: Path) -> dict:
    """The manifest of an index folder, checked; one-line errors for anything else."""
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
        int(manifest["counts"]["items"])
        int(manifest["counts"]["nnz"])
        int(manifest["vocab"]["size"])
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        raise InputError(
            f"{label}: {MANIFEST} is not a valid manifest ({exc}): rebuild the index"
        ) from None
    return manifest


def open_index(path: str | Path) -> StoredIndex:
    """Open an index folder (memory-mapped); one-line :class:`InputError` when invalid."""
    return StoredIndex(path)


# ------------------------------------------------------------------------------ building
@dataclass(frozen=True)
class IndexResult:
    """What a build did: counts, skipped items, where the index is, its manifest."""

    out: str
    encoder: str
    items: int
    encoded: int
    reused: int
    skipped: list[Skipped]
    up_to_date: bool
    seconds: float
    manifest: dict
    notes: list[str]

    @property
    def items_per_second(self) -> float:
        return self.encoded / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict:
        return {
            "out": self.out,
            "encoder": self.encoder,
            "items": self.items,
            "encoded": self.encoded,
            "reused": self.reused,
            "skipped": [s.to_dict() for s in self.skipped],
            "up_to_date": self.up_to_date,
            "manifest": self.manifest,
            "notes": self.notes,
        }


def _previous(out: Path) -> StoredIndex | None:
    if not (out / MANIFEST).is_file():
        return None
    try:
        return StoredIndex(out)
    except InputError:
        return None


def _check_out(out: Path) -> None:
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


def _clean_stale(out: Path) -> None:
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


def gated_sparse(encoding: Any, vocab: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
    """``E = V ⊙ G`` of an encoding as (sorted vocabulary ids int32, weights float32)."""
    from lexlens.analysis.contrib import gate

    dense = gate(encoding, vocab, k)
    cols = np.flatnonzero(dense).astype(np.int32)
    return cols, dense[cols].astype(np.float32)


def _check_k(k: int) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k < -1:
        raise InputError("--topk must be -1 (all dimensions), 0 (own tokens only) or positive")
    return k


def build_index(
    encoder: Encoder,
    source: str | Path,
    out: str | Path,
    *,
    topk: int = 768,
    batch_size: int = 32,
    progress: Progress | None = None,
    ray: str | None = None,
    postings: bool | None = None,
    source_label: str | None = None,
    encoder_spec: str | None = None,
    captions: str | Path | None = None,
    ids: str | Path | None = None,
) -> IndexResult:
    """Encode a source into an index folder at ``out`` (see the module docstring).

    ``ray``: ``None`` encodes in this process; ``"local"`` starts a local Ray, ``"auto"`` or
    ``"ray://HOST:PORT"`` uses a cluster (Ray Data ``map_batches``, one encoder per actor).
    ``postings``: store the inverted index (default: from :data:`POSTINGS_MIN_NNZ` non-zeros).
    A dense features file (.npy, .safetensors, .parquet) goes through a feature head (D2S)
    with its ``ids`` and ``captions`` files: :mod:`lexlens.analysis.features_index`.
    """
    started = time.perf_counter()
    _check_k(topk)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InputError("--batch-size must be a positive integer")
    _check_features_options(source, ray, captions, ids)
    if is_features_source(source):
        from lexlens.analysis.features_index import build_features_index

        return build_features_index(
            encoder, source, out, topk=topk, batch_size=batch_size, captions=captions, ids=ids,
            progress=progress, postings=postings, encoder_spec=encoder_spec,
            source_label=source_label,
        )  # fmt: skip
    INDEX_NEEDS.check(encoder)
    src = open_source(source, label=source_label)
    out = Path(out).expanduser()
    if src.kind == "folder" and not encoder.can(Capability.IMAGE_LEXICAL):
        raise InputError(
            f"--source {src.label} is a folder of images but {encoder.name!r} does not encode "
            "images: pick an image encoder (e.g. efficientnet-lite0-lexical)"
        )
    if src.has_images and not src.has_texts and not encoder.can(Capability.IMAGE_LEXICAL):
        raise InputError(f"{src.label} lists images but {encoder.name!r} does not encode images")
    if not src.has_images and not encoder.can(Capability.TEXT_LEXICAL):
        raise InputError(f"{src.label} holds texts but {encoder.name!r} does not encode text")
    _check_out(out)
    _clean_stale(out)
    modality = "image" if src.has_images and encoder.can(Capability.IMAGE_LEXICAL) else "text"
    fingerprint = encoder_fingerprint(encoder)
    v_hash = vocab_hash(encoder.vocab)
    s_fingerprint = source_fingerprint(src)
    old = _previous(out)
    notes: list[str] = []
    compatible = (
        old is not None
        and old.manifest["encoder"].get("fingerprint") == fingerprint
        and old.manifest["vocab"].get("hash") == v_hash
        and old.manifest.get("gate_k") == topk
        and old.manifest.get("modality") == modality
    )
    if old is not None and not compatible:
        notes.append(
            "the stored index was built with another encoder, vocabulary or gate k: "
            "every item is encoded again"
        )
    if (
        compatible
        and old.manifest["source"].get("fingerprint") == s_fingerprint
        and old.manifest["source"].get("root") == str(src.root.resolve())
        and (postings is None or postings == (old.postings is not None))
    ):
        return IndexResult(
            str(out), encoder.name, len(old), 0, 0,
            [Skipped(**s) for s in old.manifest.get("skipped", [])],
            True, time.perf_counter() - started, old.manifest,
            ["source and encoder unchanged: nothing to encode"],
        )  # fmt: skip
    reuse: dict[str, int] = {}
    stats: dict[str, tuple[int, int, str]] = {}
    if compatible:
        keys = old.column("content_key")
        images = old.column("image")
        sizes = old.column("size")
        mtimes = old.column("mtime_ns")
        for row, key in enumerate(keys):
            reuse.setdefault(key, row)
            if images[row]:
                stats[images[row]] = (sizes[row], mtimes[row], key)
    tmp = out.parent / f".{out.name}.building-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    writer = None
    try:
        writer = IndexWriter(tmp, len(encoder.vocab))
        counters = _encode_into(
            writer, encoder, src, modality, topk, batch_size, reuse, stats, old,
            progress, ray, encoder_spec or encoder.name,
        )  # fmt: skip
        if writer.count == 0:
            first = src.skipped[0] if src.skipped else None
            why = f" ({first.file}: {first.reason})" if first else ""
            if src.kind == "folder" and not src.skipped:
                raise InputError(
                    f"--source {src.label}: no images found (looked for "
                    f"{', '.join(IMAGE_SUFFIXES)} in every sub-folder)"
                )
            raise InputError(
                f"--source {src.label}: no item could be indexed: {len(src.skipped)} skipped{why}"
            )
        n_items = writer.count
        sizes_out = writer.close(encoder.vocab, postings)
        writer = None
        now = datetime.now(UTC).isoformat(timespec="seconds")
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "encoder": {
                "name": encoder.name,
                "spec": encoder_spec or encoder.name,
                "fingerprint": fingerprint,
                "class": type(encoder).__name__,
                "capabilities": sorted(str(c) for c in encoder.capabilities),
                "bow_normalize": bool(encoder.bow_normalize),
            },
            "vocab": {"size": len(encoder.vocab), "hash": v_hash},
            "gate_k": topk,
            "modality": modality,
            "source": {
                "path": str(src.path.resolve()),
                "root": str(src.root.resolve()),
                "kind": src.kind,
                "fingerprint": s_fingerprint,
            },
            "counts": {
                "items": n_items,
                "nnz": counters["nnz"],
                "encoded": counters["encoded"],
                "reused": counters["reused"],
                "skipped": len(src.skipped),
                "labelled": counters["labelled"],
                "captioned": counters["captioned"],
            },
            "skipped": [s.to_dict() for s in src.skipped[:1000]],
            "created": old.manifest.get("created", now) if old is not None else now,
            "updated": now,
            "files": sizes_out,
            "nonnegative": counters["nonnegative"],
            "lexlens": _version(),
        }
        _seal(tmp, out, manifest)
    except BaseException as exc:
        if writer is not None:
            writer.abort()
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            why = "the disk is full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
            kept = "the previous index is unchanged" if old is not None else "nothing was written"
            raise InputError(f"could not write the index at {out} ({why}): {kept}") from None
        raise
    seconds = time.perf_counter() - started
    if src.skipped:
        notes.append(f"{len(src.skipped)} item(s) skipped (listed)")
    return IndexResult(
        str(out), encoder.name, manifest["counts"]["items"], counters["encoded"],
        counters["reused"], list(src.skipped), False, seconds, manifest, notes,
    )  # fmt: skip


def _seal(tmp: Path, out: Path, manifest: dict) -> None:
    """Write the manifest last (fsynced), then swap the finished folder into place."""
    data = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    with open(tmp / MANIFEST, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    _fsync_dir(tmp)
    _install(tmp, out)


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
    manifest's encoder entry (``name`` at least). Atomic like :func:`build_index`."""
    out = Path(out).expanduser()
    _check_out(out)
    tmp = out.parent / f".{out.name}.building-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    writer: IndexWriter | None = IndexWriter(tmp, len(vocab))
    try:
        counts = {"nnz": 0, "labelled": 0, "captioned": 0}
        for meta, cols, vals in rows:
            order = np.argsort(cols, kind="stable")
            cols = np.asarray(cols, np.int32)[order]
            vals = np.asarray(vals, np.float32)[order]
            full = {"kind": modality, "image": "", "text": "", "captions": [], "labels": [],
                    "content_key": "", "size": 0, "mtime_ns": 0} | dict(meta)  # fmt: skip
            writer.add(full, cols, vals)
            counts["nnz"] += int(vals.size)
            counts["labelled"] += bool(full["labels"])
            counts["captioned"] += bool(full["captions"])
        n_items, nonnegative = writer.count, writer.nonnegative
        sizes = writer.close(vocab, postings)
        writer = None
        now = datetime.now(UTC).isoformat(timespec="seconds")
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "encoder": {"fingerprint": "", "capabilities": []} | dict(encoder),
            "vocab": {"size": len(vocab), "hash": vocab_hash(vocab)},
            "gate_k": gate_k,
            "modality": modality,
            "source": {"path": "", "root": "", "kind": "external", "fingerprint": ""}
            | dict(source or {}),
            "counts": {"items": n_items, "encoded": n_items, "reused": 0, "skipped": 0} | counts,
            "skipped": [],
            "created": now,
            "updated": now,
            "files": sizes,
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
            raise InputError(f"could not write the index at {out} ({why})") from None
        raise
    return StoredIndex(out)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("lexlens")
    except Exception:  # noqa: BLE001
        return "unknown"


@dataclass
class _Pending:
    item: SourceItem
    kind: str  # what gets encoded: "image" | "text"
    key: str = ""
    size: int = 0
    mtime_ns: int = 0
    payload: bytes | str = b""
    reuse_row: int | None = None


def _prepare(
    item: SourceItem,
    src: Source,
    modality: str,
    stats: dict[str, tuple[int, int, str]],
) -> _Pending | Skipped:
    """Decide what an item encodes and its content key (reading image bytes if needed)."""
    if modality == "image" and item.image:
        path = src.root / item.image
        try:
            st = path.stat()
            if not path.is_file():
                return Skipped(item.where, "not a file")
            known = stats.get(item.image)
            if known and known[0] == st.st_size and known[1] == st.st_mtime_ns:
                return _Pending(item, "image", known[2], st.st_size, st.st_mtime_ns)
            data = path.read_bytes()
        except FileNotFoundError:
            return Skipped(item.where, "image file not found")
        except PermissionError:
            return Skipped(item.where, "permission denied")
        except OSError as exc:
            return Skipped(item.where, f"cannot read ({exc.strerror or exc})")
        return _Pending(
            item, "image", _content_key("image", data), st.st_size, st.st_mtime_ns, data
        )
    if not item.text:
        return Skipped(item.where, "no text to encode (the encoder reads text only)")
    return _Pending(
        item, "text", _content_key("text", item.text.encode("utf-8")), payload=item.text
    )


def _encode_into(
    writer: IndexWriter,
    encoder: Encoder,
    src: Source,
    modality: str,
    topk: int,
    batch_size: int,
    reuse: dict[str, int],
    stats: dict[str, tuple[int, int, str]],
    old: StoredIndex | None,
    progress: Progress | None,
    ray: str | None,
    spec: str,
) -> dict:
    """Stream the source into ``writer``: reuse stored vectors, encode the rest (here, or
    on Ray), list what cannot be read."""
    total = count_items(src)
    counters = {"encoded": 0, "reused": 0, "nnz": 0, "labelled": 0, "captioned": 0}
    done = 0

    def tick(n: int = 1) -> None:
        nonlocal done
        done += n
        if progress and (done % max(1, batch_size) == 0 or done >= total):
            progress(min(done, total), max(total, done), f"{writer.count} items indexed")

    def write(p: _Pending, cols: np.ndarray, vals: np.ndarray, reused: bool) -> None:
        item = p.item
        writer.add(
            {
                "id": item.id, "kind": p.kind, "image": item.image, "text": item.text,
                "captions": list(item.captions), "labels": list(item.labels),
                "content_key": p.key, "size": p.size, "mtime_ns": p.mtime_ns,
                "where": item.where,
            },
            cols,
            vals,
        )  # fmt: skip
        counters["reused" if reused else "encoded"] += 1
        counters["nnz"] += int(vals.size)
        counters["labelled"] += bool(item.labels)
        counters["captioned"] += bool(item.captions)

    def prepared() -> Iterator[_Pending]:
        for entry in iter_items(src):
            if isinstance(entry, SourceItem):
                entry = _prepare(entry, src, modality, stats)
            if isinstance(entry, Skipped):
                src.skipped.append(entry)
                tick()
                continue
            entry.reuse_row = reuse.get(entry.key)
            yield entry

    def reused_row(p: _Pending) -> tuple[np.ndarray, np.ndarray]:
        assert old is not None and p.reuse_row is not None
        return old.row(p.reuse_row)

    if ray is None:
        pending: list[_Pending] = []

        def flush() -> None:
            todo = [p for p in pending if p.reuse_row is None]
            results = encode_payloads(
                encoder, topk, [(p.kind, p.payload, p.item.where) for p in todo], src.root
            )
            by_id = {id(p): r for p, r in zip(todo, results, strict=True)}
            for p in pending:
                if p.reuse_row is not None:
                    write(p, *reused_row(p), reused=True)
                elif isinstance(by_id[id(p)], Skipped):
                    src.skipped.append(by_id[id(p)])
                else:
                    write(p, *by_id[id(p)], reused=False)
                tick()
            pending.clear()

        for p in prepared():
            pending.append(p)
            if len(pending) >= batch_size:
                flush()
        if pending:
            flush()
    else:
        from lexlens.analysis.ray_encode import RayEncoder

        engine = RayEncoder(encoder, topk, batch_size, address=ray, spec=spec)
        results = None
        try:
            items = []
            for p in prepared():
                p.payload = p.payload if p.kind == "text" else b""  # actors read the file
                items.append(p)
            todo = [
                (p.kind, p.item.image if p.kind == "image" else str(p.payload), p.item.where)
                for p in items
                if p.reuse_row is None
            ]
            results = engine.encode_all(todo, src.root)
            for p in items:
                if p.reuse_row is not None:
                    write(p, *reused_row(p), reused=True)
                else:
                    result = next(results)
                    if isinstance(result, str):
                        src.skipped.append(Skipped(p.item.where, result))
                    else:
                        write(p, *result, reused=False)
                tick()
        finally:
            if results is not None:
                results.close()  # release Ray's iterator while Ray is still up
            engine.close()
    counters["nonnegative"] = writer.nonnegative
    return counters


def encode_payloads(
    encoder: Encoder, topk: int, payloads: list[tuple[str, bytes | str, str]], root: Path
) -> list[tuple[np.ndarray, np.ndarray] | Skipped]:
    """Encode (kind, payload, where) triples (image bytes or a text) into gated sparse
    vectors; unreadable images become :class:`Skipped` (the rest of the batch goes on)."""
    from lexlens.models.images import load_image

    out: list[Any] = [None] * len(payloads)
    images, image_slots, texts, text_slots = [], [], [], []
    for i, (kind, payload, where) in enumerate(payloads):
        if kind == "image":
            try:
                images.append(load_image(payload, name=where))
                image_slots.append(i)
            except InputError as exc:
                reason = str(exc)
                out[i] = Skipped(where, reason.split(": ", 1)[1] if ": " in reason else reason)
        else:
            texts.append(str(payload))
            text_slots.append(i)
    if images:
        for slot, enc in zip(
            image_slots,
            _encode_images(encoder, images, [payloads[s][2] for s in image_slots]),
            strict=True,
        ):
            out[slot] = enc if isinstance(enc, Skipped) else gated_sparse(enc, encoder.vocab, topk)
    if texts:
        encodings = encoder.encode_texts(texts, side="document", keep_units=False)
        for slot, enc in zip(text_slots, encodings, strict=True):
            out[slot] = gated_sparse(enc, encoder.vocab, topk)
    return out


def _encode_images(encoder: Encoder, images: list, wheres: list[str]) -> list:
    """Encode a batch; if the batch fails, encode one by one and skip the failing ones."""
    try:
        return encoder.encode_images(images, keep_units=False)
    except InputError:
        out = []
        for image, where in zip(images, wheres, strict=True):
            try:
                out.append(encoder.encode_images([image], keep_units=False)[0])
            except InputError as exc:
                out.append(Skipped(where, str(exc)))
        return out


def _check_features_options(source: str | Path, ray: str | None, captions: Any, ids: Any) -> None:
    """``--captions`` / ``--ids`` belong to a dense features source, ``--ray`` does not."""
    if is_features_source(source):
        if ray is not None:
            raise InputError(
                "--ray encodes images and texts: dense features are encoded in this process "
                "(a D2S head is one matrix product per batch)"
            )
    elif captions is not None or ids is not None:
        raise InputError(
            "--captions and --ids apply to a dense features source (.npy, .safetensors, "
            ".parquet); a text or image source names its captions in its own columns"
        )


def index_collection(
    encoder: str | Encoder,
    source: str | Path,
    out: str | Path,
    *,
    device: str | None = None,
    topk: int = 768,
    batch_size: int = 32,
    progress: Progress | None = None,
    ray: str | None = None,
    postings: bool | None = None,
    captions: str | Path | None = None,
    ids: str | Path | None = None,
) -> IndexResult:
    """``lexlens index``: the source, ``--out`` and options are checked before the encoder
    loads, then :func:`build_index` runs (a dense features source: every file is read and
    checked first, then :func:`lexlens.analysis.features_index.build_features_index`)."""
    _check_k(topk)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InputError("--batch-size must be a positive integer")
    open_source(source)
    _check_features_options(source, ray, captions, ids)
    _check_out(Path(out).expanduser())
    if is_features_source(source):
        from lexlens.analysis.features_index import build_features_index, read_source
        from lexlens.models import load_encoder

        table = read_source(source, captions=captions, ids=ids)
        model = encoder if isinstance(encoder, Encoder) else load_encoder(encoder, device=device)
        spec = encoder.name if isinstance(encoder, Encoder) else encoder
        return build_features_index(
            model, source, out, topk=topk, batch_size=batch_size, captions=captions, ids=ids,
            progress=progress, postings=postings, encoder_spec=spec, table=table,
        )  # fmt: skip
    if ray is not None:
        from lexlens.analysis.ray_encode import check_ray

        check_ray(ray)
    if isinstance(encoder, Encoder):
        model, spec = encoder, encoder.name
    else:
        from lexlens.models import load_encoder

        model, spec = load_encoder(encoder, device=device), encoder
    return build_index(
        model, source, out, topk=topk, batch_size=batch_size, progress=progress, ray=ray,
        postings=postings, encoder_spec=spec,
    )  # fmt: skip


# ---------------------------------------------------------------------- the workspace's list
def list_collections(home: Path | None = None) -> list[dict]:
    """Cards of the stored collections in the workspace (broken ones with their error)."""
    root = (home or workspace()) / "collections"
    out = []
    if not root.is_dir():
        return out
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        try:
            out.append(StoredIndex(entry).card())
        except InputError as exc:
            out.append({"name": entry.name, "path": str(entry), "error": str(exc)})
    return out


def delete_collection(name: str, home: Path | None = None) -> None:
    """Delete a stored collection (and the uploaded source the app kept for it)."""
    name = check_name(name)
    base = home or workspace()
    target = base / "collections" / name
    if not target.is_dir():
        raise InputError(f"no stored collection named {name!r}")
    trash = target.parent / f".{name}.deleting-{uuid.uuid4().hex[:8]}"
    os.rename(target, trash)
    shutil.rmtree(trash, ignore_errors=True)
    uploaded = base / "sources" / name
    if uploaded.is_dir():
        shutil.rmtree(uploaded, ignore_errors=True)


def save_upload_source(name: str, files: list[tuple[str, bytes]], home: Path | None = None) -> Path:
    """Keep uploaded files as a collection's source folder; returns the path to index.

    One .csv/.jsonl/.txt among the files is the source (its image paths are relative to
    the folder, where the uploaded images are kept); otherwise the folder of images is.
    """
    name = check_name(name)
    if not files:
        raise InputError("upload at least one file")
    folder = (home or workspace()) / "sources" / name
    tables = [n for n, _ in files if Path(n).suffix.lower() in (".csv", ".jsonl", ".txt")]
    if len(tables) > 1:
        raise InputError(f"upload one table (.csv, .jsonl or .txt), not {len(tables)}")
    staging = folder.parent / f".{name}.upload-{uuid.uuid4().hex[:8]}"
    staging.mkdir(parents=True)
    try:
        for file_name, data in files:
            safe = Path(file_name).name
            if not safe or safe.startswith("."):
                raise InputError(f"{file_name!r}: not a usable file name")
            (staging / safe).write_bytes(data)
        if folder.exists():
            shutil.rmtree(folder)
        os.rename(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder / Path(tables[0]).name if tables else folder


def labels_text(labels: list[str] | tuple[str, ...]) -> str:
    return LABEL_SEPARATOR.join(labels)


def load_sample_photos(dest: Path) -> Path:
    """Materialise the sample photo collection: ``data/photos.csv`` (captions and labels
    written for scikit-image's photos) beside copies of the photos; returns the CSV path."""
    try:
        import skimage
    except ImportError:
        raise InputError(
            "the sample photos come from scikit-image: `pip install scikit-image`"
        ) from None
    photos = Path(skimage.__file__).parent / "data"
    table = Path(__file__).resolve().parent.parent / "data" / "photos.csv"
    dest.mkdir(parents=True, exist_ok=True)
    with open(table, encoding="utf-8", newline="") as handle:
        names = [row["image"] for row in csv.DictReader(handle)]
    for name in names:
        target = dest / name
        if not target.exists():
            shutil.copyfile(photos / name, target)
    shutil.copyfile(table, dest / "photos.csv")
    return dest / "photos.csv"


__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "INDEX_NEEDS",
    "IndexBatch",
    "IndexResult",
    "Skipped",
    "SourceItem",
    "StoredIndex",
    "build_index",
    "collections_dir",
    "delete_collection",
    "encoder_fingerprint",
    "list_collections",
    "open_index",
    "open_source",
    "save_upload_source",
    "vocab_hash",
    "workspace",
]
