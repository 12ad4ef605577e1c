"""Sparse vectors encoded elsewhere (a GPU cluster's SPLADE run, Pyserini's ``encode``,
Seismic's tooling) brought in as a stored collection, with a parity check against the
named encoder.

Formats (:data:`VECTOR_FORMATS`; told from the content when not given):

- ``anserini``: Anserini's JsonVectorCollection, one ``{"id", "contents", "vector": {term:
  weight}}`` per line, in a ``.jsonl``, a ``.jsonl.gz`` or a folder of such parts (read in
  name order). Integer weights are impacts, divided by ``scale`` (the factor they were
  quantised with; Pyserini's and SPLADE's usual 100); float weights are taken as given; a
  file mixing both is refused.
- ``npz``: a scipy CSR matrix (``scipy.sparse.save_npz``), its columns the encoder's
  vocabulary ids, with an ids file of one ``id`` (or ``id<TAB>text``) per row.
- ``hf``: a Hugging Face dataset saved on disk (Arrow files), or Parquet files, with
  ``id``, ``indices`` (vocabulary ids) and ``values`` columns, and ``text`` or
  ``contents`` when the items have one.

Terms are mapped to the encoder's vocabulary by their spelling (word pieces as ``##x``
tokens); a term the vocabulary lacks is left out of the stored vector and counted, by name,
in the result and the manifest. Without an encoder the vocabulary is the terms read, in
the order first seen. The import streams in chunks through the one index writer
(:func:`~.store_writer.write_atomically`): memory is a chunk, the ids and the parity sample
whatever the file's size, and ``--out`` changes only when the whole import succeeded.
A JsonVectorCollection's lines of the usual shape are read a batch at a time with numpy
(:mod:`.vector_lines`); any other line is read by orjson alone, as every line once was
(:func:`_anserini_chunks_per_line`): the stored bytes, the notes and every refusal are the
same either way.

The parity check (the failure it guards against: an exported encoder that keeps a fifth of
its tokens, eland #827): a seeded reservoir sample of items with a text is re-encoded with
the encoder and compared with the imported vectors (after the scale): the mean cosine, the
mean top-10 term overlap, the share of the imported weight on terms the encoder gives 0, and
the median ratio of the two vectors' norms (a wrong ``scale`` moves it). Beyond the
tolerance the import is refused with the numbers, unless ``accept_mismatch``.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import re
import time
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO

import numpy as np
import orjson
import scipy.sparse as sp

from lexlens.analysis.collections.build_parts import IndexResult, encoder_entry
from lexlens.analysis.collections.manifest import ImportEntry, ParityEntry
from lexlens.analysis.collections.store_writer import (
    IndexHeader,
    IndexWriter,
    check_out,
    write_atomically,
)
from lexlens.analysis.collections.vector_lines import (
    MAX_TERM,
    PAD,
    WORD_MASKS,
    Batch,
    Parsed,
    TermTable,
    parse_batch,
    spelling_hash,
    u64_view,
)
from lexlens.analysis.core.arguments import (
    device_argument,
    encoder_argument,
    encoder_or_spec,
    path_argument,
    progress_argument,
)
from lexlens.analysis.core.inputs import MAX_LINE_BYTES
from lexlens.analysis.core.options import SEED, Options, option, shared
from lexlens.analysis.core.results import Progress
from lexlens.analysis.datasets.items import SkippedItems
from lexlens.analysis.datasets.trec import Problems, read_qrels, read_queries
from lexlens.models.base import Encoder, InputError

#: The formats of encoded corpora an import reads.
VECTOR_FORMATS = ("anserini", "npz", "hf")
#: Items read and written at once.
CHUNK_ITEMS = 8192
#: Unknown terms a result and a manifest name (the most frequent; all are counted).
UNKNOWN_NAMED = 20
#: Distinct unknown terms tallied by name (beyond: counted, not named).
UNKNOWN_TALLIED = 100_000
#: The parity tolerance: a mean cosine and a mean top-10 overlap at least these, a share of
#: the imported weight on terms the encoder gives 0 at most this, the median norm ratio
#: within these bounds. Quantising SPLADE weights (0–3) at scale 100 moves a weight by at
#: most 0.005 (cosine above 0.999, measured); a corpus keeping a fifth of its terms falls
#: near 0.5 cosine and 0.2 overlap.
MIN_COSINE = 0.98
MIN_TOP10_OVERLAP = 0.8
MAX_ZERO_MASS = 0.02
NORM_RATIO = (0.8, 1.25)
#: What needs an encoder: encoding a text query, re-encoding an item's text.
NEEDS_ENCODER = (
    "search and evaluation with text queries, text provenance, text-level counterfactuals, "
    "faithfulness"
)


def _positive_scale(value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise VectorImportOptions.option("scale").refuse(value)
    return value


@dataclass(frozen=True)
class VectorImportOptions(Options):
    """The settings of an import of encoded vectors (``lexlens index --vectors``)."""

    what = "index"

    vector_format: str | None = option(
        None,
        "the format of --vectors: anserini (JsonVectorCollection .jsonl, .jsonl.gz, a folder "
        "of parts), npz (scipy CSR + an ids file), hf (Parquet / a saved dataset with "
        "indices, values); default: told from the content",
        choices=VECTOR_FORMATS,
        label="Vector format",
    )
    scale: float | None = option(
        None,
        "integer impacts are divided by it (the factor they were quantised with, usually "
        "100); float weights are taken as given",
        check=_positive_scale,
        wanted="a positive number",
        label="Impact scale",
    )
    vector_ids: str | None = option(
        None,
        "npz: one id (or id<TAB>text) per row (default: PATH without .npz + .ids.txt)",
        metavar="FILE",
        label="Ids file",
    )
    parity_sample: int = option(
        200,
        "items re-encoded from their text to check the vectors against the encoder",
        low=1,
        high=100_000,
        label="Parity sample",
    )
    seed: int = shared(SEED)
    queries: str | None = option(
        None,
        "the benchmark's queries kept with the index (BEIR's queries.jsonl or qid<TAB>text), "
        "with --qrels; or a BEIR folder (its queries.jsonl and qrels/test.tsv, or --qrels)",
        metavar="FILE",
        label="Queries file",
    )
    qrels: str | None = option(
        None,
        "the benchmark's judgements kept with the index (TREC or BEIR qrels), with --queries",
        metavar="FILE",
        label="Judgements file",
    )
    accept_mismatch: bool = option(
        False,
        "store vectors that fail the parity check (the manifest records it)",
        label="Accept a parity mismatch",
    )


@dataclass
class _Unknown:
    """Terms the vocabulary lacks: postings and items, the most frequent by name."""

    postings: int = 0
    items: int = 0
    names: Counter = field(default_factory=Counter)

    def add(self, terms: list[str], items: int) -> None:
        self.postings += len(terms)
        self.items += items
        if len(self.names) < UNKNOWN_TALLIED:
            self.names.update(terms)


@dataclass
class _Chunk:
    """Items read at once: ids, texts, where they were read (a file and each item's line,
    or its first row), and their vectors as CSR parts (vocabulary ids, float64 weights
    after the scale)."""

    ids: list[str]
    texts: list[str]
    source: str
    lines: list[int] | None
    first_row: int
    indptr: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    #: Its rows as :func:`_sorted_rows` makes them, when the reader made them already.
    rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def where(self, n: int) -> str:
        """How a message names the chunk's ``n``-th item: its file and line, or row."""
        if self.lines is not None:
            return f"{self.source}:{self.lines[n]}"
        return f"{self.source} row {self.first_row + n:,}"


class _Vocabulary:
    """Spelling → id: the encoder's vocabulary, or (no encoder) the terms as first read."""

    def __init__(self, tokens: list[str] | None) -> None:
        self.fixed = tokens is not None
        self.tokens: list[str] = list(tokens or [])
        self.ids = {t: i for i, t in enumerate(self.tokens)}

    def map(self, terms: list[str]) -> np.ndarray:
        """The id of each term (-1: not in a fixed vocabulary; a new one is added). A dict
        lookup: orjson hands out one string object per distinct key, its hash computed once."""
        cols = np.fromiter(map(self.ids.get, terms, repeat(-1)), np.int64, len(terms))
        if not self.fixed and (cols < 0).any():
            new = dict.fromkeys(terms[n] for n in np.flatnonzero(cols < 0).tolist())
            for term in new:
                self.ids[term] = len(self.tokens)
                self.tokens.append(term)
            cols = np.fromiter(map(self.ids.__getitem__, terms), np.int64, len(terms))
        return cols


# -- reading ------------------------------------------------------------------------------


def detect_format(path: Path) -> str:
    """The format of ``path`` told from its content (magic bytes, a folder's files)."""
    if path.is_dir():
        names = [p.name for p in sorted(path.iterdir()) if p.is_file()]
        if any(n.endswith((".parquet", ".arrow")) for n in names):
            return "hf"  # a saved dataset's state.json and dataset_info.json are no parts
        if any(n.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz")) for n in names):
            return "anserini"
        raise InputError(
            f"--vectors {path}: a folder holding no .jsonl(.gz) parts and no .parquet or "
            ".arrow files: give --vector-format"
        )
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head.startswith(b"\x1f\x8b"):
        return "anserini"
    if head.startswith(b"PK\x03\x04"):
        return "npz"
    if head.startswith(b"PAR1"):
        return "hf"
    if head.lstrip().startswith(b"{"):
        return "anserini"
    if not head:
        raise InputError(f"--vectors {path}: the file is empty")
    raise InputError(
        f"--vectors {path}: neither JSON lines, gzip, a .npz nor Parquet: give --vector-format"
    )


def _parts(path: Path) -> list[Path]:
    """A JsonVectorCollection's files: the file itself, or a folder's parts in name order."""
    if not path.is_dir():
        return [path]
    suffixes = (".jsonl", ".jsonl.gz", ".json", ".json.gz")
    parts = [p for p in sorted(path.iterdir()) if p.is_file() and p.name.endswith(suffixes)]
    if not parts:
        raise InputError(f"--vectors {path}: the folder holds no .jsonl or .jsonl.gz parts")
    return parts


def _open_part(path: Path) -> BinaryIO:
    """A part opened for reading, gunzipped when it is gzip (told by its first bytes)."""
    handle = open(path, "rb")  # noqa: SIM115
    if handle.read(2) == b"\x1f\x8b":
        handle.seek(0)
        return io.BufferedReader(gzip.GzipFile(fileobj=handle, mode="rb"), 1 << 20)  # type: ignore[return-value]
    handle.seek(0)
    return handle


def _lines(path: Path, shown: str) -> Iterator[tuple[int, bytes]]:
    """``(number, line)`` of a part's non-blank lines; a line over
    :data:`~lexlens.analysis.core.inputs.MAX_LINE_BYTES` is refused, never held whole."""
    try:
        with _open_part(path) as handle:
            number = 0
            while True:
                line = handle.readline(MAX_LINE_BYTES + 1)
                if not line:
                    return
                number += 1
                if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                    raise InputError(
                        f"{shown}:{number}: a line longer than {MAX_LINE_BYTES:,} bytes"
                    )
                if line.strip():
                    yield number, line
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError(f"{shown}: cannot be read ({why})") from None


class _Impacts:
    """Whether a file's weights are integer impacts or floats (decided by the first)."""

    def __init__(self, scale: float | None) -> None:
        self.scale = scale
        self.integer: bool | None = None


def _anserini_chunks_per_line(
    path: Path, vocab: _Vocabulary, unknown: _Unknown, impacts: _Impacts
) -> Iterator[_Chunk]:
    """A JsonVectorCollection's items, :data:`CHUNK_ITEMS` at a time, each line parsed by
    orjson (the reference of :func:`_anserini_chunks`, which stores the same bytes)."""
    for part in _parts(path):
        shown = str(part)
        lines = _lines(part, shown)
        while True:
            read = _Read(shown)
            for number, line in lines:
                read.add(number, line)
                if len(read.ids) >= CHUNK_ITEMS:
                    break
            if not read.ids:
                break
            yield read.chunk(vocab, unknown, impacts)


def _anserini_chunks(
    path: Path, vocab: _Vocabulary, unknown: _Unknown, impacts: _Impacts
) -> Iterator[_Chunk]:
    """A JsonVectorCollection's items, :data:`CHUNK_ITEMS` at a time: lines of the usual
    shape read a batch at a time (:mod:`.vector_lines`), every other line as
    :func:`_anserini_chunks_per_line` reads it, with the same chunks, results and messages."""
    table = TermTable()
    for part in _parts(path):
        shown = str(part)
        table.extend(vocab.tokens, vocab.ids)
        build = _Build(shown, vocab, table)
        for piece in _batches(part, shown):
            if isinstance(piece, _HugeLine):
                raise InputError(
                    f"{shown}:{piece.number}: a line longer than {MAX_LINE_BYTES:,} bytes"
                )
            if isinstance(piece, _ReadFailed):  # read again line by line, to fail as it does
                for number, line in _lines(part, shown):
                    if number > piece.emitted:
                        build.add_line(number, line)
                        if build.count >= CHUNK_ITEMS:
                            yield build.chunk(unknown, impacts)
                            table.extend(vocab.tokens, vocab.ids)
                            build = _Build(shown, vocab, table)
                break
            while len(piece):
                taken, piece = piece.split(min(len(piece), CHUNK_ITEMS - build.count))
                build.add_batch(taken)
                if build.count >= CHUNK_ITEMS:
                    yield build.chunk(unknown, impacts)
                    table.extend(vocab.tokens, vocab.ids)
                    build = _Build(shown, vocab, table)
        if build.count:
            yield build.chunk(unknown, impacts)


#: Bytes read from a part at once by the batch reader.
READ_BYTES = 1 << 20
#: Bytes a line may start with and still be blank (``bytes.strip``'s whitespace).
_BLANK_START = np.zeros(256, bool)
_BLANK_START[list(b" \t\r\x0b\x0c")] = True


@dataclass(frozen=True)
class _HugeLine:
    number: int


@dataclass(frozen=True)
class _ReadFailed:
    emitted: int  # lines handed out before the read that failed


def _batches(path: Path, shown: str) -> Iterator[Batch | _HugeLine | _ReadFailed]:
    """A part's complete lines, :data:`READ_BYTES` at a time, as :func:`_lines` numbers and
    keeps them (blank ones left out); a line over ``MAX_LINE_BYTES`` ends it, never held
    whole; a read that fails ends it with the lines handed out so far."""
    try:
        handle = _open_part(path)
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError(f"{shown}: cannot be read ({why})") from None
    with handle:
        carry = b""
        emitted = 0
        while True:
            buf = bytearray(len(carry) + READ_BYTES + len(PAD) + 1)
            buf[: len(carry)] = carry
            try:
                got = handle.readinto(memoryview(buf)[len(carry) : len(carry) + READ_BYTES])
            except Exception:  # noqa: BLE001 - the line reader meets it again and says it
                yield _ReadFailed(emitted)
                return
            filled = len(carry) + got
            if not got:
                if not carry:
                    return
                buf[filled] = 10  # the last line, without its newline
                filled += 1
            cut = buf.rfind(b"\n", 0, filled) + 1
            carry = bytes(buf[cut:filled])
            buf[cut : cut + len(PAD)] = PAD
            if cut:
                batch, huge, lines = _batch_lines(buf, cut, emitted)
                if len(batch):
                    yield batch
                if huge:
                    yield _HugeLine(huge)
                    return
                emitted += lines
            if len(carry) > MAX_LINE_BYTES:
                yield _HugeLine(emitted + 1)
                return


def _batch_lines(buf: bytearray, cut: int, emitted: int) -> tuple[Batch, int, int]:
    """The lines of ``buf[:cut]`` (each ending with a newline) after ``emitted`` others:
    the non-blank ones up to the first over ``MAX_LINE_BYTES``, that one's number (0: none)
    and how many lines there were."""
    u8 = np.frombuffer(buf, np.uint8, cut)
    controls = np.flatnonzero(u8 < 32)
    newline = u8[controls] == 10
    ends = controls[newline]
    controls = controls[~newline]
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    numbers = np.arange(emitted + 1, emitted + 1 + len(ends))
    lines = len(ends)
    huge = 0
    long = np.flatnonzero(ends - starts > MAX_LINE_BYTES)
    if long.size:
        huge = int(numbers[long[0]])
        starts, ends, numbers = starts[: long[0]], ends[: long[0]], numbers[: long[0]]
    maybe = np.flatnonzero((ends == starts) | _BLANK_START[u8[np.minimum(starts, cut - 1)]])
    if maybe.size:
        blank = [n for n in maybe.tolist() if not buf[starts[n] : ends[n]].strip()]
        if blank:
            keep = np.ones(len(starts), bool)
            keep[blank] = False
            starts, ends, numbers = starts[keep], ends[keep], numbers[keep]
    return Batch(buf, starts, ends, numbers, controls), huge, lines


class _Build:
    """A chunk's items as :func:`_anserini_chunks` reads them: each line read by
    :func:`~.vector_lines.parse_batch` or, when it cannot, by :func:`_read_line`, in the
    order of the lines; at the end checked and mapped as :meth:`_Read.chunk` does."""

    def __init__(self, source: str, vocab: _Vocabulary, table: TermTable) -> None:
        self.source = source
        self.vocab = vocab
        self.table = table
        self.ids: list[str] = []
        self.texts: list[str] = []
        self.lines: list[int] = []
        self.sizes: list[int] = []
        self.fast: list[bool] = []
        self.pieces: list[tuple[Any, list[int], list[int]]] = []  # the lines' bytes, in order
        # the weights of the lines read a batch at a time, in order
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.floats: list[np.ndarray] = []
        # terms the vocabulary lacks: a code -2 - k among cols names the k-th
        self.names: dict[str, int] = {}
        self.decoded: dict[bytes, int] = {}  # a spelling the table lacks → its id or code
        # the weights of the other lines, in order
        self.terms: list[str] = []
        self.values: list[Any] = []

    @property
    def count(self) -> int:
        return len(self.ids)

    def add_line(self, number: int, line: bytes) -> None:
        """One line read by :func:`_read_line`."""
        self.sizes.append(self._read(number, line))
        self.lines.append(number)
        self.fast.append(False)
        self.pieces.append((line, [0], [len(line) - 1]))

    def _read(self, number: int, line: bytes) -> int:
        """One line's item read by :func:`_read_line`; its weights."""
        item, contents, vector = _read_line(self.source, number, line)
        self.ids.append(item)
        self.texts.append(contents)
        self.terms.extend(vector)
        self.values.extend(vector.values())
        return len(vector)

    def add_batch(self, batch: Batch) -> None:
        """A batch's lines, in order: those of the usual shape read at once."""
        buf = batch.buf
        view = memoryview(buf)
        found = parse_batch(batch, self.table)
        ok = found.ok
        bad_lines = _missing_terms(buf, found, self.vocab, self.names, self.decoded)
        if bad_lines:
            ok[bad_lines] = False
        starts, ends = batch.starts.tolist(), batch.ends.tolist()
        vector_at = found.vector_at.tolist()
        numbers = batch.numbers.tolist()
        sizes = found.sizes.tolist()
        ids, texts, loads, space = self.ids, self.texts, orjson.loads, _SPACE
        if (found.plain & ok).all() and self._plain(buf, found.fields):  # all plain, read
            return self._batched(batch, found, numbers, sizes)
        plain, spans = found.plain.tolist(), found.fields.tolist()
        for n, read_here in enumerate(ok.tolist()):
            if read_here and plain[n]:  # its id and text are their bytes, decoded
                a, b, c, d = spans[n]
                try:
                    raw, contents = buf[a:b].decode("utf-8"), buf[c:d].decode("utf-8")
                except UnicodeDecodeError:
                    raw = ""
                if raw and (raw.isalnum() or not space(raw)):
                    ids.append(raw)
                    texts.append(contents)
                    continue
            if read_here:  # the line without its vector: that replaced by 0, parsed in place
                at = vector_at[n]
                kept = buf[at : at + 2]
                buf[at : at + 2] = b"0}"
                try:
                    item = loads(view[starts[n] : at + 2])
                except orjson.JSONDecodeError:
                    item = None
                buf[at : at + 2] = kept
                if type(item) is dict and type(item.get("vector")) is int:
                    raw, contents = item.get("id"), item.get("contents")
                    if not (
                        type(raw) is str
                        and raw
                        and type(contents) is str
                        and (raw.isalnum() or not space(raw))
                    ):
                        fields = _item_fields(item)
                        raw, contents = fields if type(fields) is tuple else (None, None)
                    if raw is not None:
                        ids.append(raw)
                        texts.append(contents)
                        continue
                ok[n] = False
            sizes[n] = self._read(numbers[n], bytes(buf[starts[n] : ends[n] + 1]))
        self._batched(batch, found, numbers, sizes)

    def _plain(self, buf: Any, spans: np.ndarray) -> bool:
        """The ids and texts of a batch whose every line is plain, decoded and added, when
        each id is alphanumeric (so holds no whitespace) and all decode."""
        try:
            found_ids = [buf[a:b].decode("utf-8") for a, b in spans[:, :2].tolist()]
            found_texts = [buf[a:b].decode("utf-8") for a, b in spans[:, 2:].tolist()]
        except UnicodeDecodeError:
            return False
        if not all(map(str.isalnum, found_ids)):
            return False
        self.ids.extend(found_ids)
        self.texts.extend(found_texts)
        return True

    def _batched(self, batch: Batch, found: Parsed, numbers: list[int], sizes: list[int]) -> None:
        """The bookkeeping of a batch whose lines were read: numbers, sizes, bytes, and
        the weights of the lines read here."""
        ok = found.ok
        self.lines.extend(numbers)
        self.sizes.extend(sizes)
        self.fast.extend(ok.tolist())
        self.pieces.append((batch.buf, batch.starts.tolist(), batch.ends.tolist()))
        keep = ok[found.term_line]
        self.cols.append(found.ids[keep])
        self.vals.append(found.values[keep])
        self.floats.append(found.floats[keep])

    def _at(self, position: int) -> str:
        n = int(np.searchsorted(np.cumsum(self.sizes), position, side="right"))
        return f"{self.source}:{self.lines[n]}"

    def chunk(self, unknown: _Unknown, impacts: _Impacts) -> _Chunk:
        """The items' weights checked, their terms mapped, rows sorted, as
        :meth:`_Read.chunk` then :func:`_sorted_rows` make them."""
        n = len(self.ids)
        sizes = np.asarray(self.sizes, np.int64)
        fast = np.asarray(self.fast, bool)
        slow_terms = self.terms
        slow_ids = np.fromiter(
            map(self.vocab.ids.get, slow_terms, repeat(-1)), np.int64, len(slow_terms)
        )
        names = self.names
        for p in np.flatnonzero(slow_ids < 0).tolist():
            slow_ids[p] = -2 - names.setdefault(slow_terms[p], len(names))
        fast_term = np.repeat(fast, sizes)
        total = int(sizes.sum())

        def merged(parts: list[np.ndarray], slow: Any, dtype: Any) -> np.ndarray:
            """The weights' ``parts`` read in batches and the others, in line order."""
            read = np.concatenate(parts).astype(dtype, copy=False) if parts else None
            if not slow_terms and read is not None:
                return read
            out = np.empty(total, dtype)
            out[fast_term] = read if read is not None else np.zeros(0, dtype)
            if slow is not None:
                out[~fast_term] = slow
            return out

        cols = merged(self.cols, slow_ids, np.int64)
        # the terms not in the vocabulary, in the order first read
        where_missing = np.flatnonzero(cols < 0)
        codes = -2 - cols[where_missing]
        known = len(self.vocab.tokens)
        listed = list(names)
        first: list[str] = []
        if codes.size:
            distinct, first_at = np.unique(codes, return_index=True)
            in_order = distinct[np.argsort(first_at)]
            rank = np.zeros(len(listed), np.int64)
            rank[in_order] = known + np.arange(len(in_order))
            cols[where_missing] = rank[codes]
            first = [listed[k] for k in in_order.tolist()]
        vals = merged(self.vals, None, np.float64)
        values = self.values
        kinds = merged(self.floats, None, np.int8)
        if values:
            types = list(map(type, values))
            kinds[~fast_term] = np.fromiter(
                (0 if t is int else 1 if t is float else 2 for t in types), np.int8, len(types)
            )
        overflow = False
        if values:
            try:
                vals[~fast_term] = np.asarray(values, dtype=np.float64)
            except OverflowError:
                overflow = True  # refused after the checks of the weights' kinds
            except (TypeError, ValueError):
                pass  # a weight that is no number: refused below
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(sizes, out=indptr[1:])
        sorted_rows = _sorted_by_term(indptr, cols, vals, known + len(first))
        if sorted_rows is None:  # a term twice in a line: read as a dict reads it
            return self._per_line(unknown, impacts)
        slow_at = np.flatnonzero(~fast_term)

        def value(position: int) -> Any:
            return values[int(np.searchsorted(slow_at, position))]

        if (kinds == 2).any():
            bad = int(np.flatnonzero(kinds == 2)[0])
            raise InputError(f"{self._at(bad)}: a weight that is not a number: {value(bad)!r}")
        if impacts.integer is None and total:
            impacts.integer = bool(kinds[0] == 0)
            if impacts.integer and impacts.scale is None:
                raise InputError(
                    f"{self._at(0)}: integer impacts: give --scale, the factor they were "
                    "quantised with (Pyserini's and SPLADE's usual 100)"
                )
        has_int, has_float = bool((kinds == 0).any()), bool((kinds == 1).any())
        if (has_int and has_float) or (total and has_int != impacts.integer):
            wanted = 0 if impacts.integer else 1
            bad = int(np.flatnonzero(kinds != wanted)[0])
            first_kind = "integer impacts" if impacts.integer else "float weights"
            raise InputError(
                f"{self._at(bad)}: a {'float' if kinds[bad] else 'int'} weight in a file of "
                f"{first_kind}: one kind per file"
            )
        if overflow:
            raise InputError(f"{self.source}: an integer impact too large for a weight")
        if not np.isfinite(vals).all():
            bad = int(np.flatnonzero(~np.isfinite(vals))[0])
            raise InputError(f"{self._at(bad)}: a NaN or infinite weight")
        if first and not self.vocab.fixed:
            for name in first:
                self.vocab.ids[name] = len(self.vocab.tokens)
                self.vocab.tokens.append(name)
        elif first:
            rows = np.repeat(np.arange(n), sizes)
            in_read = np.asarray(listed, dtype=object)[codes].tolist()
            unknown.add(in_read, int(np.unique(rows[where_missing]).size))
        row_ptr, row_cols, row_vals = sorted_rows  # type: ignore[misc]
        if impacts.integer:
            row_vals = row_vals / impacts.scale
        keep = row_vals != 0
        if self.vocab.fixed:
            keep &= row_cols < known
        if not keep.all():
            rows = np.repeat(np.arange(n), np.diff(row_ptr))[keep]
            row_ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
            row_cols, row_vals = row_cols[keep], row_vals[keep]
        chunk = _Chunk(self.ids, self.texts, self.source, self.lines, 0, indptr, cols, vals)
        chunk.rows = (row_ptr, row_cols.astype(np.int32), row_vals.astype(np.float32))
        return chunk

    def _per_line(self, unknown: _Unknown, impacts: _Impacts) -> _Chunk:
        """The chunk read again, every line by :func:`_read_line`."""
        read = _Read(self.source)
        lines = iter(self.lines)
        for buf, starts, ends in self.pieces:
            for start, end in zip(starts, ends, strict=True):
                read.add(next(lines), bytes(buf[start : end + 1]))
        return read.chunk(self.vocab, unknown, impacts)


def _missing_terms(
    buf: Any, found: Parsed, vocab: _Vocabulary, names: dict[str, int], decoded: dict
) -> list:
    """The terms the table did not name, decoded: their id set in ``found.ids`` when the
    vocabulary has them, else the code ``-2 - k`` of the ``k``-th of ``names`` (added to
    it); the lines of a term that is no JSON text. Each distinct spelling is decoded once:
    the spellings are grouped by their words and length (exactly: a group's spellings are
    checked equal to its first, a longer one than the words hold is decoded alone)."""
    at = np.flatnonzero((found.ids < 0) & found.ok[found.term_line])
    if not at.size:
        return []
    opens, closes = found.term_open[at], found.term_close[at]
    length = closes - opens - 1
    w64 = u64_view(buf)
    words = [
        w64[opens + 1 + 8 * k] & WORD_MASKS[np.clip(length - 8 * k, 0, 8)]
        for k in range(MAX_TERM // 8)
    ]
    key = spelling_hash(words, length)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    rep = first[inverse]
    alone = length > MAX_TERM
    for w in words:
        alone |= w != w[rep]
    alone |= length != length[rep]
    decode = np.concatenate([first, np.flatnonzero(alone)])
    ids = vocab.ids
    codes = np.empty(len(decode), np.int64)
    for n, (a, b) in enumerate(zip(opens[decode].tolist(), closes[decode].tolist(), strict=True)):
        spelling = bytes(buf[a : b + 1])
        code = decoded.get(spelling)
        if code is None:
            try:
                term = orjson.loads(spelling)
            except orjson.JSONDecodeError:
                code = -1  # no JSON text: its line is read per line
            else:
                code = ids.get(term)
                if code is None:
                    code = -2 - names.setdefault(term, len(names))
            decoded[spelling] = code
        codes[n] = code
    code = codes[: len(first)][inverse]
    code[np.flatnonzero(alone)] = codes[len(first) :]
    found.ids[at] = code
    return found.term_line[at[code == -1]].tolist()


def _sorted_by_term(
    indptr: np.ndarray, cols: np.ndarray, vals: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Rows with their terms in order (a CSR → CSC → CSR counting sort, linear), or
    ``None`` when a row holds a term twice."""
    n = len(indptr) - 1
    rising = cols[1:] > cols[:-1]
    starts = indptr[1:-1]
    rising[starts[(starts > 0) & (starts < len(cols))] - 1] = True  # rows' boundaries
    if rising.all():  # each row's terms already in order, none twice (an export's)
        return indptr, cols, vals
    matrix = sp.csr_matrix((vals, cols, indptr), shape=(n, max(width, 1)))
    matrix = matrix.tocsc().tocsr()
    order = matrix.indices
    repeated = order[1:] == order[:-1]
    starts = matrix.indptr[1:-1]
    repeated[starts[(starts > 0) & (starts < len(order))] - 1] = False
    if repeated.any():
        return None
    return matrix.indptr, order, matrix.data


#: A character an id may not hold (TREC files split on whitespace).
_SPACE = re.compile(r"\s").search
#: A JSON escape of a UTF-16 surrogate: text only when paired.
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]").search


def _item_fields(item: dict) -> tuple[str, str] | str:
    """A line's id and text, or what is wrong with them."""
    raw = item.get("id")
    if raw is None:
        raw = item.get("docid")
    if type(raw) is int:
        raw = str(raw)
    if type(raw) is not str or not raw or _SPACE(raw):
        return "the id must be a text without whitespace"
    contents = item.get("contents")
    if contents is None:
        contents = item.get("content") or ""
    if type(contents) is not str:
        return '"contents" must be a text'
    return raw, contents


def _read_line(source: str, number: int, line: bytes) -> tuple[str, str, dict]:
    """One line's id, text and vector, checked: an object with an id, a vector of term →
    weight (the weights are checked with their chunk's), a text."""
    try:
        item, strict = orjson.loads(line), False
    except orjson.JSONDecodeError:
        item, strict = _stdlib_json(source, number, line), True
    if type(item) is not dict:
        raise InputError(f"{source}:{number}: not a JSON object")
    if strict and b"\\u" in line and _SURROGATE(line):
        try:
            json.dumps(item, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(
                f"{source}:{number}: a lone surrogate escape (\\uD800–\\uDFFF) is no text"
            ) from None
    vector = item.get("vector")
    if type(vector) is not dict:
        raise InputError(f'{source}:{number}: no "vector" object of term → weight')
    fields = _item_fields(item)
    if type(fields) is str:
        raise InputError(f"{source}:{number}: {fields}")
    return fields[0], fields[1], vector


def _stdlib_json(source: str, number: int, line: bytes) -> Any:
    """A line orjson refuses, read by the standard library: its error as the message, or
    what JSON's grammar in Python allows and orjson does not (NaN, a lone surrogate
    escape, a number beyond a double), refused by the checks that follow."""
    try:
        return json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 text"
        raise InputError(f"{source}:{number}: not JSON ({why})") from None
    except RecursionError:
        raise InputError(f"{source}:{number}: JSON nested too deeply") from None


class _Read:
    """The items of a part's lines read so far for a chunk: checked, not yet mapped."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.ids: list[str] = []
        self.texts: list[str] = []
        self.lines: list[int] = []
        self.sizes: list[int] = []
        self.terms: list[str] = []
        self.values: list[Any] = []

    def add(self, number: int, line: bytes) -> None:
        """One line's item, checked: an object with an id, a vector of term → number, a text."""
        item, contents, vector = _read_line(self.source, number, line)
        self.ids.append(item)
        self.texts.append(contents)
        self.lines.append(number)
        self.sizes.append(len(vector))
        self.terms.extend(vector)
        self.values.extend(vector.values())

    def _at(self, position: int) -> str:
        """The file and line of the item holding the ``position``-th weight read."""
        n = int(np.searchsorted(np.cumsum(self.sizes), position, side="right"))
        return f"{self.source}:{self.lines[n]}"

    def chunk(self, vocab: _Vocabulary, unknown: _Unknown, impacts: _Impacts) -> _Chunk:
        """The items' weights checked (numbers, of one kind, finite), their terms mapped."""
        values = self.values
        kinds = set(map(type, values))
        if not kinds <= {int, float}:
            bad = next(n for n, v in enumerate(values) if type(v) not in (int, float))
            raise InputError(f"{self._at(bad)}: a weight that is not a number: {values[bad]!r}")
        if impacts.integer is None and values:
            impacts.integer = type(values[0]) is int
            if impacts.integer and impacts.scale is None:
                raise InputError(
                    f"{self._at(0)}: integer impacts: give --scale, the factor they were "
                    "quantised with (Pyserini's and SPLADE's usual 100)"
                )
        if len(kinds) > 1 or (kinds and (int in kinds) != impacts.integer):
            wanted = int if impacts.integer else float
            bad = next(n for n, v in enumerate(values) if type(v) is not wanted)
            first = "integer impacts" if impacts.integer else "float weights"
            raise InputError(
                f"{self._at(bad)}: a {type(values[bad]).__name__} weight in a file of "
                f"{first}: one kind per file"
            )
        try:
            vals = np.asarray(values, dtype=np.float64)
        except OverflowError:
            raise InputError(f"{self.source}: an integer impact too large for a weight") from None
        if not np.isfinite(vals).all():
            bad = int(np.flatnonzero(~np.isfinite(vals))[0])
            raise InputError(f"{self._at(bad)}: a NaN or infinite weight")
        if impacts.integer:
            vals /= impacts.scale
        cols = vocab.map(self.terms)
        indptr = np.zeros(len(self.ids) + 1, np.int64)
        np.cumsum(self.sizes, out=indptr[1:])
        chunk = _Chunk(self.ids, self.texts, self.source, self.lines, 0, indptr, cols, vals)
        return _known(chunk, self.terms, unknown)


def _known(chunk: _Chunk, terms: list[str] | None, unknown: _Unknown) -> _Chunk:
    """The chunk without the terms its vocabulary lacks (``cols`` -1), which are counted."""
    missing = chunk.cols < 0
    if not missing.any():
        return chunk
    rows = np.repeat(np.arange(len(chunk.ids)), np.diff(chunk.indptr))
    positions = np.flatnonzero(missing)
    names = (
        [terms[p] for p in positions.tolist()]
        if terms
        else [f"[id {c}]" for c in chunk.cols[positions]]
    )
    unknown.add(names, int(np.unique(rows[positions]).size))
    keep = ~missing
    counts = np.bincount(rows[keep], minlength=len(chunk.ids))
    chunk.indptr = np.concatenate([[0], np.cumsum(counts)])
    chunk.cols, chunk.vals = chunk.cols[keep], chunk.vals[keep]
    return chunk


def _npy_member(archive: zipfile.ZipFile, name: str, shown: str) -> tuple[BinaryIO, np.dtype, int]:
    """An array of a .npz opened for streaming: its handle past the header, dtype, length."""
    try:
        handle = archive.open(name)
        version = np.lib.format.read_magic(handle)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read_header(handle)
    except (KeyError, ValueError, OSError, zipfile.BadZipFile) as exc:
        raise InputError(f"{shown}: not a scipy sparse .npz ({name}: {exc})") from None
    if dtype.hasobject or len(shape) != 1:
        raise InputError(f"{shown}: {name} is not a flat numeric array")
    return handle, dtype, int(shape[0])


def _read_exact(handle: BinaryIO, dtype: np.dtype, count: int, shown: str) -> np.ndarray:
    data = handle.read(count * dtype.itemsize)
    if len(data) != count * dtype.itemsize:
        raise InputError(f"{shown}: the file ends before its arrays do")
    return np.frombuffer(data, dtype=dtype)


def _ids_lines(path: Path) -> Iterator[tuple[str, str]]:
    """``(id, text)`` of each line of an npz's ids file (``id`` or ``id<TAB>text``)."""
    for number, line in _lines(path, str(path)):
        text = line.rstrip(b"\r\n").decode("utf-8", errors="strict")
        item, _, contents = text.partition("\t")
        if not item or any(c.isspace() for c in item):
            raise InputError(f"{path}:{number}: the id must be a text without whitespace")
        yield item, contents


def _npz_chunks(path: Path, ids_file: Path, vocab: _Vocabulary) -> Iterator[_Chunk]:
    """A scipy CSR ``.npz``'s rows, :data:`CHUNK_ITEMS` at a time (its arrays streamed)."""
    shown = str(path)
    if not vocab.fixed:
        raise InputError(
            f"--vectors {shown}: a .npz's columns are vocabulary ids: name the --encoder whose "
            "vocabulary they index"
        )
    if not ids_file.is_file():
        raise InputError(f"--vector-ids {ids_file}: not found (one id per row of {shown})")
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise InputError(f"--vectors {shown}: not a .npz ({exc})") from None
    with archive:
        members = set(archive.namelist())
        if not {"indptr.npy", "indices.npy", "data.npy", "shape.npy"} <= members:
            raise InputError(f"--vectors {shown}: not a scipy sparse .npz (save_npz)")
        layout = (
            np.load(io.BytesIO(archive.read("format.npy"))).item()
            if "format.npy" in members
            else b"csr"
        )
        layout = layout.decode() if isinstance(layout, bytes) else str(layout)
        if layout != "csr":
            raise InputError(f"--vectors {shown}: a {layout} matrix: save it as CSR")
        shape = np.load(io.BytesIO(archive.read("shape.npy"))).tolist()
        if len(shape) != 2 or shape[1] != len(vocab.tokens):
            raise InputError(
                f"--vectors {shown}: {shape[1] if len(shape) == 2 else '?'} columns, but the "
                f"encoder's vocabulary has {len(vocab.tokens):,} terms"
            )
        handle, dtype, length = _npy_member(archive, "indptr.npy", shown)
        with handle:
            indptr = _read_exact(handle, dtype, length, shown).astype(np.int64)
        rows = length - 1
        if rows != shape[0] or indptr[0] != 0 or (np.diff(indptr) < 0).any():
            raise InputError(f"--vectors {shown}: its indptr is not a CSR's")
        col_handle, col_type, col_len = _npy_member(archive, "indices.npy", shown)
        val_handle, val_type, val_len = _npy_member(archive, "data.npy", shown)
        if col_len != indptr[-1] or val_len != indptr[-1]:
            raise InputError(f"--vectors {shown}: indices and data do not match its indptr")
        names = _ids_lines(ids_file)
        with col_handle, val_handle:
            for start in range(0, rows, CHUNK_ITEMS):
                stop = min(start + CHUNK_ITEMS, rows)
                pairs = [next(names, None) for _ in range(start, stop)]
                if pairs[-1] is None:
                    raise InputError(f"--vector-ids {ids_file}: fewer ids than {rows:,} rows")
                count = int(indptr[stop] - indptr[start])
                cols = _read_exact(col_handle, col_type, count, shown).astype(np.int64)
                vals = _read_exact(val_handle, val_type, count, shown).astype(np.float64)
                if cols.size and (cols.min() < 0 or cols.max() >= len(vocab.tokens)):
                    raise InputError(f"--vectors {shown}: column ids outside the vocabulary")
                yield _Chunk(
                    [p[0] for p in pairs],  # type: ignore[index]
                    [p[1] for p in pairs],  # type: ignore[index]
                    shown,
                    None,
                    start,
                    indptr[start : stop + 1] - indptr[start],
                    cols,
                    vals,
                )
        if next(names, None) is not None:
            raise InputError(f"--vector-ids {ids_file}: more ids than {rows:,} rows")


def _hf_batches(path: Path) -> Iterator[tuple[str, Any]]:
    """``(file, record batch)`` of a Parquet file, a folder of them, or a saved dataset."""
    import pyarrow as pa  # heavy: pyarrow loads on first use
    import pyarrow.parquet as pq  # heavy: pyarrow loads on first use

    files = (
        sorted(p for p in path.iterdir() if p.suffix in (".parquet", ".arrow"))
        if path.is_dir()
        else [path]
    )
    if not files:
        raise InputError(f"--vectors {path}: no .parquet or .arrow files")
    for file in files:
        try:
            if file.suffix == ".arrow":
                with pa.memory_map(str(file)) as source:
                    try:
                        reader = pa.ipc.open_stream(source)
                    except pa.ArrowInvalid:
                        reader = pa.ipc.open_file(source)
                        for i in range(reader.num_record_batches):
                            yield str(file), reader.get_batch(i)
                        continue
                    for batch in reader:
                        yield str(file), batch
            else:
                for batch in pq.ParquetFile(file).iter_batches(batch_size=CHUNK_ITEMS):
                    yield str(file), batch
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"{file}: cannot be read as Parquet/Arrow ({exc})") from None


def _hf_chunks(path: Path, vocab: _Vocabulary) -> Iterator[_Chunk]:
    """A dataset's rows with ``id``, ``indices`` (vocabulary ids) and ``values``."""
    if not vocab.fixed:
        raise InputError(
            f"--vectors {path}: its indices are vocabulary ids: name the --encoder whose "
            "vocabulary they index"
        )
    seen = 0
    for file, batch in _hf_batches(path):
        names = batch.schema.names
        missing = [c for c in ("id", "indices", "values") if c not in names]
        if missing:
            raise InputError(f"{file}: no {', '.join(missing)} column (needs id, indices, values)")
        text_column = next((c for c in ("contents", "text") if c in names), None)
        indices, values = batch.column("indices"), batch.column("values")
        if indices.null_count or values.null_count:
            raise InputError(f"{file}: a row with no indices or values")
        offsets = np.asarray(indices.offsets, np.int64)
        if not np.array_equal(offsets, np.asarray(values.offsets, np.int64)):
            raise InputError(f"{file}: a row whose indices and values differ in length")
        cols = np.asarray(indices.flatten(), np.int64)
        vals = np.asarray(values.flatten(), np.float64)
        if cols.size and (cols.min() < 0 or cols.max() >= len(vocab.tokens)):
            raise InputError(
                f"{file}: indices outside the encoder's vocabulary of {len(vocab.tokens):,}"
            )
        ids = [str(v) for v in batch.column("id").to_pylist()]
        texts = (
            [t or "" for t in batch.column(text_column).to_pylist()]
            if text_column
            else [""] * len(ids)
        )
        yield _Chunk(ids, texts, file, None, seen, offsets - offsets[0], cols, vals)
        seen += len(ids)


# -- the chunks stored --------------------------------------------------------------------


def _sorted_rows(chunk: _Chunk) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The chunk's rows with indices sorted (scipy's per-row sort), zeros left out, a
    repeated id refused."""
    n = len(chunk.ids)
    keep = chunk.vals != 0
    rows = np.repeat(np.arange(n), np.diff(chunk.indptr))[keep]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    cols = chunk.cols[keep].astype(np.int32)
    matrix = sp.csr_matrix(
        (chunk.vals[keep].astype(np.float32), cols, indptr),
        shape=(n, int(cols.max(initial=0)) + 1),
    )
    matrix.has_sorted_indices = False
    matrix.sort_indices()
    cols = matrix.indices
    repeated = cols[1:] == cols[:-1]
    starts = indptr[1:-1]
    repeated[starts[(starts > 0) & (starts < len(cols))] - 1] = False  # rows' boundaries
    if repeated.any():
        row = int(np.searchsorted(indptr, np.flatnonzero(repeated)[0] + 1, side="right")) - 1
        raise InputError(f"{chunk.where(row)}: a term given twice in one vector")
    return indptr, cols, matrix.data


class _Reservoir:
    """A seeded uniform sample of the items with a text (Algorithm R, chunk by chunk)."""

    def __init__(self, size: int, seed: int) -> None:
        self.size = size
        self.rng = np.random.default_rng(seed)
        self.seen = 0
        self.items: list[tuple[str, str, np.ndarray, np.ndarray]] = []

    def offer(self, chunk: _Chunk, indptr: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
        """Consider the chunk's items with a text."""
        candidates = [n for n, t in enumerate(chunk.texts) if t.strip()]
        if not candidates:
            return
        seen = self.seen + np.arange(len(candidates))
        draws = self.rng.integers(0, seen + 1)
        self.seen += len(candidates)
        for n, t, j in zip(candidates, seen.tolist(), draws.tolist(), strict=True):
            if t < self.size:
                slot = len(self.items)
            elif j < self.size:
                slot = j
            else:
                continue
            a, b = indptr[n], indptr[n + 1]
            kept = (chunk.ids[n], chunk.texts[n], cols[a:b].copy(), vals[a:b].copy())
            if slot == len(self.items):
                self.items.append(kept)
            else:
                self.items[slot] = kept


@dataclass(frozen=True)
class Parity:
    """The imported vectors against the encoder's on the sample (means over items)."""

    sample: int
    cosine: float
    top10_overlap: float
    zero_mass: float
    norm_ratio: float

    @property
    def passed(self) -> bool:
        """Within the tolerance."""
        return (
            self.cosine >= MIN_COSINE
            and self.top10_overlap >= MIN_TOP10_OVERLAP
            and self.zero_mass <= MAX_ZERO_MASS
            and NORM_RATIO[0] <= self.norm_ratio <= NORM_RATIO[1]
        )


def parity_of(
    encoder: Encoder, sample: list[tuple[str, str, np.ndarray, np.ndarray]], k: int = 10
) -> Parity:
    """Re-encode each sampled item's text and compare with its imported vector."""
    texts = [s[1] for s in sample]
    encodings = encoder.encode_texts(texts, side="document", keep_units=False)
    cosines, overlaps, ratios = [], [], []
    zero, total = 0.0, 0.0
    for (_, _, cols, vals), encoding in zip(sample, encodings, strict=True):
        own = np.asarray(encoding.weights, np.float64)
        weights = vals.astype(np.float64)
        a, b = math.sqrt(float(np.dot(weights, weights))), math.sqrt(float(np.dot(own, own)))
        shared = float(np.dot(weights, own[cols]))
        cosines.append(shared / (a * b) if a and b else float(a == b))
        ratios.append(a / b if b else (1.0 if a == 0 else math.inf))
        top = min(k, int(np.count_nonzero(own)))
        if top:  # each side's top terms by weight, ties by term id; imported: its positive ones
            positive = weights > 0
            ranked = np.lexsort((cols[positive], -weights[positive]))
            mine = set(cols[positive][ranked][:top].tolist())
            theirs = set(np.argsort(-own, kind="stable")[:top].tolist())
            overlaps.append(len(mine & theirs) / top)
        else:
            overlaps.append(1.0 if not cols.size else 0.0)
        mass = np.abs(vals.astype(np.float64))
        zero += float(mass[own[cols] == 0].sum())
        total += float(mass.sum())
    return Parity(
        sample=len(sample),
        cosine=float(np.mean(cosines)),
        top10_overlap=float(np.mean(overlaps)),
        zero_mass=zero / total if total else 0.0,
        norm_ratio=float(np.median(ratios)),
    )


def import_vectors(
    encoder: str | Encoder | None,
    vectors: str | Path,
    out: str | Path,
    *,
    options: VectorImportOptions | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    **given: Any,
) -> IndexResult:
    """``lexlens index --vectors``: store vectors encoded elsewhere as an index, their
    terms mapped to ``encoder``'s vocabulary and checked against it on a seeded sample
    (``encoder`` ``None``: stored as given, the analyses that re-encode refused)."""
    options = VectorImportOptions.of(options, **given)
    path = Path(path_argument(vectors, "vectors", "a file or folder path")).expanduser()
    out = Path(path_argument(out, "out", "a folder path")).expanduser()
    device = device_argument(device)
    progress = progress_argument(progress)
    if not path.exists():
        raise InputError(f"--vectors {path}: not found")
    if path.is_file() and path.stat().st_size == 0:
        raise InputError(f"--vectors {path}: the file is empty")
    kept = _kept_benchmark(options)
    fmt = options.vector_format or detect_format(path)
    detected = options.vector_format is None
    check_out(out)
    loaded = None
    if encoder is not None:
        spec = encoder_or_spec(encoder)
        loaded = encoder_argument(spec, device=device)
    vocab = _Vocabulary(None if loaded is None else list(loaded.vocab))
    unknown = _Unknown()
    impacts = _Impacts(options.scale)
    reservoir = _Reservoir(options.parity_sample, options.seed)
    if fmt == "anserini":
        chunks = _anserini_chunks(path, vocab, unknown, impacts)
    elif fmt == "npz":
        ids = options.vector_ids or str(path.with_suffix("")) + ".ids.txt"
        chunks = _npz_chunks(path, Path(ids).expanduser(), vocab)
    else:
        chunks = _hf_chunks(path, vocab)
    started = time.perf_counter()
    found: dict[str, Any] = {}

    def fill(writer: IndexWriter) -> tuple[int, int, SkippedItems]:
        for chunk in chunks:
            indptr, cols, vals = chunk.rows or _sorted_rows(chunk)
            writer.add_rows(chunk.ids, chunk.texts, (indptr, cols, vals), chunk.where)
            if loaded is not None:
                reservoir.offer(chunk, indptr, cols, vals)
            if progress:
                progress(0.0, f"{writer.count:,} items read")
        if writer.count == 0:
            raise InputError(f"--vectors {path}: no items")
        writer.vocab_size = len(vocab.tokens)  # grown while reading when no encoder names it
        found["parity"] = _checked_parity(loaded, reservoir, options, impacts)
        return writer.count, 0, SkippedItems()

    if loaded is not None:
        entry = encoder_entry(loaded, spec if isinstance(spec, str) else None)
    else:
        entry = {
            "name": "imported vectors",
            "spec": "",
            "fingerprint": "",
            "class": "",
            "capabilities": [],
            "bow_normalize": False,
        }
    header = IndexHeader(
        encoder=entry,
        gate_k=-1,
        modality="text",
        source={"path": str(path), "root": "", "kind": "vectors", "fingerprint": ""},
    )

    def imported() -> ImportEntry:
        return ImportEntry(
            format=fmt,
            scale=options.scale if impacts.integer else None,
            integer_impacts=bool(impacts.integer),
            unknown_postings=unknown.postings,
            unknown_items=unknown.items,
            unknown_terms=dict(unknown.names.most_common(UNKNOWN_NAMED)),
            parity=found.get("parity"),
        )

    extra = {}
    if kept is not None:
        header.source["benchmark"], extra = kept
    manifest = write_atomically(out, vocab.tokens, fill, header, extra=extra, imported=imported)
    seconds = time.perf_counter() - started
    notes = [
        f"format: {fmt}"
        + (" (told from the content; --vector-format names it)" if detected else "")
    ]
    if kept is not None:
        counts = kept[0]
        notes.append(
            f"kept {counts['queries']:,} queries and {counts['judgements']:,} judgements "
            f"({counts['problems']:,} problem lines)"
        )
    if impacts.integer:
        notes.append(f"integer impacts divided by --scale {options.scale:g}")
    if unknown.postings:
        named = ", ".join(f"{t} ({c:,})" for t, c in unknown.names.most_common(UNKNOWN_NAMED))
        notes.append(
            f"{unknown.postings:,} weights on {len(unknown.names):,}"
            f"{'+' if len(unknown.names) >= UNKNOWN_TALLIED else ''} terms not in the "
            f"encoder's vocabulary left out, in {unknown.items:,} items: {named}"
        )
    parity = found.get("parity")
    if loaded is None:
        notes.append(
            f"no encoder: the vocabulary is the {len(vocab.tokens):,} terms read; "
            f"{NEEDS_ENCODER} need an encoder of this vocabulary and refuse without one"
        )
    elif parity is None:
        notes.append("parity not checked: no item has a text to re-encode")
    else:
        notes.append(
            parity.line()
            + ("" if parity.passed else " (beyond the tolerance: accepted with --accept-mismatch)")
        )
    return IndexResult(
        out=str(out),
        encoder=entry["name"],
        items=manifest.counts.items,
        encoded=0,
        reused=0,
        skipped=[],
        up_to_date=False,
        seconds=seconds,
        manifest=manifest.to_dict(),
        notes=notes,
    )


def _kept_benchmark(options: VectorImportOptions) -> tuple[dict, dict[str, bytes]] | None:
    """The queries and judgements kept with the index (``--queries`` with ``--qrels``):
    the manifest's benchmark counts and the files, read before any vector is."""
    folder = Path(options.queries) if options.queries is not None else None
    beir = folder is not None and folder.is_dir()
    if (options.queries is None) != (options.qrels is None) and not beir:
        raise InputError(
            "--queries and --qrels go together: the queries and their judgements "
            "(or --queries a BEIR folder)"
        )
    if options.queries is None:
        return None

    from lexlens.analysis.collections.source_index import benchmark_files  # heavy: loads torch

    problems = Problems()
    queries_file, qrels_file = (
        _beir_files(folder, options.qrels) if beir else (options.queries, options.qrels)
    )
    queries = read_queries(queries_file, problems, label=str(queries_file))
    qrels = read_qrels(qrels_file, problems, label=str(qrels_file))
    counts = {
        "kind": "BEIR queries and judgements" if beir else "queries and judgements",
        "queries": len(queries),
        "judged_queries": len(qrels),
        "judgements": sum(len(v) for v in qrels.values()),
        "problems": problems.count,
    }
    if beir:
        counts["split"] = Path(qrels_file).stem
    return counts, benchmark_files(SimpleNamespace(queries=queries, qrels=qrels))


def _beir_files(folder: Path, qrels: str | None) -> tuple[Path, Path]:
    """A BEIR folder's ``queries.jsonl`` and its judgements: ``qrels`` when given, else
    ``qrels/test.tsv`` or the only split's."""
    queries = folder / "queries.jsonl"
    if not queries.is_file():
        raise InputError(f"--queries {folder}: a folder without queries.jsonl is no BEIR folder")
    if qrels is not None:
        return queries, Path(qrels)
    splits = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
    if not splits:
        raise InputError(f"--queries {folder}: no qrels/*.tsv (a BEIR folder has qrels/test.tsv)")
    if "test" not in splits and len(splits) > 1:
        raise InputError(
            f"--queries {folder}: several splits ({', '.join(splits)}): give --qrels "
            f"{folder / 'qrels'}/SPLIT.tsv"
        )
    return queries, folder / "qrels" / f"{'test' if 'test' in splits else splits[0]}.tsv"


def _checked_parity(
    encoder: Encoder | None,
    reservoir: _Reservoir,
    options: VectorImportOptions,
    impacts: _Impacts,
) -> ParityEntry | None:
    """The parity of the sample, refused beyond the tolerance unless accepted."""
    if encoder is None or not reservoir.items:
        return None
    found = parity_of(encoder, reservoir.items)
    entry = ParityEntry(
        encoder=encoder.name,
        sample=found.sample,
        seed=options.seed,
        cosine=found.cosine,
        top10_overlap=found.top10_overlap,
        zero_mass=found.zero_mass,
        norm_ratio=found.norm_ratio,
        min_cosine=MIN_COSINE,
        min_top10_overlap=MIN_TOP10_OVERLAP,
        max_zero_mass=MAX_ZERO_MASS,
        passed=found.passed,
        accepted_mismatch=not found.passed,
    )
    if not found.passed and not options.accept_mismatch:
        hint = ""
        scaled = not NORM_RATIO[0] <= found.norm_ratio <= NORM_RATIO[1]
        if scaled and found.cosine >= MIN_COSINE:
            hint = f" (the imported vectors are {found.norm_ratio:.3g}× the encoder's"
            hint += ": is --scale right?)" if impacts.integer else ")"
        raise InputError(
            f"{entry.line()}: beyond the tolerance (cosine ≥ {MIN_COSINE}, "
            f"overlap ≥ {MIN_TOP10_OVERLAP}, weight on its zeros ≤ {MAX_ZERO_MASS:.0%}, norm "
            f"ratio {NORM_RATIO[0]}–{NORM_RATIO[1]}){hint}: refused (--accept-mismatch "
            "stores them anyway)"
        )
    return entry
