"""Writing results for every entry point: JSON without NaN, CSV safe for spreadsheets, files
written whole or not at all.

- :func:`to_jsonable` / :func:`json_text`: numpy → Python, NaN and ±Infinity → ``null``
  (JSON has no such numbers; ``json.dumps`` would print invalid ``NaN``).
- :func:`csv_bytes`: a cell that a spreadsheet would run as a formula (text starting with
  ``=``, ``+``, ``-``, ``@``, tab or carriage return) is prefixed with ``'`` (OWASP's advice
  against CSV injection); numbers are written as numbers.
- :func:`check_out_dir` before any costly work, :func:`write_files` after: each file is
  written to a temporary name in the same folder and renamed into place, so a full disk or
  an interrupted run never leaves a half-written file that looks valid.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.models.base import InputError

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def to_jsonable(obj: Any) -> Any:
    """A JSON-ready copy: arrays → lists, numpy scalars → Python, NaN/±inf → ``None``."""
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj, key=str) if isinstance(obj, (set, frozenset)) else obj
        return [to_jsonable(v) for v in items]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict())
    return obj


def json_text(payload: Any, *, indent: int | None = 2) -> str:
    """Strict JSON (never ``NaN``/``Infinity``) of any result or mapping."""
    return json.dumps(to_jsonable(payload), ensure_ascii=False, indent=indent, allow_nan=False)


def json_bytes(payload: Any) -> bytes:
    return (json_text(payload) + "\n").encode("utf-8")


def safe_cell(value: Any) -> Any:
    """Neutralise a text cell a spreadsheet would evaluate; numbers pass unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    if isinstance(value, np.generic):
        return safe_cell(value.item())
    return value


def csv_bytes(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> bytes:
    """UTF-8 CSV of ``rows`` under ``header``, every text cell passed through :func:`safe_cell`."""
    buffer = io.StringIO()
    # RFC 4180 line ends: csv then quotes any cell holding "\r" or "\n", so a cell with a
    # bare carriage return cannot split its row.
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([safe_cell(h) for h in header])
    for row in rows:
        writer.writerow([safe_cell(v) for v in row])
    return buffer.getvalue().encode("utf-8")


def frame_csv_bytes(frame: Any, *, index: bool = False) -> bytes:
    """A pandas DataFrame as formula-safe CSV bytes."""
    table = frame.reset_index() if index else frame
    return csv_bytes([str(c) for c in table.columns], table.itertuples(index=False, name=None))


def records_csv_bytes(records: Sequence[Mapping[str, Any]]) -> bytes:
    """A list of flat dicts as CSV (columns in first-seen order); lists joined by spaces."""
    columns: dict[str, None] = {}
    for record in records:
        columns.update(dict.fromkeys(record))
    header = list(columns)
    rows = (
        [
            " ".join(map(str, v)) if isinstance(v, (list, tuple)) else v
            for v in (r.get(c, "") for c in header)
        ]
        for r in records
    )
    return csv_bytes(header, rows)


def _why(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "the disk is full"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "permission denied"
    return exc.strerror or type(exc).__name__


def check_out_dir(path: str | Path) -> Path:
    """Create ``path`` if needed and prove it writable, before any costly work starts."""
    out = Path(path).expanduser()
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".lexlens-probe-"):
            pass
    except OSError as exc:
        raise InputError(f"--out {out}: cannot write there ({_why(exc)})") from None
    return out


def _new_file_mode() -> int:
    """The mode an ordinary new file gets under the process umask (``mkstemp`` makes 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_files(out_dir: str | Path, files: Mapping[str, bytes]) -> dict[str, Path]:
    """Write every file whole or none: temporary names first, then renamed into place.

    On any error (a full disk, say) the temporary files are removed and nothing of this
    call is left behind; the error names the file.
    """
    out = check_out_dir(out_dir)
    mode = _new_file_mode()
    staged: list[tuple[Path, Path]] = []
    try:
        for name, data in files.items():
            final = out / name
            fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{final.name}.", suffix=".part")
            staged.append((Path(tmp), final))
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), mode)
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        for tmp, final in staged:
            os.replace(tmp, final)
    except OSError as exc:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        name = staged[-1][1].name if staged else out.name
        raise InputError(
            f"could not write {name} in {out} ({_why(exc)}): no file of this run was written"
        ) from None
    return {name: out / name for name in files}


def write_lines(path: str | Path, lines: Iterable[str]) -> int:
    """Stream ``lines`` into ``path`` whole or not at all (a temporary name, then renamed);
    for files too large to hold in memory. Returns the number of lines written."""
    final = Path(path).expanduser()
    out = check_out_dir(final.parent)
    fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{final.name}.", suffix=".part")
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            os.fchmod(handle.fileno(), _new_file_mode())
            for line in lines:
                handle.write(line)
                handle.write("\n")
                count += 1
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, final)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"could not write {final} ({_why(exc)}): nothing was written") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return count
