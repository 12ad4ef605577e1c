"""The on-disk cache of fitted codebooks: one directory per (model, corpus, M, K, seed, OPQ).

``LEXLENS_CACHE/dense_pq/<digest>/`` holds ``codebook.safetensors`` and ``meta.json``.
A cache that cannot be used never stops the work:

- ``LEXLENS_CACHE`` is a file, read-only or otherwise unusable, or the disk fills while
  an entry is written → fit without caching (a logged warning, once; a partial entry is
  removed);
- a corrupt entry (truncated safetensors, ``meta.json`` that is not an object, NaN
  centroids) → a miss: fitted again and overwritten;
- two processes fitting the same codebook → the second waits on a lock file and reads
  what the first wrote (``filelock``, installed with huggingface_hub; ``fcntl`` otherwise).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lexlens.models.base import LexlensError, Progress, texts_digest
from lexlens.models.packaged import usable_cache_dir, warn_uncached
from lexlens.models.pq import CODEBOOK_FILE, ProductQuantizer, report

log = logging.getLogger(__name__)

META_JSON = "meta.json"
#: Bump when the fitting procedure changes, so stale cached codebooks are not reused
#: (2: faiss k-means replaced the hand-written one).
FIT_VERSION = 2
#: Longest wait for another process's fit of the same codebook (seconds).
LOCK_TIMEOUT = 600


def corpus_digest(texts: list[str]) -> str:
    """SHA-256 of the texts in order (NUL-separated)."""
    return texts_digest(texts, "\0")


def cache_key(
    corpus_sha256: str, base: str, m: int, k: int, seed: int, opq_iters: int
) -> dict[str, object]:
    """Everything a fitted codebook depends on (``base`` identifies the dense model)."""
    return {
        "corpus": corpus_sha256,
        "base": base,
        "m": int(m),
        "k": int(k),
        "seed": int(seed),
        "opq": int(opq_iters),
        "version": FIT_VERSION,
    }


def cached_fit(
    key: dict[str, object],
    fit: Callable[[], ProductQuantizer],
    *,
    progress: Progress | None = None,
) -> ProductQuantizer:
    """The cached codebook for ``key``, or ``fit()`` once (under a lock) and cache it."""

    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    root = usable_cache_dir("dense_pq")
    if root is None:
        return fit()
    entry = root / digest
    cached = _read(entry)
    if cached is None:
        lock = _lock(root / f"{digest}.lock")
        try:
            lock.acquire()
        except OSError as exc:  # no lock file (read-only place, timeout): fit uncached
            log.warning("fitting without the codebook cache (%s)", exc)
            return fit()
        try:
            cached = _read(entry)  # another process may have fitted it while we waited
            if cached is None:
                pq = fit()
                failed = _write(entry, pq)
                if failed:  # said in the result too: the command line keeps logs quiet
                    note = f"codebooks not cached ({failed}): fitted again on the next load"
                    pq = dataclasses.replace(pq, notes=(*pq.notes, note))
                return pq
        finally:
            lock.release()
    report(progress, 1.0, f"loaded cached codebooks (M={cached.m}, K={cached.k})")
    return cached


def _read(entry: Path) -> ProductQuantizer | None:
    """The cached quantiser, or ``None`` for a miss; a corrupt entry is a miss (logged)."""
    if not (entry / CODEBOOK_FILE).exists() or not (entry / META_JSON).exists():
        return None
    try:
        meta = json.loads((entry / META_JSON).read_text(encoding="utf-8"))
        if not isinstance(meta, dict):
            raise ValueError(f"{META_JSON} holds a {type(meta).__name__}, not an object")
        notes = meta.get("notes", [])
        if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
            raise ValueError(f"{META_JSON}: 'notes' is not a list of strings")
        return ProductQuantizer.load(entry, notes=tuple(notes), meta=meta)
    except (LexlensError, OSError, ValueError) as exc:
        log.warning("ignoring a corrupt cached codebook in %s (%s): fitting again", entry, exc)
        return None


def _write(entry: Path, pq: ProductQuantizer) -> str:
    """Write both files atomically (temp file + rename); ``""``, or why not. Any failure of
    the write — a full disk is an ``OSError`` from one writer and a ``SafetensorError`` from
    safetensors — removes what it left and is logged once (:func:`~.packaged.warn_uncached`):
    the codebook just fitted is used, uncached."""

    try:
        entry.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=entry) as tmp:
            path = pq.save(Path(tmp))
            os.replace(path, entry / CODEBOOK_FILE)
            meta_tmp = Path(tmp) / META_JSON
            meta_tmp.write_text(json.dumps(pq.meta, indent=2), encoding="utf-8")
            os.replace(meta_tmp, entry / META_JSON)
    except Exception as exc:  # noqa: BLE001  (whatever the writer raises, the work goes on)
        _remove_entry(entry)
        return warn_uncached(f"could not write codebooks to {entry.parent}", exc)
    return ""


def _remove_entry(entry: Path) -> None:
    """A cache entry's folder removed with what a failed write left in it."""
    shutil.rmtree(entry, ignore_errors=True)


def _lock(path: Path) -> Any:
    """An inter-process lock with ``acquire()`` / ``release()``."""
    try:
        from filelock import FileLock  # optional: else an fcntl lock
    except ImportError:
        return _FcntlLock(path)
    return FileLock(str(path), timeout=LOCK_TIMEOUT)


class _FcntlLock:
    """``flock`` on a lock file: the fallback when ``filelock`` is not installed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = None

    def acquire(self) -> None:

        self._fh = open(self.path, "a+b")  # noqa: SIM115 (held until release)
        fcntl.flock(self._fh, fcntl.LOCK_EX)

    def release(self) -> None:

        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None
