"""Plain ``.npy`` files written in a stream: 1-D arrays whose length is known only at the
end (a fixed-size header written last), and read back in chunks without a memory map.

The stored index's CSR arrays and postings are such files (:mod:`.store_writer`,
:mod:`.postings`); any ``.npy`` reader opens them (the index opens them memory-mapped).
"""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

#: Bytes of the header of every ``.npy`` file written here (version 1.0, padded).
NPY_HEADER = 128


def npy_header(dtype: np.dtype, length: int) -> bytes:
    """A version-1.0 ``.npy`` header of exactly :data:`NPY_HEADER` bytes."""
    text = f"{{'descr': '{dtype.str}', 'fortran_order': False, 'shape': ({length},), }}"
    pad = NPY_HEADER - 10 - len(text) - 1
    return (
        b"\x93NUMPY\x01\x00"
        + struct.pack("<H", NPY_HEADER - 10)
        + (text + " " * pad + "\n").encode("latin1")
    )


class NpyAppender:
    """Append 1-D arrays to a ``.npy`` file whose length is known only at the end."""

    def __init__(self, path: Path, dtype: Any) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self.length = 0
        self._handle = open(path, "wb")  # noqa: SIM115
        self._handle.write(b"\0" * NPY_HEADER)

    def append(self, values: np.ndarray) -> None:
        """Write ``values`` after what is there (as this file's dtype)."""
        array = np.ascontiguousarray(values, dtype=self.dtype)
        if array.size:
            self._handle.write(memoryview(array).cast("B"))
            self.length += int(array.size)

    def widen(self, dtype: Any, chunk: int = 4_000_000) -> None:
        """From now on store ``dtype`` (a wider type of the same kind): what was written is
        converted into a new file, ``chunk`` values at a time (memory O(chunk)), which
        replaces this one."""
        dtype = np.dtype(dtype)
        self._handle.flush()
        wider = self.path.with_name(self.path.name + ".wider")
        with open(wider, "wb") as out:
            out.write(b"\0" * NPY_HEADER)
            for start in range(0, self.length, chunk):
                part = read_chunk(self.path, self.dtype, start, min(chunk, self.length - start))
                out.write(memoryview(part.astype(dtype)).cast("B"))
        self._handle.close()
        os.replace(wider, self.path)
        self._handle = open(self.path, "r+b")  # noqa: SIM115
        self._handle.seek(0, os.SEEK_END)
        self.dtype = dtype

    def close(self) -> int:
        """Write the header, fsync and close; returns the file's size in bytes."""
        self._handle.seek(0)
        self._handle.write(npy_header(self.dtype, self.length))
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        return NPY_HEADER + self.length * self.dtype.itemsize

    def abort(self) -> None:
        """Close the file unfinished (the build's temporary folder is removed anyway)."""
        with contextlib.suppress(OSError):
            self._handle.close()


def write_npy(path: Path, array: np.ndarray) -> int:
    """Write a whole array as a 1-D ``.npy`` file (fsynced); returns its size in bytes."""
    out = NpyAppender(path, array.dtype)
    try:
        out.append(array.ravel())
        return out.close()
    except BaseException:
        out.abort()
        raise


def read_chunk(path: Path, dtype: Any, start: int, count: int) -> np.ndarray:
    """``count`` values from element ``start`` of a 1-D ``.npy`` we wrote (plain reads:
    no memory map, so the pages read do not stay in this process's memory)."""
    dtype = np.dtype(dtype)
    return np.fromfile(path, dtype=dtype, count=count, offset=NPY_HEADER + start * dtype.itemsize)
