"""A Hugging Face dataset kept on disk, read in place: a folder ``save_to_disk`` wrote (a
``Dataset`` or a ``DatasetDict``) through ``datasets.load_from_disk``, whose Arrow files are
memory-mapped; Parquet files (one, or a folder of them) through pyarrow, row group by row
group; Arrow IPC files memory-mapped through pyarrow. The tables are never converted or
copied, and nothing is ever written into the dataset's folder; the one thing written is an
image a row embeds as bytes, once, into Lexlens's cache (see below).

A folder's Parquet/Arrow files are split as the Hub names them (``train-00000-of-00002
.parquet``, ``data/test.parquet``: ``datasets.data_files.get_data_patterns``); files with no
split in their names are one ``train`` split. A Parquet file whose columns are ``id`` and
``emb`` is dense features for a D2S head, not a dataset (:mod:`lexlens.analysis.collections
.features_index`).

``image_column`` names the images (an ``Image`` feature, or paths relative to the dataset's
folder) and ``text_columns`` the captions (several columns, or one holding a list); without
them the usual names are tried (``image``/``img``; ``caption``/``captions``/``text``/
``sentences``). Each row's image is read as that row holds it: embedded bytes are written
once, as a file, into ``LEXLENS_CACHE/hf-images/<fingerprint>/`` (the item's image is that
absolute path); a path must stay inside the dataset's folder. With images, the captions
become the items' captions and text queries whose relevant item is their image; a row whose
id an earlier row has is named and skipped with its captions. Without images, the text
column's texts are the items (no queries).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lexlens.analysis.core.inputs import folder_file, inside_folder, regular_file
from lexlens.analysis.datasets.dataset import Benchmark, file_stamp, pick_split
from lexlens.analysis.datasets.items import Skipped, SourceItem, id_problem
from lexlens.analysis.datasets.trec import Problems
from lexlens.models.base import InputError
from lexlens.models.packaged import usable_cache_dir

IMAGE_NAMES = ("image", "img", "picture", "photo")
TEXT_NAMES = ("caption", "captions", "text", "sentences", "sentence", "raw")
ID_NAMES = ("id", "image_id", "imgid", "cocoid", "filename")
#: Files a folder of tables holds (and a single file may be).
TABLE_SUFFIXES = (".parquet", ".arrow")
#: Files that make a folder a ``save_to_disk`` dataset.
SAVED_MARKERS = ("dataset_info.json", "dataset_dict.json", "state.json")
#: Rows turned into Python objects at a time (with images: fewer, each may be megabytes).
TEXT_BATCH_ROWS = 1024
IMAGE_BATCH_ROWS = 64


def _datasets():
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        import datasets  # optional extra: datasets
    except ImportError:
        raise InputError(
            "reading a Hugging Face dataset needs the 'datasets' package: "
            'pip install "lexlens[datasets]"'
        ) from None
    return datasets


def is_table_file(path: Path) -> bool:
    """A Parquet or Arrow file that holds a dataset (a Parquet file of D2S features — its
    columns ``id`` and ``emb`` — does not)."""
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES or not path.is_file():  # a FIFO is never opened here
        return False
    if suffix == ".arrow":
        return True
    import pyarrow.parquet as pq  # heavy: pyarrow loads on first use

    try:
        names = set(pq.read_schema(path).names)
    except Exception:  # noqa: BLE001  (a damaged file is named when it is read)
        return True
    return "emb" not in names


def is_table_folder(path: Path) -> bool:
    """A folder of Parquet/Arrow files (at its top or in ``data/``), or one ``save_to_disk``
    wrote."""
    if any((path / n).is_file() for n in SAVED_MARKERS):
        return True
    return any(
        p.suffix.lower() in TABLE_SUFFIXES and p.is_file()
        for folder in (path, path / "data")
        if folder.is_dir()
        for p in folder.iterdir()
    )


@dataclass
class _Rows:
    """One split's rows, read in place: its column names, how many rows, the files behind
    it, and ``read(columns)`` streaming ``(where, row)`` with only those columns."""

    names: list[str]
    count: int
    files: list[Path]
    read: Callable[[list[str], int], Iterator[tuple[str, dict]]]


def _saved(path: Path, split: str | None, label: str) -> tuple[_Rows, str, list[str]]:
    """A ``save_to_disk`` folder through ``datasets.load_from_disk`` (memory-mapped), once
    every file in it is inside it with links followed (``load_from_disk`` opens what its
    ``state.json`` lists)."""
    _files_inside(path)
    datasets = _datasets()
    try:
        loaded = datasets.load_from_disk(str(path), keep_in_memory=False)
    except Exception as exc:  # noqa: BLE001  (the library raises its own types)
        raise InputError(f"{label}: cannot read it as a Hugging Face dataset ({exc})") from None
    if isinstance(loaded, datasets.DatasetDict):
        splits = sorted(loaded)
        chosen = pick_split(splits, split, label)
        table = loaded[chosen]
    else:
        if split not in (None, "train"):
            raise InputError(f"{label}: one split only (no {split!r})")
        chosen, splits, table = split or "train", [split or "train"], loaded

    def read(columns: list[str], batch: int) -> Iterator[tuple[str, dict]]:
        n = 0
        for block in table.select_columns(columns).with_format("arrow").iter(batch_size=batch):
            for row in block.to_pylist():
                yield f"{label}[{chosen}][{n}]", row
                n += 1

    files = [Path(f["filename"]) for f in table.cache_files]
    markers = [path / n for n in SAVED_MARKERS if (path / n).is_file()]
    return _Rows(list(table.column_names), len(table), markers + files, read), chosen, splits


def _split_files(path: Path, label: str) -> dict[str, list[Path]]:
    """Split name → its Parquet (else Arrow) files, as the Hub's file names say."""
    if not path.is_dir():
        return {"train": [path]}
    _datasets()
    from datasets.data_files import DataFilesDict, get_data_patterns  # optional extra: datasets

    try:
        patterns = get_data_patterns(str(path))
        resolved = DataFilesDict.from_patterns(patterns, base_path=str(path))
    except Exception as exc:  # noqa: BLE001  (no data file at all, or an unreadable folder)
        raise InputError(f"{label}: no Parquet or Arrow file found ({exc})") from None
    out: dict[str, list[Path]] = {}
    for name, found in resolved.items():
        files = sorted(
            folder_file(path, f) for f in found if Path(f).suffix.lower() in TABLE_SUFFIXES
        )
        parquet = [f for f in files if f.suffix.lower() == ".parquet"]
        if parquet or files:
            out[str(name)] = parquet or files
    if not out:
        raise InputError(f"{label}: no Parquet or Arrow file found")
    return out


def _files_inside(folder: Path) -> None:
    """Every file and folder under ``folder`` stays inside it once links are followed
    (:func:`folder_file`); a saved dataset holds a handful."""
    for top, folders, files in os.walk(folder, followlinks=False):
        for name in [*folders, *files]:
            folder_file(folder, os.path.join(top, name))


def _arrow_batches(path: Path) -> Iterator[Any]:
    """The record batches of an Arrow IPC file (file or stream format), memory-mapped."""
    import pyarrow as pa  # heavy: pyarrow loads on first use

    with pa.memory_map(str(path)) as source:
        try:
            reader = pa.ipc.open_file(source)
        except pa.ArrowInvalid:
            source.seek(0)
            yield from pa.ipc.open_stream(source)
            return
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)


def _table_file(path: Path) -> tuple[list[str], int]:
    """A Parquet or Arrow file's column names and row count (Parquet: from its footer)."""
    import pyarrow as pa  # heavy: pyarrow loads on first use
    import pyarrow.parquet as pq  # heavy: pyarrow loads on first use

    try:
        if path.suffix.lower() == ".parquet":
            meta = pq.ParquetFile(path, memory_map=True)
            return list(meta.schema_arrow.names), meta.metadata.num_rows
        names: list[str] = []
        count = 0
        for batch in _arrow_batches(path):
            names = names or list(batch.schema.names)
            count += batch.num_rows
        if not names:
            with pa.memory_map(str(path)) as source:
                try:
                    names = list(pa.ipc.open_file(source).schema.names)
                except pa.ArrowInvalid:
                    source.seek(0)
                    names = list(pa.ipc.open_stream(source).schema.names)
        return names, count
    except (pa.ArrowException, OSError) as exc:
        kind = "Parquet" if path.suffix.lower() == ".parquet" else "Arrow"
        raise InputError(f"{path}: cannot read it as {kind} ({exc})") from None


def _files(path: Path, split: str | None, label: str) -> tuple[_Rows, str, list[str]]:
    """Parquet/Arrow files read in place with pyarrow (row groups or batches streamed)."""
    import pyarrow as pa  # heavy: pyarrow loads on first use
    import pyarrow.parquet as pq  # heavy: pyarrow loads on first use

    by_split = _split_files(path, label)
    splits = sorted(by_split)
    if len(splits) == 1 and split in (None, splits[0]):
        chosen = splits[0]
    else:
        chosen = pick_split(splits, split, label)
    files = by_split[chosen]
    names, count = _table_file(files[0])
    for other in files[1:]:
        other_names, other_count = _table_file(other)
        if other_names != names:
            raise InputError(
                f"{other}: its columns ({', '.join(other_names)}) differ from {files[0].name}'s "
                f"({', '.join(names)})"
            )
        count += other_count

    def read(columns: list[str], batch: int) -> Iterator[tuple[str, dict]]:
        for file in files:
            row = 0
            try:
                if file.suffix.lower() == ".parquet":
                    with pq.ParquetFile(file, memory_map=True) as parquet:
                        blocks = parquet.iter_batches(batch_size=batch, columns=columns)
                        for block in blocks:
                            for values in block.to_pylist():
                                yield f"{file}[{row}]", values
                                row += 1
                    continue
                for block in _arrow_batches(file):
                    for values in block.select(columns).to_pylist():
                        yield f"{file}[{row}]", values
                        row += 1
            except (pa.ArrowException, OSError) as exc:
                raise InputError(f"{file}: cannot read it from row {row} ({exc})") from None

    return _Rows(names, count, files, read), chosen, splits


def _open_rows(path: Path, split: str | None, label: str) -> tuple[_Rows, str, list[str]]:
    """(the chosen split's rows, its name, every split's name)."""
    if path.is_dir() and any((path / n).is_file() for n in SAVED_MARKERS):
        return _saved(path, split, label)
    if path.is_dir():
        return _files(path, split, label)
    if path.suffix.lower() in TABLE_SUFFIXES:
        regular_file(path, label)
        return _files(path, split, label)
    raise InputError(f"{label}: not a saved Hugging Face dataset, Parquet or Arrow file")


def _column(
    names: list[str], wanted: str | None, candidates: tuple[str, ...], what: str, label: str
) -> str | None:
    if wanted is not None:
        if wanted not in names:
            raise InputError(f"{label}: no {what} column {wanted!r} (columns: {', '.join(names)})")
        return wanted
    lowered = {n.lower(): n for n in names}
    return next((lowered[c] for c in candidates if c in lowered), None)


def _captions(row: dict, columns: list[str]) -> list[str]:
    out: list[str] = []
    for column in columns:
        value = row.get(column)
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, dict):
                v = v.get("raw") or v.get("text")
            if isinstance(v, str) and v.strip():
                out.append(v.strip())
    return out


def _row_id(row: dict, id_col: str | None, n: int) -> str:
    """A row's id: its id column's value as written (a string or a number), else its row
    number; a missing or non-scalar value gives ``""``, which the id check refuses."""
    if id_col is None:
        return str(n)
    value = row.get(id_col)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ""
    return str(value)


def open_hf(
    path: Path,
    *,
    split: str | None = None,
    image_column: str | None = None,
    text_columns: list[str] | None = None,
) -> Benchmark:
    """One split of a dataset on disk (see the module docstring)."""
    path = Path(path)
    label = str(path)
    rows, chosen, splits = _open_rows(path, split, label)
    names = rows.names
    image_col = _column(names, image_column, IMAGE_NAMES, "image", label)
    texts = text_columns or [c for c in [_column(names, None, TEXT_NAMES, "text", label)] if c]
    for column in texts:
        _column(names, column, (), "text", label)
    if not texts and image_col is None:
        raise InputError(
            f"{label}: name the image and caption columns (--image-column, --text-columns); "
            f"columns: {', '.join(names)}"
        )
    id_col = _column(names, None, ID_NAMES, "id", label)
    stamps = [file_stamp(f) for f in rows.files]
    fingerprint = hashlib.sha256("\0".join([chosen, *stamps]).encode()).hexdigest()[:16]
    folder = path if path.is_dir() else path.parent
    problems = Problems()
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    query_where: dict[str, str] = {}  # only for a query whose id a message will name
    repeated: dict[int, str] = {}  # row → why it is skipped (its id came earlier)
    first_columns = [c for c in dict.fromkeys([id_col, *texts]) if c]
    if image_col is not None and first_columns:
        first_at: dict[str, int] = {}
        for n, (where, row) in enumerate(rows.read(first_columns, TEXT_BATCH_ROWS)):
            item = _row_id(row, id_col, n)
            if item in first_at:
                repeated[n] = f"id {item!r} appears again (first at row {first_at[item]})"
                problems.add(where, 0, f"{repeated[n]}: skipped with its captions")
                continue
            first_at[item] = n
            for j, caption in enumerate(_captions(row, texts)):
                queries[f"{item}_{j}"] = caption
                qrels[f"{item}_{j}"] = {item: 1}
                if id_problem(item):
                    query_where[f"{item}_{j}"] = where
    images = _EmbeddedImages(fingerprint)

    def read(found: Problems) -> Iterator[SourceItem | Skipped]:
        columns = [c for c in dict.fromkeys([id_col, image_col, *texts]) if c]
        batch = TEXT_BATCH_ROWS if image_col is None else IMAGE_BATCH_ROWS
        for n, (where, row) in enumerate(rows.read(columns, batch)):
            if n in repeated:
                yield Skipped(where, f"{repeated[n]}: skipped")
                continue
            item = _row_id(row, id_col, n)
            captions = tuple(_captions(row, texts))
            if image_col is None:
                if not captions:
                    yield Skipped(where, "no text")
                    continue
                yield SourceItem(item, text=captions[0], captions=captions[1:], where=where)
                continue
            image, why = _image_file(row.get(image_col), folder, images, n)
            if why:
                yield Skipped(where, why)
                continue
            yield SourceItem(item, image=image, captions=captions, where=where)

    return Benchmark(
        kind="hf",
        label=label,
        root=folder,
        split=chosen,
        splits=splits,
        queries=queries,
        qrels=qrels,
        read_items=read,
        fingerprint_parts=lambda: [fingerprint, image_col or "", id_col or "", *texts],
        has_images=image_col is not None,
        problems=problems,
        size_hint=rows.count,
        query_where=lambda qid: query_where.get(qid, label),
    )


class _EmbeddedImages:
    """Where a dataset's embedded images are written: ``LEXLENS_CACHE/hf-images/<fingerprint>``
    (made on the first one; ``None`` when the cache cannot be written)."""

    def __init__(self, fingerprint: str) -> None:
        self.fingerprint = fingerprint
        self._folder: Path | None = None
        self._tried = False

    def folder(self) -> Path | None:
        if not self._tried:
            self._tried = True
            self._folder = usable_cache_dir("hf-images", self.fingerprint)
        return self._folder


def _embedded(value: Any) -> bytes | None:
    """The bytes of an image stored in the row (an ``Image`` feature's ``bytes``, or raw
    bytes), ``None`` when the row names a file instead."""
    if isinstance(value, dict):
        data = value.get("bytes")
        return bytes(data) if isinstance(data, (bytes, bytearray)) and data else None
    if isinstance(value, (bytes, bytearray)) and value:
        return bytes(value)
    return None


def _image_file(value: Any, folder: Path, images: _EmbeddedImages, n: int) -> tuple[str, str]:
    """(the row's image path, ``""``) or (``""``, why not). Embedded bytes are written once
    into the cache (``n.img``, an absolute path); a path must stay inside the dataset's
    folder (relative to it). Nothing is written into the dataset's folder."""
    data = _embedded(value)
    if data is not None:
        where = images.folder()
        if where is None:
            return "", "an embedded image, and the cache (LEXLENS_CACHE) cannot be written"
        target = where / f"{n}.img"
        part = where / f".{n}.img.{os.getpid()}.part"
        try:
            if not (target.is_file() and target.stat().st_size == len(data)):
                part.write_bytes(data)
                part.replace(target)
        except OSError as exc:
            part.unlink(missing_ok=True)  # a full disk leaves no partial file behind
            return "", f"cannot write its embedded image to the cache ({exc.strerror or exc})"
        return str(target), ""
    name = value.get("path") if isinstance(value, dict) else value
    if isinstance(name, str) and name.strip():
        inside = inside_folder(folder, name)
        if inside is None:
            return "", f"image path {name!r} leaves the dataset's folder: refused"
        return inside, ""
    return "", "no image"
