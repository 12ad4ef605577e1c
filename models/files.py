"""Reading a user's file, bounded, for every layer: the loading of encoders (a codebook's
corpus, a faiss index) and the analyses' readers (:mod:`lexlens.analysis.core.inputs`).

Only a regular file is read (a folder, a FIFO, a device or a socket would block a reader or
never end: ``/dev/zero`` is refused before it is opened), never more than a limit, and
every failure a user can cause is one :class:`~lexlens.models.base.InputError` line that
names the file as the user knows it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from lexlens.models.base import InputError

#: Largest text file read whole (bytes); collections stream larger sources.
MAX_TEXT_FILE_BYTES = 512 * 1024 * 1024

Source = str | Path | bytes | bytearray


def read_error(label: str, exc: OSError) -> InputError:
    """The one-line message for a user's file that cannot be read."""
    if isinstance(exc, FileNotFoundError):
        return InputError(f"{label}: file not found")
    if isinstance(exc, PermissionError):
        return InputError(f"{label}: permission denied (cannot read the file)")
    if isinstance(exc, IsADirectoryError):
        return InputError(f"{label}: is a folder, not a file")
    return InputError(f"{label}: cannot read the file ({exc.strerror or exc})")


def user_path(raw: str | Path, label: str) -> Path:
    """A path a user gave, ``~`` and ``~user`` expanded as the shell does; a home folder
    that cannot be found (``~nosuchuser/x``, or ``~`` without one) is refused in one line
    that starts with ``label``, never a RuntimeError."""
    try:
        return Path(raw).expanduser()
    except RuntimeError:
        raise InputError(
            f"{label}: no home folder found for {Path(raw).parts[0]} (a path that starts "
            "with ~ names one)"
        ) from None


def source_label(source: Source, name: str | None = None) -> str:
    """The name messages show for a path or an upload (``name`` when given)."""
    if name:
        return str(name)
    return "uploaded file" if isinstance(source, (bytes, bytearray)) else str(source)


def regular_file(path: Path, label: str) -> os.stat_result:
    """The status of a user's file, refused in one line unless it is a regular file (a
    folder, a FIFO, a device or a socket would block a reader or never end)."""
    try:
        status = path.stat()
    except OSError as exc:
        raise read_error(label, exc) from None
    if stat.S_ISDIR(status.st_mode):
        raise InputError(f"{label}: is a folder, not a file")
    if not stat.S_ISREG(status.st_mode):
        raise InputError(f"{label}: not a regular file (a FIFO, a device or a socket): refused")
    return status


def open_regular(path: Path, label: str) -> BinaryIO:
    """``path`` opened for reading when it is a regular file, told from the opened file
    itself (without blocking: a FIFO is opened non-blocking and refused), so nothing put in
    its place after a check is read instead."""
    regular_file(path, label)  # the clear message for what is there now
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise read_error(label, exc) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{label}: not a regular file (a FIFO, a device or a socket): refused")
    return os.fdopen(fd, "rb")


def read_bytes(
    source: Source,
    name: str | None = None,
    *,
    limit: int = MAX_TEXT_FILE_BYTES,
    advice: str = "build a stored collection with `lexlens index`",
) -> tuple[bytes, str]:
    """The bytes of a path or an upload (at most ``limit``), and the name to show in
    messages; ``advice`` ends the message for a file over the limit."""
    label = source_label(source, name)
    if isinstance(source, (bytes, bytearray)):
        if len(source) > limit:
            raise InputError(f"{label}: too large ({len(source):,} bytes; limit {limit:,})")
        return bytes(source), label
    path = user_path(source, label)
    with open_regular(path, label) as handle:
        size = os.fstat(handle.fileno()).st_size
        too_large = InputError(
            f"{label}: file too large to read whole ({size:,} bytes; limit {limit:,}): {advice}"
        )
        if size > limit:
            raise too_large
        try:
            data = handle.read(limit + 1)  # never more, whatever the size said
        except OSError as exc:
            raise read_error(label, exc) from None
    if len(data) > limit:
        raise too_large
    return data, label
