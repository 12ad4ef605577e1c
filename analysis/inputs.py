"""Reading user files for every entry point: paths (CLI) or bytes (app uploads), same rules.

Every failure a user can cause (missing or unreadable file, wrong encoding, malformed CSV or
JSON lines, no texts) raises :class:`~lexlens.models.base.InputError` with one line that
names the file as the user knows it (the upload's name, never a temporary file).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from lexlens.models.base import InputError

#: Largest text file read whole (bytes); collections stream larger sources.
MAX_TEXT_FILE_BYTES = 512 * 1024 * 1024
TEXT_SUFFIXES = (".txt", ".csv", ".jsonl")
#: Separator of several labels in one cell.
LABEL_SEPARATOR = "|"

Source = str | Path | bytes | bytearray


@dataclass(frozen=True)
class TextTable:
    """Texts with their ids and label sets (labels empty when the file has none)."""

    ids: list[str]
    texts: list[str]
    labels: list[frozenset[str]] = field(default_factory=list)
    skipped: int = 0  # empty rows left out

    def __len__(self) -> int:
        return len(self.texts)


def read_bytes(source: Source, name: str | None = None) -> tuple[bytes, str]:
    """The bytes of a path or an upload, and the name to show in messages."""
    if isinstance(source, (bytes, bytearray)):
        return bytes(source), name or "uploaded file"
    path = Path(source).expanduser()
    label = name or str(path)
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise InputError(f"{label}: is a folder, not a file")
        if size > MAX_TEXT_FILE_BYTES:
            raise InputError(
                f"{label}: file too large to read whole ({size:,} bytes; limit "
                f"{MAX_TEXT_FILE_BYTES:,}): build a stored collection with `lexlens index`"
            )
        return path.read_bytes(), label
    except FileNotFoundError:
        raise InputError(f"{label}: file not found") from None
    except PermissionError:
        raise InputError(f"{label}: permission denied (cannot read the file)") from None
    except IsADirectoryError:
        raise InputError(f"{label}: is a folder, not a file") from None
    except OSError as exc:
        raise InputError(f"{label}: cannot read the file ({exc.strerror or exc})") from None


def decode_text(data: bytes, label: str) -> str:
    """UTF-8 (a byte-order mark is accepted); anything else is refused with the file name."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{label}: not UTF-8 text (byte {exc.start}): save the file as UTF-8"
        ) from None


def _suffix(label: str, suffix: str | None) -> str:
    found = (suffix or Path(label).suffix or ".txt").lower()
    if found not in TEXT_SUFFIXES:
        raise InputError(f"{label}: expected a .txt, .csv or .jsonl file, not {found!r}")
    return found


def _rows_csv(text: str, label: str) -> list[dict[str, str]]:
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
        header = reader.fieldnames
        if not header:
            raise InputError(f"{label}: the CSV is empty (no header row)")
        rows = []
        for line, row in enumerate(reader, start=2):
            if None in row:  # more cells than header columns
                raise InputError(
                    f"{label}: line {line} has more cells than the header's {len(header)}"
                )
            rows.append({k.strip(): (v or "") for k, v in row.items() if k is not None})
        return rows
    except csv.Error as exc:
        raise InputError(f"{label}: not a readable CSV ({exc})") from None


def _rows_jsonl(text: str, label: str) -> list[dict[str, object]]:
    rows = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"{label}: line {line} is not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise InputError(f"{label}: line {line} must be a JSON object with a 'text' field")
        rows.append(row)
    return rows


def read_rows(source: Source, name: str | None = None, suffix: str | None = None) -> list[dict]:
    """Rows of a .csv (header row) or .jsonl (one object per line) as dicts."""
    data, label = read_bytes(source, name)
    kind = _suffix(label, suffix)
    text = decode_text(data, label)
    if kind == ".csv":
        return _rows_csv(text, label)
    if kind == ".jsonl":
        return _rows_jsonl(text, label)
    raise InputError(f"{label}: a .txt file has no columns")


def parse_labels(cell: object) -> frozenset[str]:
    """``"dog|beach"`` (or a JSON list) → ``{"dog", "beach"}``; ``;`` also separates."""
    if isinstance(cell, (list, tuple)):
        return frozenset(str(x).strip() for x in cell if str(x).strip())
    text = str(cell or "").replace(";", LABEL_SEPARATOR)
    return frozenset(x.strip() for x in text.split(LABEL_SEPARATOR) if x.strip())


def read_texts(
    source: Source, name: str | None = None, *, suffix: str | None = None, what: str = "text"
) -> TextTable:
    """Texts (with ids and labels when the file has them) from .txt, .csv or .jsonl.

    A .txt file is one text per line; a .csv needs a ``text`` column and a .jsonl a
    ``text`` field, each with optional ``id`` and ``labels`` (``|``-separated). Empty texts
    are skipped and counted; ids must be unique.
    """
    data, label = read_bytes(source, name)
    kind = _suffix(label, suffix)
    if kind == ".txt":
        lines = [line.strip() for line in decode_text(data, label).splitlines()]
        texts = [t for t in lines if t]
        table = TextTable([str(i) for i in range(len(texts))], texts, [], len(lines) - len(texts))
    else:
        rows = read_rows(data, label, kind)
        if rows and not any("text" in r for r in rows):
            columns = ", ".join(sorted({k for r in rows for k in r})) or "none"
            raise InputError(f"{label}: no 'text' column (columns: {columns})")
        ids, texts, labels, skipped = [], [], [], 0
        has_labels = any("labels" in r for r in rows)
        for n, row in enumerate(rows):
            text = str(row.get("text") or "").strip()
            if not text:
                skipped += 1
                continue
            ids.append(str(row.get("id") or n))
            texts.append(text)
            if has_labels:
                labels.append(parse_labels(row.get("labels")))
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            dup = next(i for i in ids if i in seen or seen.add(i))  # type: ignore[func-returns-value]
            raise InputError(f"{label}: the id {dup!r} appears more than once")
        table = TextTable(ids, texts, labels, skipped)
    if not table.texts:
        raise InputError(f"{label}: holds no {what}s (every row is empty)")
    return table
