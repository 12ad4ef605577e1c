"""Sources of a stored collection: what a user points ``lexlens index --source`` at, read
as a stream of items.

A *source* is a folder of images (recursive), a .txt/.csv/.jsonl of texts, or a .csv/.jsonl
of items with ``image`` (a path relative to that file) and/or ``text``, and optional ``id``,
``caption`` (several columns allowed: ``caption``, ``caption_2``, ``captions``…) and
``labels`` (``|``-separated); or a file of dense features for a D2S (Dense2Sparse) head
(.npy, .safetensors, .parquet: :mod:`.features_index`). Nothing is encoded here: items
that cannot be used are reported as :class:`Skipped` (file or line, one-line reason).
Image paths that leave the source's folder are refused. Every source's items pass through
one check (:func:`~.items.checked_items`): an id a TREC file cannot hold (empty, or with
whitespace) or a repeated id is skipped and named. An id Lexlens makes from a file's path
(a folder's image, a row without ``id``) writes its whitespace as ``%20``
(:func:`~.items.derived_id`). Text and JSON-lines files are read in lines ending at ``\n``
(a bare ``\r`` stays inside its line), each at most
:data:`~lexlens.analysis.core.inputs.MAX_LINE_BYTES`; a longer line, a line that is not
UTF-8 or not a JSON object is skipped with its number.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lexlens.analysis.core.inputs import (
    inside_folder,
    json_line,
    open_text,
    parse_labels,
    read_csv,
    read_error,
    regular_file,
    text_lines,
)
from lexlens.analysis.core.results import Record, internal
from lexlens.analysis.datasets.feature_files import FEATURE_SUFFIXES
from lexlens.analysis.datasets.items import Skipped, SourceItem, checked_items, derived_id
from lexlens.models.base import InputError

#: Image files a folder source picks up (case-insensitive).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp")


def is_features_source(path: str | Path) -> bool:
    """A dense features file (by its suffix)."""
    return isinstance(path, (str, Path)) and Path(path).suffix.lower() in FEATURE_SUFFIXES


@dataclass(frozen=True)
class Source(Record):
    """A resolved source: where it is, what kind, and what its items hold."""

    path: Path
    kind: str  # "folder" | "txt" | "csv" | "jsonl" | "features"
    root: Path  # the folder image paths are relative to
    label: str  # the name shown in messages
    has_images: bool = False
    has_texts: bool = False
    benchmark: Any = internal(default=None)  # kind "benchmark": its reader (queries, qrels)


def open_source(path: str | Path | Any, *, label: str | None = None) -> Source:
    """Check a source path and tell its kind; nothing is read beyond a header. An opened
    benchmark (:func:`lexlens.analysis.datasets.readers.open_benchmark`) is a source too."""
    if not isinstance(path, (str, Path)):  # a benchmark: its items, queries and judgements
        return Source(
            Path(path.root),
            "benchmark",
            Path(path.root),
            label or path.label,
            has_images=path.has_images,
            has_texts=not path.has_images,
            benchmark=path,
        )
    p = Path(path).expanduser()
    shown = label or str(path)
    if not p.exists():
        raise InputError(f"--source {shown}: not found")
    if p.is_dir():
        return Source(p, "folder", p, shown, has_images=True)
    suffix = p.suffix.lower()
    if suffix not in (".txt", ".csv", ".jsonl", *FEATURE_SUFFIXES):
        raise InputError(
            f"--source {shown}: expected a folder of images, a .txt, .csv or .jsonl file, or "
            "dense features (.npy, .safetensors, .parquet), not "
            f"{suffix or 'a file without extension'}"
        )
    regular_file(p, f"--source {shown}")
    if not os.access(p, os.R_OK):
        raise InputError(f"--source {shown}: permission denied (cannot read the file)")
    if suffix in FEATURE_SUFFIXES:  # read by lexlens.analysis.collections.features_index
        return Source(p, "features", p.parent, shown)
    kind = suffix[1:]
    if kind == "txt":
        return Source(p, kind, p.parent, shown, has_texts=True)
    if kind == "csv":
        what, names = "column", [h for h in _csv_header(p, shown) if h]
    else:
        what, names = (
            "field",
            sorted({k for _, row in _jsonl_rows(p, shown) if isinstance(row, dict) for k in row}),
        )
    lowered = {n.lower() for n in names}
    has_images, has_texts = "image" in lowered, "text" in lowered
    if not (has_images or has_texts):
        raise InputError(
            f"{shown}: needs an 'image' or a 'text' {what} ({what}s: {', '.join(names) or 'none'})"
        )
    return Source(p, kind, p.parent, shown, has_images=has_images, has_texts=has_texts)


def _csv_header(path: Path, label: str) -> list[str]:
    with open_text(path, label) as handle:
        header, _ = read_csv(handle, label)
    return header


_CAPTION_COLUMN = re.compile(r"^captions?(?:[ _-]?\d+)?$")


def _csv_rows(path: Path, label: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of a CSV, streamed; several ``caption`` columns become a list."""
    with open_text(path, label) as handle:
        header, rows = read_csv(handle, label)
        lowered = [h.lower() for h in header]
        caption_cols = [i for i, h in enumerate(lowered) if _CAPTION_COLUMN.match(h)]
        for line, cells in rows:
            if not any(c.strip() for c in cells):
                continue
            row: dict[str, Any] = {
                lowered[i]: cell
                for i, cell in enumerate(cells)
                if i not in caption_cols and lowered[i]
            }
            row["captions"] = [cells[i] for i in caption_cols if i < len(cells)]
            yield line, row


def _jsonl_rows(path: Path, label: str) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line, row) of a JSON-lines file, streamed; caption fields become one list. A line
    that cannot be read (too long, not UTF-8, not JSON, not an object) comes as (line, why)."""
    for line, raw, why in text_lines(path, label):
        if why:
            yield line, why
            continue
        if not raw.strip():
            continue
        row, why = json_line(raw, label, line)
        if why:
            yield line, why
            continue
        if not isinstance(row, dict):
            yield line, f"a JSON {type(row).__name__}, not an object"
            continue
        row = {str(k).lower(): v for k, v in row.items()}
        caps = []
        for key in sorted(k for k in row if _CAPTION_COLUMN.match(k)):
            value = row.pop(key)
            caps.extend(value if isinstance(value, list) else [value])
        row["captions"] = [str(c) for c in caps if c is not None]
        yield line, row


def iter_items(source: Source) -> Iterator[SourceItem | Skipped]:
    """The source's items in order (or :class:`Skipped` notes), streamed, each through
    :func:`~.items.checked_items` (a benchmark's own :meth:`items` applies it)."""
    if source.kind == "benchmark":
        yield from source.benchmark.items()
        return
    yield from checked_items(_raw_items(source))


def _raw_items(source: Source) -> Iterator[SourceItem | Skipped]:
    if source.kind == "folder":
        yield from _folder_items(source)
        return
    if source.kind == "txt":
        n = 0
        for line, raw, why in text_lines(source.path, source.label):
            if why:
                yield Skipped(f"{source.label}:{line}", why)
                continue
            text = raw.strip()
            if text:
                yield SourceItem(str(n), text=text, where=f"{source.label}:{line}")
                n += 1
        return
    rows = (
        _csv_rows(source.path, source.label)
        if source.kind == "csv"
        else _jsonl_rows(source.path, source.label)
    )
    for n, (line, row) in enumerate(rows):
        where = f"{source.label}:{line}"
        if isinstance(row, str):
            yield Skipped(where, row)
            continue
        if not isinstance(row.get("text") or "", str):  # a list, a number, a boolean
            kind = type(row["text"]).__name__
            yield Skipped(where, f"its 'text' is a {kind}, not a string: skipped")
            continue
        text = str(row.get("text") or "").strip()
        image_cell = str(row.get("image") or "").strip()
        image = ""
        if image_cell:
            image = inside_folder(source.root, image_cell) or ""
            if not image:
                yield Skipped(
                    where, f"image path {image_cell!r} leaves the source's folder: refused"
                )
                continue
        if not text and not image:
            yield Skipped(where, "neither an image nor a text")
            continue
        given = row.get("id")
        given = "" if given is None or isinstance(given, (dict, list)) else str(given).strip()
        item_id = given or (derived_id(image) if image else str(n))
        captions = tuple(c.strip() for c in row.get("captions", []) if str(c).strip())
        yield SourceItem(
            item_id,
            text=text,
            image=image,
            captions=captions,
            labels=tuple(sorted(parse_labels(row.get("labels")))),
            where=where,
        )


def _folder_items(source: Source) -> Iterator[SourceItem | Skipped]:
    for dirpath, dirnames, filenames in os.walk(source.path, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or not name.lower().endswith(IMAGE_SUFFIXES):
                continue
            rel = (Path(dirpath) / name).relative_to(source.path).as_posix()
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                shown = rel.encode("utf-8", "backslashreplace").decode("utf-8")
                yield Skipped(f"{source.label}/{shown}", "the file name is not UTF-8: skipped")
                continue
            if inside_folder(source.path, rel) is None:
                yield Skipped(
                    f"{source.label}/{rel}", "a link to a file outside the folder: refused"
                )
                continue
            yield SourceItem(derived_id(rel), image=rel, where=f"{source.label}/{rel}")


def source_fingerprint(source: Source) -> str:
    """A cheap fingerprint of the source: its file's bytes, and each image's size and mtime."""
    digest = hashlib.sha256(f"{source.kind}\0".encode())
    if source.kind == "benchmark":
        digest.update(source.benchmark.fingerprint().encode())
    if source.kind not in ("folder", "benchmark"):
        try:
            with open(source.path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError as exc:
            raise read_error(source.label, exc) from None
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


#: The file that holds a benchmark's items, by its kind: counted for the progress bar when
#: its reader gives no count of its own.
CORPUS_FILES = {"beir": "corpus.jsonl", "msmarco": "collection.tsv"}
#: Bytes :func:`count_lines` reads to count exactly; past them it extrapolates.
COUNT_BYTES = 256 * 2**20


def count_lines(path: Path, limit: int = COUNT_BYTES) -> int:
    """Lines of a file (a last line without ``\\n`` counts), read in 1 MiB chunks: exact up
    to ``limit`` bytes, beyond them extrapolated from the mean line length read so far, so
    a file of any size is counted in bounded time and memory. 0 when it cannot be read."""
    lines = read = 0
    last = b"\n"
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            while read < limit:
                chunk = handle.read(min(1 << 20, limit - read))
                if not chunk:
                    break
                lines += chunk.count(b"\n")
                read += len(chunk)
                last = chunk[-1:]
    except OSError:
        return 0
    if read < size:  # a file larger than the limit: its lines at the density read
        return max(lines, 1) * size // max(read, 1)
    return lines + (1 if last != b"\n" else 0)


def count_items(source: Source) -> int:
    """How many items the source holds, cheaply, for the progress bar (0 when unknown): a
    benchmark's own count, else the lines of its corpus file; a folder's images; a file's
    lines (less a CSV's header)."""
    if source.kind == "benchmark":
        bench = source.benchmark
        corpus = CORPUS_FILES.get(bench.kind)
        if bench.size_hint or corpus is None:
            return bench.size_hint
        return count_lines(Path(bench.root) / corpus)
    if source.kind == "folder":
        return sum(
            1
            for _, _dirs, files in os.walk(source.path)
            for f in files
            if not f.startswith(".") and f.lower().endswith(IMAGE_SUFFIXES)
        )
    lines = count_lines(source.path)
    return max(lines - (1 if source.kind == "csv" else 0), 0)
