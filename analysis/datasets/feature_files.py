"""Dense feature files: the vectors a D2S head reads, their ids and paired captions (a
researcher's files, read like every other input: :mod:`lexlens.analysis.core.inputs`).

A researcher's dense features come as

- ``.npy``: one ``[N, d]`` array (a 1-D array is one vector);
- ``.safetensors``: one 2-D tensor (any name; float16/bfloat16 are read as float32);
- ``.parquet``: the published lsr42/*-dense layout, columns ``id`` and ``emb`` (a list of
  floats per row, all of one length).

Ids: the parquet ``id`` column; for the other formats an ``ids`` file (one id per line)
given explicitly or found beside the features as ``<stem>.ids.txt``; else the row numbers
``0 … N-1``. Captions (optional): a ``.csv`` with an ``id`` column and caption columns
(``caption``, ``caption_2``, ``captions``, ``text``; several rows per id add up) or a
``.jsonl`` of ``{"id": …, "caption": "…" | ["…", …]}`` (``captions`` / ``text`` too).

Every error is one line naming the user's file (its name as given, or the upload's name).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from lexlens.analysis.core.inputs import (
    decode_text,
    read_bytes,
    read_error,
    read_rows,
    source_label,
)
from lexlens.models.base import InputError
from lexlens.models.checkpoint import first_line

FEATURE_SUFFIXES = (".npy", ".safetensors", ".parquet")
CAPTION_SUFFIXES = (".csv", ".jsonl")
#: Columns of a captions file that hold captions (``caption_2``, ``caption3`` … too).
CAPTION_COLUMNS = ("caption", "captions", "text")
#: Rows checked for NaN/Inf at a time (a memory-mapped file is never read whole at once).
CHECK_ROWS = 65_536

Source = str | Path | bytes | bytearray


@dataclass(frozen=True)
class FeatureTable:
    """Dense feature vectors with their ids (and paired captions when given).

    Attributes:
        name: the features file's name as the user gave it (results and messages use it).
        vectors: ``[N, d]`` float32 (memory-mapped for a float32 ``.npy`` file).
        ids: one string id per row, unique.
        captions: per row, its paired captions (``[]`` for none); ``None`` when no
            captions file was given.
        id_source: where the ids came from ("parquet column", the ids file's name, or
            "row numbers").
        notes: plain-language notices (captions whose id matches no vector, …).
    """

    name: str
    vectors: np.ndarray
    ids: list[str]
    captions: list[list[str]] | None = None
    id_source: str = "row numbers"
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        """The vectors' dimension ``d``."""
        return int(self.vectors.shape[1])

    def position(self, item: str | int) -> int:
        """The row of an item id (ids are compared as strings)."""
        key = str(item).strip()
        try:
            return self._positions[key]
        except KeyError:
            shown = ", ".join(self.ids[:5]) + (" …" if len(self.ids) > 5 else "")
            raise InputError(
                f"item {key!r} is not in {self.name} ({len(self)} vectors, ids from "
                f"{self.id_source}: {shown})"
            ) from None

    @property
    def _positions(self) -> dict[str, int]:
        cached = self.__dict__.get("_positions_cache")
        if cached is None:
            cached = {item: i for i, item in enumerate(self.ids)}
            object.__setattr__(self, "_positions_cache", cached)
        return cached


def _suffix(label: str, suffix: str | None) -> str:
    return (suffix or Path(label).suffix).lower()


def _bytes_or_path(source: Source, label: str) -> bytes | Path:
    if isinstance(source, (bytes, bytearray)):
        return bytes(source)
    path = Path(source).expanduser()
    if not path.exists():
        raise InputError(f"features file {label} not found")
    if path.is_dir():
        raise InputError(f"{label} is a folder: give a .npy, .safetensors or .parquet file")
    return path


def read_features(
    source: Source,
    *,
    name: str | None = None,
    suffix: str | None = None,
    ids: Source | None = None,
    ids_name: str | None = None,
    captions: Source | None = None,
    captions_name: str | None = None,
) -> FeatureTable:
    """Read dense feature vectors, their ids and (optionally) captions; checked strictly.

    ``source``: a path, or a file's bytes with its ``name`` (an upload). Refused, in one
    line naming the file: an unknown suffix, an unreadable or truncated file, anything but
    one 2-D numeric array, no vectors, NaN/Inf, ids that do not match the rows in number or
    repeat.
    """
    label = source_label(source, name)
    kind = _suffix(label, suffix)
    if kind not in FEATURE_SUFFIXES:
        raise InputError(
            f"{label}: features must be a {', '.join(FEATURE_SUFFIXES)} file, not {kind or 'that'}"
        )
    data = _bytes_or_path(source, label)
    try:
        if kind == ".npy":
            vectors, row_ids = _read_npy(data, label), None
        elif kind == ".safetensors":
            vectors, row_ids = _read_safetensors(data, label), None
        else:
            vectors, row_ids = _read_parquet(data, label)
    except PermissionError as exc:
        raise read_error(label, exc) from None
    vectors = _check_vectors(vectors, label)
    id_source = "row numbers"
    if row_ids is not None:
        id_source = "parquet column"
    if ids is not None:
        ids_label = source_label(ids, ids_name)
        row_ids, id_source = _read_ids(ids, ids_label), Path(ids_label).name
    elif row_ids is None and isinstance(data, Path):
        sidecar = data.with_name(f"{data.stem}.ids.txt")
        if sidecar.is_file():
            row_ids, id_source = _read_ids(sidecar, str(sidecar)), sidecar.name
    if row_ids is None:
        row_ids = [str(i) for i in range(len(vectors))]
    elif len(row_ids) != len(vectors):
        raise InputError(
            f"{id_source} has {len(row_ids)} ids for the {len(vectors)} vectors of {label}"
        )
    _check_unique(row_ids, id_source)
    table = FeatureTable(label, vectors, row_ids, None, id_source)
    if captions is None:
        return table
    return with_captions(table, captions, name=captions_name)


def _read_npy(data: bytes | Path, label: str) -> np.ndarray:
    try:
        if isinstance(data, Path):
            return np.load(data, mmap_mode="r", allow_pickle=False)
        return np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "pickle" in str(exc).lower():
            raise InputError(f"{label} holds Python objects, not an array of numbers") from None
        raise InputError(f"{label} is not a readable .npy file ({first_line(exc)})") from None
    except (OSError, EOFError) as exc:
        if isinstance(exc, PermissionError):
            raise
        raise InputError(f"{label} is not a readable .npy file ({first_line(exc)})") from None


def _read_safetensors(data: bytes | Path, label: str) -> np.ndarray:
    from safetensors import safe_open  # heavy: safetensors loads on first use

    try:
        if isinstance(data, Path):
            with safe_open(str(data), framework="pt") as fh:
                shapes = {k: tuple(fh.get_slice(k).get_shape()) for k in fh.keys()}  # noqa: SIM118
                key = _one_matrix(shapes, label)
                tensor = fh.get_tensor(key)
        else:
            from safetensors.torch import load  # heavy: safetensors loads on first use

            tensors = load(data)
            key = _one_matrix({k: tuple(v.shape) for k, v in tensors.items()}, label)
            tensor = tensors[key]
    except InputError:
        raise
    except PermissionError:
        raise
    except Exception as exc:  # truncated header, bad JSON, short data …
        raise InputError(
            f"{label} is not a readable safetensors file ({first_line(exc)})"
        ) from None

    if tensor.dtype == torch.bool or tensor.is_complex():
        raise InputError(f"{label}: tensor {key!r} holds {tensor.dtype}, not feature values")
    return tensor.float().numpy()


def _one_matrix(shapes: dict[str, tuple[int, ...]], label: str) -> str:
    matrices = [k for k, s in shapes.items() if len(s) == 2]
    if len(shapes) == 1 and len(next(iter(shapes.values()))) in (1, 2):
        return next(iter(shapes))
    if len(matrices) == 1:
        return matrices[0]
    listed = ", ".join(f"{k} {list(s)}" for k, s in list(shapes.items())[:4])
    raise InputError(
        f"{label} holds {len(shapes)} tensors ({listed}): expected one 2-D tensor of "
        "feature vectors"
    )


def _read_parquet(data: bytes | Path, label: str) -> tuple[np.ndarray, list[str]]:
    import pyarrow as pa  # heavy: pyarrow loads on first use
    import pyarrow.compute as pc  # heavy: pyarrow loads on first use
    import pyarrow.parquet as pq  # heavy: pyarrow loads on first use

    try:
        handle = pq.ParquetFile(data if isinstance(data, Path) else pa.BufferReader(data))
        columns = handle.schema_arrow.names
        missing = [c for c in ("id", "emb") if c not in columns]
        if missing:
            raise InputError(
                f"{label} has no {' or '.join(repr(c) for c in missing)} column (columns: "
                f"{', '.join(columns)}): expected the published layout, 'id' and 'emb'"
            )
        table = handle.read(columns=["id", "emb"])
    except InputError:
        raise
    except PermissionError:
        raise
    except Exception as exc:  # ArrowInvalid on a truncated or foreign file
        raise InputError(f"{label} is not a readable Parquet file ({first_line(exc)})") from None
    emb = table.column("emb").combine_chunks()
    if not (pa.types.is_list(emb.type) or pa.types.is_large_list(emb.type)) and not (
        pa.types.is_fixed_size_list(emb.type)
    ):
        raise InputError(f"{label}: column 'emb' holds {emb.type}, not lists of numbers")
    if emb.null_count:
        raise InputError(f"{label}: column 'emb' has {emb.null_count} empty (null) rows")
    lengths = pc.list_value_length(emb).to_numpy(zero_copy_only=False)
    if len(lengths) and lengths.min() != lengths.max():
        row = int(np.flatnonzero(lengths != lengths[0])[0])
        raise InputError(
            f"{label}: row {row} of 'emb' has {int(lengths[row])} numbers, row 0 has "
            f"{int(lengths[0])}: every vector must have the same dimension"
        )
    values = emb.flatten()
    if not (pa.types.is_floating(values.type) or pa.types.is_integer(values.type)):
        raise InputError(f"{label}: column 'emb' holds lists of {values.type}, not numbers")
    if values.null_count:
        raise InputError(f"{label}: column 'emb' has missing (null) numbers")
    dim = int(lengths[0]) if len(lengths) else 0
    flat = values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    vectors = flat.reshape(len(lengths), dim) if dim else np.zeros((len(lengths), 0), np.float32)
    ids = table.column("id").to_pylist()
    if any(i is None for i in ids):
        raise InputError(f"{label}: column 'id' has empty (null) ids")
    return vectors, [str(i) for i in ids]


def _check_vectors(vectors: np.ndarray, label: str) -> np.ndarray:
    if vectors.dtype.kind not in "fiu":
        raise InputError(f"{label} holds {vectors.dtype} values, not numbers")
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    if vectors.ndim != 2:
        raise InputError(
            f"{label} holds an array of shape {tuple(vectors.shape)}: expected [N, d] feature "
            "vectors (one row per item)"
        )
    if vectors.shape[0] == 0 or vectors.shape[1] == 0:
        raise InputError(f"{label} holds no vectors (shape {tuple(vectors.shape)})")
    if vectors.dtype != np.float32:
        vectors = vectors.astype(np.float32)
    for lo in range(0, vectors.shape[0], CHECK_ROWS):
        chunk = np.asarray(vectors[lo : lo + CHECK_ROWS])
        finite = np.isfinite(chunk).all(axis=1)
        if not finite.all():
            row = lo + int(np.flatnonzero(~finite)[0])
            raise InputError(f"{label}: vector {row} holds NaN or Inf values")
    return vectors


def _read_ids(source: Source, label: str) -> list[str]:
    raw, label = read_bytes(source, label)
    ids = [line.strip() for line in decode_text(raw, label).splitlines()]
    while ids and not ids[-1]:
        ids.pop()
    if not ids:
        raise InputError(f"{label} holds no ids")
    if "" in ids:
        raise InputError(f"{label}: line {ids.index('') + 1} is empty (one id per line)")
    return ids


def _check_unique(ids: list[str], where: str) -> None:
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        for item in ids:
            if item in seen:
                raise InputError(f"id {item!r} appears twice in {where}: ids must be unique")
            seen.add(item)


# ------------------------------------------------------------------------------ captions


def read_caption_map(source: Source, *, name: str | None = None) -> dict[str, list[str]]:
    """``id → captions`` from a ``.csv`` or ``.jsonl`` file (see the module docstring)."""
    label = source_label(source, name)
    kind = _suffix(label, None)
    if kind not in CAPTION_SUFFIXES:
        raise InputError(
            f"{label}: captions must be a {' or '.join(CAPTION_SUFFIXES)} file with an 'id' "
            "and a caption column"
        )
    rows = read_rows(source, label, kind)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    if "id" not in columns:
        raise InputError(f"{label} has no 'id' column (columns: {', '.join(columns) or 'none'})")
    caption_columns = [c for c in columns if c != "id" and _is_caption_column(c)]
    if not caption_columns:
        raise InputError(
            f"{label} has no caption column ('caption', 'caption_2', 'captions' or 'text'; "
            f"columns: {', '.join(columns)})"
        )
    out: dict[str, list[str]] = {}
    for n, row in enumerate(rows, start=1):
        if "id" not in row:
            raise InputError(f"{label}: row {n} has no 'id'")
        item = "" if row["id"] is None else str(row["id"]).strip()
        if not item:
            continue
        for column in caption_columns:
            value = row.get(column)
            values = value if isinstance(value, list) else [value]
            out.setdefault(item, []).extend(v.strip() for v in values if isinstance(v, str))
    if not any(c for caps in out.values() for c in caps):
        raise InputError(f"{label} holds no captions")
    return {item: [c for c in caps if c] for item, caps in out.items()}


def _is_caption_column(column: str) -> bool:
    base = column.strip().lower().rstrip("0123456789").rstrip("_")
    return base in CAPTION_COLUMNS


def with_captions(table: FeatureTable, source: Source, *, name: str | None = None) -> FeatureTable:
    """The table with each row's paired captions (``[]`` where the file has none)."""
    label = source_label(source, name)
    mapping = read_caption_map(source, name=name)
    captions = [list(mapping.get(item, [])) for item in table.ids]
    notes = list(table.notes)
    matched = sum(bool(c) for c in captions)
    if matched == 0:
        shown = ", ".join(list(mapping)[:3])
        raise InputError(
            f"no id of {Path(label).name} ({shown} …) matches an id of {table.name} "
            f"(ids from {table.id_source}: {', '.join(table.ids[:3])} …)"
        )
    unknown = sum(1 for item in mapping if item not in table._positions)
    if unknown:
        notes.append(f"{unknown} caption id(s) of {Path(label).name} match no vector: left out")
    if matched < len(table):
        notes.append(f"{len(table) - matched} of {len(table)} vectors have no caption")
    return FeatureTable(
        table.name, table.vectors, table.ids, captions, table.id_source, tuple(notes)
    )
