"""Writing results for every entry point: JSON without NaN, CSV safe for spreadsheets, files
written whole or not at all.

- :func:`to_jsonable` / :func:`json_text`: numpy → Python, NaN and ±Infinity → ``null``
  (JSON has no such numbers; ``json.dumps`` would print invalid ``NaN``).
- :func:`csv_bytes`: a cell that a spreadsheet would run as a formula (text starting with
  ``=``, ``+``, ``-``, ``@``, tab or carriage return) is prefixed with ``'`` (OWASP's advice
  against CSV injection); numbers are written as numbers.
- :func:`check_out_dir` before any costly work, :func:`write_files` after: the files of one
  run are written as one set, so a full disk or an interrupted run never leaves a
  half-written file that looks valid, nor a mix of two runs' files.
- :func:`file_set`, the mechanism behind it, for files streamed a line at a time (exports
  of any size): every file of the set is written into a private staging folder inside the
  out folder (same file system, so renames are atomic), fsynced, then renamed into place
  together under a lock on the folder, with SIGINT/SIGTERM/SIGHUP held back until the
  renames are done. A failure before or during the renames (a full disk, an interrupt, a
  file that cannot be replaced) removes the staging folder and rolls back every file
  already replaced: the folder holds the previous set, whole. Files of the folder that are
  not in the set are never touched. A power cut or SIGKILL during the renames themselves
  (microseconds) is the one case that can leave both; the next set written there puts any
  file moved aside back before it starts.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import math
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.core.inputs import user_path
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
    out = user_path(path, f"--out {path}")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".lexlens-probe-"):
            pass
    except OSError as exc:
        raise InputError(f"--out {out}: cannot write there ({_why(exc)})") from None
    return out


#: Name prefix of the private folder a :func:`file_set` is staged in (inside the out folder).
STAGING_PREFIX = ".lexlens-staging-"
#: Inside a staging folder: the previous versions of the files being replaced, kept until
#: the new set is in place (hard links where the file system has them).
_PREVIOUS = ".previous"


def check_replaceable(out: Path, names: Iterable[str]) -> None:
    """Refuse, before any work, a set whose file name is taken by a folder in ``out``."""
    for name in names:
        target = out / name
        if target.is_dir() and not target.is_symlink():
            raise InputError(f"--out {out}: {name} is a folder; move it or write elsewhere")


class FileSet:
    """Files being written into one folder as a set (see :func:`file_set`)."""

    def __init__(self, out: Path, staging: Path, unchanged: str) -> None:
        self.out = out
        self.staging = staging
        self.unchanged = unchanged
        self.names: list[str] = []
        self.removals: list[str] = []

    def _new(self, name: str) -> Path:
        if not isinstance(name, str) or name in ("", ".", "..") or Path(name).name != name:
            raise ValueError(f"a file of a set is a plain file name, not {name!r}")
        if name.startswith(STAGING_PREFIX) or name in self.names:
            raise ValueError(f"{name!r} cannot be written twice or shadow the staging folder")
        self.names.append(name)
        return self.staging / name

    def _failed(self, name: str, exc: OSError) -> InputError:
        return InputError(f"could not write {name} in {self.out} ({_why(exc)}): {self.unchanged}")

    def write_bytes(self, name: str, data: bytes) -> None:
        """Stage ``data`` as the file ``name``."""
        path = self._new(name)
        try:
            with open(path, "xb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise self._failed(name, exc) from None

    def write_lines(self, name: str, lines: Iterable[str]) -> int:
        """Stage the file ``name`` from ``lines`` (each ended by ``\\n``), streamed: memory
        stays bounded however many there are. Returns the number of lines."""
        path = self._new(name)
        count = 0
        doing = "write"  # an OSError of the source (reading an index…) passes unchanged
        try:
            with open(path, "x", encoding="utf-8", newline="\n") as handle:
                doing = "read"
                for line in lines:
                    doing = "write"
                    handle.write(line)
                    handle.write("\n")
                    doing = "read"
                    count += 1
                doing = "write"
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            if doing == "read":
                raise
            raise self._failed(name, exc) from None
        return count

    def remove(self, name: str) -> None:
        """Remove the file ``name`` of a previous set with the commit (a set that no longer
        has it); a folder of that name is left alone."""
        if Path(name).name != name or name in ("", ".", ".."):
            raise ValueError(f"a file of a set is a plain file name, not {name!r}")
        self.removals.append(name)

    def commit(self) -> None:
        """Put every staged file in place and remove :meth:`remove`'s, all or none."""
        previous = self.staging / _PREVIOUS
        kept: list[str] = []  # old versions held in ``previous``
        placed: list[str] = []  # new files already in place
        with _signals_held(), _folder_lock(self.out):
            try:
                previous.mkdir()
                for name in self.names:
                    target = self.out / name
                    if os.path.lexists(target):
                        _keep(target, previous / name)
                        kept.append(name)
                    os.replace(self.staging / name, target)
                    placed.append(name)
                for name in self.removals:
                    target = self.out / name
                    if name not in self.names and os.path.lexists(target):
                        if target.is_dir() and not target.is_symlink():
                            continue
                        os.rename(target, previous / name)
                        kept.append(name)
            except OSError as exc:
                for name in placed:
                    if name not in kept:
                        with contextlib.suppress(OSError):
                            os.unlink(self.out / name)
                for name in kept:
                    with contextlib.suppress(OSError):
                        os.replace(previous / name, self.out / name)
                raise InputError(
                    f"could not put the files in place in {self.out} ({_why(exc)}): "
                    f"{self.unchanged}"
                ) from None
            fsync_dir(self.out)


def _keep(target: Path, keep: Path) -> None:
    """Hold the current ``target`` at ``keep`` for a roll-back: a hard link (``target`` stays
    in place, so a reader never finds it missing), or a rename where links are not
    supported."""
    try:
        os.link(target, keep, follow_symlinks=False)
    except OSError:
        os.rename(target, keep)


def fsync_dir(path: Path) -> None:
    """Flush a folder's entries (its renames and new names) to disk, where the system can."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back (main thread only: Python runs handlers there)
    and deliver them once the block is done, so the renames of a set are never cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    restore: dict[int, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is None:
            continue
        handler = signal.getsignal(sig)
        if handler is None or handler is signal.SIG_IGN:
            continue  # set outside Python, or ignored: nothing to hold back
        with contextlib.suppress(ValueError, OSError):
            restore[sig] = signal.signal(sig, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for sig, handler in restore.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(caught):
            signal.raise_signal(sig)


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``folder`` for the renames, so two sets written into one
    folder at once land one after the other, never interleaved (no lock where the system
    has none)."""
    try:
        import fcntl  # POSIX only

        fd = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def process_alive(pid: object) -> bool:
    """Whether a process with the id ``pid`` runs on this machine (``kill(pid, 0)``: one
    another user owns counts). Anything that cannot be a process id (not a positive
    integer, beyond the system's range) is none."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False  # 0 and -n would ask about process groups
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (OSError, OverflowError):  # no such process; an id the system cannot hold
        return False
    return True


def clean_staging(out: Path) -> None:
    """Remove the staging folders that runs no longer alive left in ``out``, first putting
    back any file one of them had moved aside (a run killed during its renames)."""
    with contextlib.suppress(OSError):
        for entry in out.iterdir():
            if not entry.name.startswith(STAGING_PREFIX) or entry.is_symlink():
                continue
            pid = entry.name[len(STAGING_PREFIX) :].split("-", 1)[0]
            if pid.isdigit() and (int(pid) == os.getpid() or process_alive(int(pid))):
                continue
            previous = entry / _PREVIOUS
            if previous.is_dir() and not previous.is_symlink():
                for kept in previous.iterdir():
                    if not os.path.lexists(out / kept.name):
                        with contextlib.suppress(OSError):
                            os.rename(kept, out / kept.name)
            shutil.rmtree(entry, ignore_errors=True)


@contextlib.contextmanager
def file_set(
    out_dir: str | Path, *, unchanged: str = "the folder is unchanged"
) -> Iterator[FileSet]:
    """Write several files into ``out_dir`` as one set: all of them land, or none does.

    Inside the block, stage files with :meth:`FileSet.write_bytes` / :meth:`~FileSet.
    write_lines` (and old ones to drop with :meth:`~FileSet.remove`); when the block ends
    normally they are renamed into place together. When it raises (a full disk, an
    interrupt, a cancelled job, any error), the staging folder is removed and the folder is
    as it was (a folder this call created is removed again). A write or rename error becomes
    one :class:`InputError` line that names the file and ends with ``unchanged``.
    """
    wanted = user_path(out_dir, f"--out {out_dir}")
    created = [p for p in [wanted, *wanted.parents] if not os.path.lexists(p)]
    done = False
    try:
        out = check_out_dir(out_dir)
        clean_staging(out)
        try:
            staging = Path(tempfile.mkdtemp(dir=out, prefix=f"{STAGING_PREFIX}{os.getpid()}-"))
        except OSError as exc:
            raise InputError(f"--out {out}: cannot write there ({_why(exc)})") from None
        try:
            files = FileSet(out, staging, unchanged)
            yield files
            files.commit()
            done = True
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        if not done:
            for folder in created:  # deepest first; only while empty
                with contextlib.suppress(OSError):
                    folder.rmdir()


def write_files(out_dir: str | Path, files: Mapping[str, bytes]) -> dict[str, Path]:
    """Write every file whole or none, as one :func:`file_set`; the error names the file."""
    with file_set(out_dir, unchanged="no file of this run was written") as staged:
        for name, data in files.items():
            staged.write_bytes(name, data)
    out = user_path(out_dir, f"--out {out_dir}")
    return {name: out / name for name in files}
