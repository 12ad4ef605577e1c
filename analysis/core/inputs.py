"""Reading user files for every entry point: paths (CLI) or bytes (app uploads), same rules.

Every failure a user can cause (missing or unreadable file, wrong encoding, malformed CSV or
JSON lines, no texts) raises :class:`~lexlens.models.base.InputError` with one line that
names the file as the user knows it (the upload's name, never a temporary file). The
bounded reading of one file (:func:`read_bytes`, :func:`regular_file`) lives in
:mod:`lexlens.models.files`, which the encoders' loading shares (a codebook's corpus, a
faiss index), and is used here through this module.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from lexlens.models.base import InputError
from lexlens.models.files import Source, read_bytes, read_error, regular_file, user_path
from lexlens.models.files import source_label as source_label

TEXT_SUFFIXES = (".txt", ".csv", ".jsonl")
#: Separator of several labels in one cell.
LABEL_SEPARATOR = "|"
#: The longest line a streamed reader takes (bytes): a longer one is skipped with its
#: number and read past in chunks of :data:`LINE_CHUNK` bytes, never held whole.
MAX_LINE_BYTES = 16 * 1024 * 1024
LINE_CHUNK = 1024 * 1024
#: A JSON value nested deeper than this is refused before Python's parser would overflow
#: its recursion limit (a RecursionError).
MAX_JSON_DEPTH = 400


@dataclass(frozen=True)
class TextTable:
    """Texts with their ids and label sets (labels empty when the file has none)."""

    ids: list[str]
    texts: list[str]
    labels: list[frozenset[str]] = field(default_factory=list)
    skipped: int = 0  # empty rows left out

    def __len__(self) -> int:
        return len(self.texts)


def open_text(path: Path, label: str) -> TextIO:
    """A user's CSV file opened for the csv module (UTF-8, a byte-order mark accepted;
    ``newline=""``, so a quoted field keeps its line breaks); only a regular file is
    opened. Files read line by line use :func:`text_lines` (lines end at ``\n`` only)."""
    regular_file(Path(path), label)
    try:
        return open(path, encoding="utf-8-sig", newline="")  # noqa: SIM115
    except OSError as exc:
        raise read_error(label, exc) from None


def text_lines(
    path: str | Path, label: str, *, limit: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, str, str]]:
    """``(number, text, why)`` for each line of a regular UTF-8 file, streamed; ``why`` is
    ``""`` for a line read, else why it was not (``text`` is then ``""``).

    Lines end at ``\n`` only (the ``\r`` of ``\r\n`` dropped): a bare ``\r`` stays in its
    line, as in MS MARCO's passages, and numbers count ``\n`` as editors do. A line longer
    than ``limit`` bytes is read past in chunks of :data:`LINE_CHUNK`, never held whole
    (memory: about the limit and a chunk); a line that is not UTF-8 is named alone. Anything but
    a regular file (a folder, a FIFO, a device) is refused before it is opened."""
    path = user_path(path, label)
    regular_file(path, label)
    try:
        handle = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise read_error(label, exc) from None
    with handle:
        number = 0
        try:
            while True:
                data: bytes | bytearray | None = handle.readline(LINE_CHUNK)
                if not data:
                    return
                number += 1
                if len(data) == LINE_CHUNK and not data.endswith(b"\n"):
                    data = _long_line(handle, data, limit)
                    if data is None:
                        yield number, "", f"a line longer than {limit:,} bytes"
                        continue
                if number == 1 and data.startswith(codecs.BOM_UTF8):
                    data = data[len(codecs.BOM_UTF8) :]
                if data.endswith(b"\n"):
                    data = data[:-2] if data.endswith(b"\r\n") else data[:-1]
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    yield number, "", f"not UTF-8 text (byte {exc.start} of the line)"
                    continue
                yield number, text, ""
        except OSError as exc:
            raise read_error(label, exc) from None


def _long_line(handle: Any, first: bytes, limit: int) -> bytearray | None:
    """The rest of a line longer than one chunk, gathered in place up to ``limit`` bytes;
    ``None`` (the rest read and dropped chunk by chunk) when the line is longer."""
    line = bytearray(first)
    del first
    while not line.endswith(b"\n"):
        if len(line) > limit:
            del line
            while True:
                piece = handle.readline(LINE_CHUNK)
                if not piece or piece.endswith(b"\n"):
                    return None
        piece = handle.readline(LINE_CHUNK)
        if not piece:
            break
        line += piece
    ending = 2 if line.endswith(b"\r\n") else 1 if line.endswith(b"\n") else 0
    return None if len(line) - ending > limit else line


def json_depth(text: str) -> tuple[int, int]:
    """The deepest nesting of arrays and objects in a JSON text, and the offset where it is
    first reached (brackets inside strings do not count). Linear in the text's length, also
    for a text that is not JSON."""
    depth = deepest = where = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, match.start()
        elif token in "]}":
            depth -= 1
    return deepest, where


#: A string (its escapes inside) or a bracket. A string left unclosed, even one ending in a
#: lone backslash, runs to the end of the text in one match, and the body never gives back
#: what it took (possessive): a scan never restarts inside it, so it stays linear.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)|[\[\]{}]', re.S)


def load_json(text: str, label: str, line: int = 0, *, precheck: bool = True) -> Any:
    """``json.loads`` that refuses a text nested too deeply in one line naming ``label`` and
    the line where it goes deepest (``line`` for a JSON-lines record), never with a
    RecursionError. ``precheck`` (for a line) also refuses a value nested deeper than
    :data:`MAX_JSON_DEPTH`, so no later use of it recurses that deep. A text is parsed
    first: one that is not JSON raises :class:`json.JSONDecodeError` as ``json.loads`` does,
    however deep its brackets go before the fault."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise _too_deep(text, label, line) from None
    many = precheck and text.count("[") + text.count("{") > MAX_JSON_DEPTH
    if many and json_depth(text)[0] > MAX_JSON_DEPTH:
        raise _too_deep(text, label, line)
    return value


def _too_deep(text: str, label: str, line: int) -> InputError:
    deepest, offset = json_depth(text)
    at = line or text.count("\n", 0, offset) + 1
    return InputError(
        f"{label}:{at}: JSON nested {deepest:,} levels deep (over {MAX_JSON_DEPTH}): refused"
    )


def json_line(text: str, label: str, line: int) -> tuple[Any, str]:
    """``(value, "")`` of one JSON-lines record, or ``(None, why)`` when it is none (not
    JSON, or nested too deeply): a reader skips that line with its reason."""
    try:
        return load_json(text, label, line), ""
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg})"
    except InputError as exc:  # nested too deeply
        return None, str(exc).removeprefix(f"{label}:{line}: ")


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


@contextmanager
def _csv_errors(label: str, reader: Any) -> Iterator[None]:
    try:
        yield
    except UnicodeDecodeError:
        raise InputError(
            f"{label}: not UTF-8 text (near line {reader.line_num + 1}): save it as UTF-8"
        ) from None
    except csv.Error as exc:
        raise InputError(f"{label}: not a readable CSV (line {reader.line_num}: {exc})") from None


def read_csv(
    handle: Iterable[str], label: str
) -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    """The header of a CSV (names stripped) and its rows, streamed as ``(line, cells)``.

    Quoting is strict; empty lines are left out; a row with more cells than the header, a
    malformed quote or bytes that are not UTF-8 raise one line naming ``label``.
    """
    reader = csv.reader(handle, strict=True)
    with _csv_errors(label, reader):
        header = next(reader, None)
    if not header:
        raise InputError(f"{label}: the CSV is empty (no header row)")
    header = [h.strip() for h in header]

    def rows() -> Iterator[tuple[int, list[str]]]:
        with _csv_errors(label, reader):
            for cells in reader:
                if not cells:
                    continue
                if len(cells) > len(header):
                    raise InputError(
                        f"{label}: line {reader.line_num} has more cells than the header's "
                        f"{len(header)}"
                    )
                yield reader.line_num, cells

    return header, rows()


def json_objects(lines: Iterable[str], label: str) -> Iterator[tuple[int, dict]]:
    """``(line, object)`` of each non-blank line of a JSON-lines file, streamed."""
    for line, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            row = load_json(raw, label, line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{label}: line {line} is not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise InputError(f"{label}: line {line} must be a JSON object")
        yield line, row


def read_rows(source: Source, name: str | None = None, suffix: str | None = None) -> list[dict]:
    """Rows of a .csv (header row) or .jsonl (one object per line) as dicts."""
    data, label = read_bytes(source, name)
    kind = _suffix(label, suffix)
    text = decode_text(data, label)
    if kind == ".csv":
        header, rows = read_csv(io.StringIO(text, newline=""), label)
        return [
            {h: cells[i] if i < len(cells) else "" for i, h in enumerate(header)}
            for _, cells in rows
        ]
    if kind == ".jsonl":
        return [row for _, row in json_objects(text.splitlines(), label)]
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
            if not isinstance(row.get("text") or "", str):  # a list, a number, a boolean
                raise InputError(
                    f"{label}: row {n + 1}'s text is a {type(row['text']).__name__}, not a string"
                )
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


def inside_folder(root: Path, relative: str) -> str | None:
    """``relative`` normalised inside ``root`` (posix), or ``None`` when it leaves it: as
    written (``..``, an absolute path elsewhere) or once symbolic links are followed (a link
    inside the folder that points outside it)."""
    raw = relative.strip().replace("\\", "/")
    if not raw:
        return None
    candidate = Path(raw)
    root_abs = Path(os.path.abspath(root))
    full = Path(os.path.normpath(candidate if candidate.is_absolute() else root_abs / candidate))
    try:
        inside = full.relative_to(root_abs).as_posix()
    except ValueError:
        return None
    real_root = Path(os.path.realpath(root_abs))
    try:
        Path(os.path.realpath(full)).relative_to(real_root)
    except ValueError:
        return None
    return inside


def folder_file(folder: Path, name: str | Path) -> Path:
    """``folder / name``, a file a reader opens inside a folder it was given, refused in one
    line when it leaves the folder as written or once links are followed
    (:func:`inside_folder`: the rule an image folder's files and a table's image paths
    follow, so a link never carries a reader out of the folder a user named)."""
    inside = inside_folder(Path(folder), str(name))
    if inside is None:
        shown = name if Path(name).is_absolute() else Path(folder) / name
        raise InputError(
            f"{shown}: a link to a file outside the folder {folder}: refused (copy the file "
            "into the folder)"
        )
    return Path(folder) / inside
