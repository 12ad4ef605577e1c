"""The workspace: where the app keeps stored collections and their uploaded sources (the
folders are named in :mod:`.home`).

``LEXLENS_HOME`` (default ``~/.lexlens``) holds ``collections/<name>`` (an index folder)
and ``sources/<name>`` (the files uploaded for it, or the sample photos). Both survive page
switches, reruns and restarts.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from lexlens.analysis.collections.home import collections_dir as collections_dir
from lexlens.analysis.collections.home import sources_dir as sources_dir
from lexlens.analysis.collections.home import stored_names, workspace
from lexlens.analysis.collections.store import StoredIndex
from lexlens.analysis.core.arguments import text_argument
from lexlens.analysis.core.results import Result
from lexlens.analysis.core.samples import sample_path
from lexlens.models.base import InputError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_name(name: str) -> str:
    """A collection name: letters, digits, ``._-``, at most 64 characters."""
    name = text_argument(name, "collection name").strip()
    if not _NAME.match(name):
        raise InputError(
            f"collection name {name!r}: use 1–64 letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit)"
        )
    return name


def list_collections(home: Path | None = None) -> list[dict]:
    """Cards of the stored collections in the workspace (broken ones with their error)."""
    root = (home or workspace()) / "collections"
    out = []
    for entry in (root / name for name in stored_names(home)):
        try:
            out.append(StoredIndex(entry).card())
        except InputError as exc:
            out.append({"name": entry.name, "path": str(entry), "error": str(exc)})
    return out


#: What the list of stored collections says of each (``lexlens collections``).
LISTED = (
    "name",
    "items",
    "encoder",
    "modality",
    "queries",
    "judgements",
    "disk_bytes",
    "updated",
    "path",
)


@dataclass(frozen=True)
class StoredCollections(Result):
    """The stored collections of a workspace: for each its name, items, encoder, the
    queries and judgements it keeps (``None``: not built from a benchmark), its bytes on
    disk; a broken one with its ``error``."""

    file_stem: ClassVar[str] = "collections"

    home: str
    collections: list[dict]


def stored_collections(home: str | Path | None = None) -> StoredCollections:
    """``lexlens collections``: the collections stored in the workspace ``home`` (default
    ``LEXLENS_HOME``), by name."""
    if home is not None and not isinstance(home, (str, Path)):
        raise InputError(f"home must be a folder path (or None), not {type(home).__name__}")
    base = Path(home).expanduser() if home is not None else workspace()
    rows = []
    for card in list_collections(base):
        row = {key: card.get(key) for key in LISTED}
        if "error" in card:
            row["error"] = card["error"]
        rows.append(row)
    return StoredCollections(str(base / "collections"), rows)


def delete_collection(name: str, home: Path | None = None) -> None:
    """Delete a stored collection (and the uploaded source the app kept for it)."""
    name = check_name(name)
    base = home or workspace()
    target = base / "collections" / name
    if not target.is_dir():
        raise InputError(f"no stored collection named {name!r}")
    trash = target.parent / f".{name}.deleting-{uuid.uuid4().hex[:8]}"
    os.rename(target, trash)
    shutil.rmtree(trash, ignore_errors=True)
    uploaded = base / "sources" / name
    if uploaded.is_dir():
        shutil.rmtree(uploaded, ignore_errors=True)


def save_upload_source(name: str, files: list[tuple[str, bytes]], home: Path | None = None) -> Path:
    """Keep uploaded files as a collection's source folder; returns the path to index.

    One .csv/.jsonl/.txt among the files is the source (its image paths are relative to
    the folder, where the uploaded images are kept); otherwise the folder of images is.
    """
    name = check_name(name)
    if not files:
        raise InputError("upload at least one file")
    folder = (home or workspace()) / "sources" / name
    tables = [n for n, _ in files if Path(n).suffix.lower() in (".csv", ".jsonl", ".txt")]
    if len(tables) > 1:
        raise InputError(f"upload one table (.csv, .jsonl or .txt), not {len(tables)}")
    staging = folder.parent / f".{name}.upload-{uuid.uuid4().hex[:8]}"
    staging.mkdir(parents=True)
    try:
        for file_name, data in files:
            safe = Path(file_name).name
            if not safe or safe.startswith("."):
                raise InputError(f"{file_name!r}: not a usable file name")
            (staging / safe).write_bytes(data)
        if folder.exists():
            shutil.rmtree(folder)
        os.rename(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder / Path(tables[0]).name if tables else folder


def sample_photos_folder() -> Path:
    """The folder of scikit-image's photos: the images of the sample photos (``photos.csv``)
    and of the sample benchmark ``photos_karpathy``."""
    try:
        import skimage  # optional: scikit-image
    except ImportError:
        raise InputError(
            "the sample photos come from scikit-image: `pip install scikit-image`"
        ) from None
    return Path(skimage.__file__).parent / "data"


def load_sample_photos(dest: Path) -> Path:
    """Materialise the sample photo collection: ``data/photos.csv`` (captions and labels
    written for scikit-image's photos) beside copies of the photos; returns the CSV path."""
    photos = sample_photos_folder()
    dest.mkdir(parents=True, exist_ok=True)
    with open(sample_path("photos.csv"), encoding="utf-8", newline="") as handle:
        names = [row["image"] for row in csv.DictReader(handle)]
    for name in names:
        target = dest / name
        if not target.exists():
            shutil.copyfile(photos / name, target)
    shutil.copyfile(sample_path("photos.csv"), dest / "photos.csv")
    return dest / "photos.csv"
