"""The inputs of a search, checked before any model loads: the collection (or the file it
comes from) and the query — a text A, or an image, and an optional exclusion B. A wrong type
or value is one :class:`InputError` naming the argument; an index argument, the device and
the encoder are checked as every use case checks them
(:func:`lexlens.analysis.collections.arguments.index_argument`,
:mod:`lexlens.analysis.core.arguments`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.arguments import collection_argument
from lexlens.analysis.core.arguments import image_argument, path_argument, text_argument
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


def checked_query(
    options: SearchOptions,
    query: object,
    query_image: object,
    image_name: object,
    exclude: object,
) -> SearchQuery:
    """One text query or one query image (loaded), and an exclusion for a text query only;
    SR's settings only with an exclusion SR ranks (:func:`check_sr_only`)."""
    query = text_argument(query, "query", optional=True)
    name = text_argument(image_name, "image_name", optional=True)
    exclude = (text_argument(exclude, "exclude", optional=True) or "").strip() or None
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
    """A query image: a PIL image as it is, else a path, bytes or a binary file loaded."""
    from PIL import Image  # heavy: PIL loads on first use

    from lexlens.models.images import load_image  # heavy: loads PIL

    if isinstance(image_argument(image, "query_image"), Image.Image):
        return SearchQuery(image=image, image_name=name or "query image")
    label = name or (str(image) if isinstance(image, (str, Path)) else "query image")
    return SearchQuery(image=load_image(image, name=label), image_name=label)


def checked_collection(collection: object) -> Collection:
    """A collection search can read (a stored index, a collection held in memory): a path is
    refused, as :func:`~lexlens.analysis.search.search.search_index` and
    :func:`~lexlens.analysis.search.search.search_file` take one."""
    if isinstance(collection, (str, Path)):
        raise InputError(
            f"collection must be an opened collection, not a path: open the folder with "
            f"open_index({str(collection)!r}), or use search_index or search_file"
        )
    return collection_argument(collection, "collection", folders=False)


def checked_file(collection: object) -> str | Path:
    """The path of a small collection file."""
    return path_argument(collection, "collection", "the path of a .txt, .csv or .jsonl file")
