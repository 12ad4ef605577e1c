"""The inputs of a search, checked before any model loads: the collection (or the index or
file it comes from), the device, and the query — a text A, or an image, and an optional
exclusion B. A wrong type or value is one :class:`InputError` naming the argument."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.store import StoredIndex, open_index
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.search.options import SearchOptions, check_sr_only
from lexlens.models.base import InputError


@dataclass(frozen=True)
class SearchQuery:
    """A checked query: a text A (with an optional exclusion B), or a loaded image."""

    text: str | None = None
    exclude: str | None = None
    image: Any = None  # a PIL image
    image_name: str = ""


def _kind(value: object) -> str:
    return type(value).__name__


def _optional_text(name: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InputError(f"{name} must be a string, not {_kind(value)}")
    return value


def checked_query(
    options: SearchOptions, query: object, query_image: object, image_name: object,
    exclude: object,
) -> SearchQuery:  # fmt: skip
    """One text query or one query image (loaded), and an exclusion for a text query only;
    SR's settings only with an exclusion SR ranks (:func:`check_sr_only`)."""
    query = _optional_text("query", query)
    name = _optional_text("image_name", image_name)
    exclude = (_optional_text("exclude", exclude) or "").strip() or None
    check_sr_only(options, exclude)
    if (query is None) == (query_image is None):
        raise InputError("give a text query or a query image (one of them)")
    if query is not None:
        if not query.strip():
            raise InputError("the query is empty: type some words")
        return SearchQuery(query, exclude)
    if exclude:
        raise InputError("exclusion (--exclude) needs a text query A")
    if options.query_mode == "bow":
        raise InputError("the bag-of-words query mode needs a text query (an image has no words)")
    return _image_query(query_image, name)


def _image_query(image: object, name: str | None) -> SearchQuery:
    """A query image: a PIL image as it is, else a path or bytes loaded (checked)."""
    from PIL import Image

    from lexlens.models.images import load_image

    if isinstance(image, Image.Image):
        return SearchQuery(image=image, image_name=name or "query image")
    if not isinstance(image, (str, Path, bytes, bytearray)):
        raise InputError(
            f"query_image must be an image file's path, its bytes or a PIL image, not "
            f"{_kind(image)}"
        )
    shown = name or (str(image) if isinstance(image, (str, Path)) else "query image")
    return SearchQuery(image=load_image(image, name=shown), image_name=shown)


def checked_collection(collection: object) -> Collection:
    """A collection search can read (a stored index, a collection held in memory)."""
    if isinstance(collection, (str, Path)):
        raise InputError(
            f"collection must be an opened collection, not a path: open the folder with "
            f"open_index({str(collection)!r}), or use search_index or search_file"
        )
    if not isinstance(collection, Collection):
        raise InputError(
            f"collection must be a stored index or a collection held in memory, not "
            f"{_kind(collection)}"
        )
    return collection


def checked_index(index: object) -> StoredIndex:
    """A stored index, or one opened from its folder."""
    if isinstance(index, StoredIndex):
        return index
    if not isinstance(index, (str, Path)):
        raise InputError(f"index must be a stored index or its folder, not {_kind(index)}")
    return open_index(index)


def checked_file(collection: object) -> str | Path:
    """The path of a small collection file."""
    if not isinstance(collection, (str, Path)):
        raise InputError(
            f"collection must be the path of a .txt, .csv or .jsonl file, not {_kind(collection)}"
        )
    return collection


def checked_device(device: object) -> None:
    """A device name the encoders accept (``None``: the default)."""
    if device is not None:
        from lexlens.models.base import pick_device

        pick_device(device)  # type: ignore[arg-type]
