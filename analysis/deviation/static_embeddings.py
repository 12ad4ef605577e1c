"""``f_enc`` of Semantic@k (D2S's semantic deviation): context-free token vectors, looked up by token
string — the encoder's own input word-embedding table, or a GloVe-format text file."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lexlens.analysis.core.inputs import read_error, regular_file
from lexlens.analysis.core.options import OptionError
from lexlens.models.base import Encoder, InputError


@dataclass(frozen=True)
class StaticEmbeddings:
    """Unit-normalised context-free token vectors, looked up by token string."""

    vectors: np.ndarray  # [n, d], rows L2-normalised
    index: dict[str, int]
    description: str = ""

    @classmethod
    def from_table(
        cls, table: np.ndarray, tokens: list[str], description: str = ""
    ) -> StaticEmbeddings:
        table = np.asarray(table, dtype=np.float32)
        if not np.isfinite(table).all():
            raise InputError(f"static embeddings ({description or 'table'}) hold NaN or Inf")
        norms = np.linalg.norm(table, axis=1, keepdims=True)
        vectors = (table / np.maximum(norms, 1e-12)).astype(np.float32)
        index: dict[str, int] = {}
        for i, t in enumerate(tokens):
            index.setdefault(t, i)
        return cls(vectors, index, description)

    @classmethod
    def from_glove(cls, path: str | Path, *, keep: set[str] | None = None) -> StaticEmbeddings:
        """Read a GloVe-format text file (``word v1 v2 …`` per line); anything but a regular
        file (a FIFO, a device) is refused before it is opened.

        ``keep`` limits the rows read to these tokens (the encoder's vocabulary), so a
        large GloVe file costs memory only for the words that can be looked up.
        """
        label = str(path)
        source = Path(path).expanduser()
        regular_file(source, label)
        try:
            with source.open(encoding="utf-8", errors="replace") as handle:
                return cls._parse_glove(handle, label, keep)
        except OSError as exc:
            raise read_error(label, exc) from None

    @classmethod
    def _parse_glove(
        cls, lines: Iterable[str], label: str, keep: set[str] | None
    ) -> StaticEmbeddings:
        tokens, rows, dim = [], [], None
        for n, line in enumerate(lines, 1):
            parts = line.rstrip().split(" ")
            if len(parts) < 2:
                continue
            if keep is not None and parts[0] not in keep:
                continue
            try:
                vec = np.asarray(parts[1:], dtype=np.float32)
            except ValueError:
                raise InputError(f"{label}:{n}: not a GloVe line (word then numbers)") from None
            if dim is None:
                dim = vec.shape[0]
            elif vec.shape[0] != dim:
                raise InputError(f"{label}:{n}: {vec.shape[0]} numbers, expected {dim}")
            if not np.isfinite(vec).all():
                raise InputError(f"{label}:{n}: NaN or Inf in the vector")
            tokens.append(parts[0])
            rows.append(vec)
        if not rows:
            what = " for any token of the vocabulary" if keep is not None else ""
            raise InputError(f"{label}: holds no vectors{what}")
        return cls.from_table(np.stack(rows), tokens, f"GloVe file {Path(label).name}")

    def has(self, token: str) -> bool:
        return token in self.index

    def rows_for(self, vocab: list[str]) -> np.ndarray:
        """For each vocabulary entry its row here, or -1."""
        return np.fromiter((self.index.get(t, -1) for t in vocab), dtype=np.int64, count=len(vocab))


def check_glove(path: str | Path) -> str | Path:
    """The declared check of the ``glove`` option: a GloVe file's path, proved a readable
    regular file before any model loads (a FIFO or a device is refused unopened); returned
    as given (messages name it as typed)."""
    if not isinstance(path, (str, Path)):
        raise OptionError(
            "glove", f"glove must be a GloVe-format text file's path, not {type(path).__name__}"
        )
    source = Path(path).expanduser()
    regular_file(source, str(path))
    try:
        with source.open("rb") as handle:
            handle.read(1)
    except OSError as exc:
        raise read_error(str(path), exc) from None
    return path


def static_embeddings_for(encoder: Encoder, glove: str | Path | None = None) -> StaticEmbeddings:
    """``f_enc``: the encoder's own input word embeddings, or the GloVe file at ``glove``
    (its rows for the encoder's vocabulary) when given."""
    if glove is not None:
        return StaticEmbeddings.from_glove(glove, keep=set(encoder.vocab))
    table = encoder.static_embeddings()
    if table is None:
        raise InputError(
            f"{encoder.name} has no input word-embedding table: give a GloVe file for Semantic@k"
        )
    return StaticEmbeddings.from_table(*table, description=f"{encoder.name} input word embeddings")
