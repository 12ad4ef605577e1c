"""A Hugging Face dataset kept on disk: a folder ``save_to_disk`` wrote (a ``Dataset`` or a
``DatasetDict``), or Parquet / Arrow files, read with the ``datasets`` library from the local
path only (offline; its cache for Parquet goes to Lexlens's cache, never the user's).

``image_column`` names the images (an ``Image`` feature, or paths relative to the dataset's
folder) and ``text_columns`` the captions (several columns, or one holding a list); without
them the usual names are tried (``image``/``img``; ``caption``/``captions``/``text``/
``sentences``). With images, the captions become the items' captions and text queries whose
relevant item is their image; images stored as bytes are written once, as files, into
``LEXLENS_CACHE/hf-images/<fingerprint>/`` (the items' root). Without images, the text
column's texts are the items (no queries).
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lexlens.analysis.benchmark.dataset import Benchmark, file_stamp, pick_split
from lexlens.analysis.benchmark.trec import Problems
from lexlens.analysis.collections.items import Skipped, SourceItem
from lexlens.analysis.core.inputs import inside_folder
from lexlens.models.base import InputError

IMAGE_NAMES = ("image", "img", "picture", "photo")
TEXT_NAMES = ("caption", "captions", "text", "sentences", "sentence", "raw")
ID_NAMES = ("id", "image_id", "imgid", "cocoid", "filename")


def _datasets():
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        import datasets
    except ImportError:
        raise InputError(
            "reading a Hugging Face dataset needs the 'datasets' package: "
            'pip install "lexlens[datasets]"'
        ) from None
    return datasets


def _load(path: Path, split: str | None):
    """(the chosen split's Dataset, its name, every split's name)."""
    datasets = _datasets()
    from lexlens.models.packaged import cache_dir

    try:
        if path.is_dir() and not any(path.glob("*.parquet")) and not any(path.glob("*.arrow")):
            loaded = datasets.load_from_disk(str(path))
        elif path.is_dir() or path.suffix.lower() in (".parquet", ".arrow"):
            files = (
                [path]
                if not path.is_dir()
                else sorted(path.glob("*.parquet")) or sorted(path.glob("*.arrow"))
            )
            builder = "parquet" if files[0].suffix.lower() == ".parquet" else "arrow"
            loaded = datasets.load_dataset(
                builder, data_files=[str(f) for f in files], split="train",
                cache_dir=str(cache_dir() / "hf-datasets"),
            )  # fmt: skip
        else:
            raise InputError(f"{path}: not a saved Hugging Face dataset, Parquet or Arrow file")
    except InputError:
        raise
    except Exception as exc:  # the library raises its own types for a damaged folder
        raise InputError(f"{path}: cannot read it as a Hugging Face dataset ({exc})") from None
    if isinstance(loaded, datasets.DatasetDict):
        splits = sorted(loaded)
        chosen = pick_split(splits, split, str(path))
        return loaded[chosen], chosen, splits
    if split not in (None, "train"):
        raise InputError(f"{path}: one split only (no {split!r})")
    return loaded, split or "train", [split or "train"]


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


def open_hf(
    path: Path, *, split: str | None = None, image_column: str | None = None,
    text_columns: list[str] | None = None,
) -> Benchmark:  # fmt: skip
    """One split of a dataset on disk (see the module docstring)."""
    from lexlens.models.packaged import cache_dir

    label = str(path)
    table, chosen, splits = _load(path, split)
    names = list(table.column_names)
    image_col = _column(names, image_column, IMAGE_NAMES, "image", label)
    texts = text_columns or [c for c in [_column(names, None, TEXT_NAMES, "text", label)] if c]
    for column in texts:
        _column(names, column, (), "text", label)
    if not texts and image_col is None:
        raise InputError(
            f"{label}: name the image and caption columns (--image-column, --text-column); "
            f"columns: {', '.join(names)}"
        )
    id_col = _column(names, None, ID_NAMES, "id", label)
    stamps = [file_stamp(p) for p in sorted(Path(path).rglob("*")) if p.is_file()][:1000]
    fingerprint = hashlib.sha256("\0".join([chosen, *stamps]).encode()).hexdigest()[:16]
    folder = Path(path) if Path(path).is_dir() else Path(path).parent
    root = folder
    if image_col is not None and len(table) and _embedded(table[0][image_col]):
        root = cache_dir() / "hf-images" / fingerprint
    problems = Problems()
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    rows = table.select_columns([c for c in {id_col, *texts} if c]) if texts or id_col else None
    if image_col is not None and rows is not None:
        for n, row in enumerate(rows):
            item = str(row.get(id_col)) if id_col else str(n)
            for j, caption in enumerate(_captions(row, texts)):
                queries[f"{item}_{j}"] = caption
                qrels[f"{item}_{j}"] = {item: 1}

    def read(found: Problems) -> Iterator[SourceItem | Skipped]:
        for n, row in enumerate(table):
            where = f"{label}[{chosen}][{n}]"
            item = str(row.get(id_col)) if id_col else str(n)
            captions = tuple(_captions(row, texts))
            if image_col is None:
                if not captions:
                    yield Skipped(where, "no text")
                    continue
                yield SourceItem(item, text=captions[0], captions=captions[1:], where=where)
                continue
            relative = _image_file(row.get(image_col), root, n)
            if isinstance(relative, Skipped):
                yield Skipped(where, relative.reason)
                continue
            yield SourceItem(item, image=relative, captions=captions, where=where)

    return Benchmark(
        kind="hf", label=label, root=root, split=chosen, splits=splits, queries=queries,
        qrels=qrels, read_items=read, fingerprint_parts=lambda: [fingerprint, *(texts or [])],
        has_images=image_col is not None, problems=problems, size_hint=len(table),
    )  # fmt: skip


def _embedded(value: Any) -> bool:
    """An image stored in the dataset (bytes, or a decoded picture), not a path."""
    if isinstance(value, dict):
        return bool(value.get("bytes"))
    return isinstance(value, (bytes, bytearray)) or hasattr(value, "save")


def _image_file(value: Any, root: Path, n: int) -> str | Skipped:
    """The item's image as a path relative to ``root``: an embedded image is written there
    once (``n.img``); a path must stay inside the dataset's folder (the root)."""
    if _embedded(value):
        if isinstance(value, dict):
            data = value["bytes"]
        elif isinstance(value, (bytes, bytearray)):
            data = bytes(value)
        else:
            buffer = io.BytesIO()
            value.save(buffer, format="PNG")
            data = buffer.getvalue()
        target = root / f"{n}.img"
        if not target.is_file():
            root.mkdir(parents=True, exist_ok=True)
            part = target.with_suffix(".part")
            part.write_bytes(data)
            part.replace(target)
        return target.name
    name = value.get("path") if isinstance(value, dict) else value
    if isinstance(name, str) and name.strip():
        inside = inside_folder(root, name)
        if inside is None:
            return Skipped("", f"image path {name!r} leaves the dataset's folder: refused")
        return inside
    return Skipped("", "no image")
