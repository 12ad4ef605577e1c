"""How a benchmark is read, declared once (:mod:`lexlens.analysis.core.options`): the
split, where a Karpathy split's images are, which columns of a Hugging Face dataset hold the
image and the texts (:data:`SPLIT`, :data:`IMAGES`, :data:`IMAGE_COLUMN`,
:data:`TEXT_COLUMNS`: what ``lexlens index --source`` passes on to the reader), and
:class:`BenchmarkOptions`, which ``open_benchmark`` checks its keywords through."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lexlens.analysis.core.arguments import is_path
from lexlens.analysis.core.options import Declared, Options, option, shared, shared_option


def path_option(value: Any, declared: Declared) -> str:
    """The check of a path option (a benchmark's or a build's): a path
    (:func:`~lexlens.analysis.core.arguments.is_path`), kept as text; anything else is
    refused with the option's declared message."""
    if not is_path(value):
        raise declared.refuse(value)
    return str(value)


def _name(value: str, declared: Declared) -> str:
    """A name (a split, a column): non-blank text, stripped."""
    if not value.strip():
        raise declared.refuse(value)
    return value.strip()


def split_columns(text: str) -> tuple[str, ...]:
    """``"caption, alt"`` → ``("caption", "alt")`` (how a command line or a page names
    several columns in one text)."""
    return tuple(c.strip() for c in text.split(",") if c.strip())


def _columns(value: tuple) -> tuple[str, ...]:
    """Column names: at least one, each non-blank text (stripped)."""
    names = tuple(c.strip() for c in value if isinstance(c, str))
    if not names or len(names) != len(value) or not all(names):
        raise TEXT_COLUMNS.refuse(value)
    return names


SPLIT = shared_option(
    "split",
    str,
    None,
    optional=True,
    check=lambda v: _name(v, SPLIT),
    label="Split",
    help="benchmark: the split to read (default: test, or dev for MS MARCO)",
    wanted="a split name",
)
IMAGES = shared_option(
    "images",
    object,
    None,
    optional=True,
    check=lambda v: path_option(v, IMAGES),
    parse=str,
    metavar="FOLDER",
    label="Image folder (Karpathy)",
    wanted="a folder's path",
    help="benchmark (Karpathy JSON): the folder its image paths start from",
)
IMAGE_COLUMN = shared_option(
    "image_column",
    str,
    None,
    optional=True,
    check=lambda v: _name(v, IMAGE_COLUMN),
    metavar="COLUMN",
    label="Image column (Hugging Face)",
    wanted="a column name",
    help="benchmark (Hugging Face dataset, Parquet/Arrow files): the image column",
)
TEXT_COLUMNS = shared_option(
    "text_columns",
    tuple,
    None,
    optional=True,
    check=_columns,
    parse=split_columns,
    metavar="COLUMN[,COLUMN…]",
    label="Caption columns (comma-separated)",
    wanted="one or more column names",
    help="benchmark (Hugging Face dataset, Parquet/Arrow files): the caption (or text) "
    "columns, comma-separated",
)

#: The benchmark formats a reader opens (:mod:`lexlens.analysis.datasets.readers`).
KINDS = ("beir", "msmarco", "karpathy", "hf", "ir_datasets")


@dataclass(frozen=True)
class BenchmarkOptions(Options):
    """How a benchmark is read (``open_benchmark``; ``lexlens index --source`` passes its
    split, images, image column and text columns on): which split, where a Karpathy split's
    images are, which columns of a Hugging Face dataset hold the image and the texts, and
    the format when the path does not tell it."""

    what = "open_benchmark"

    split: str | None = shared(SPLIT)
    images: str | Path | None = shared(IMAGES)
    image_column: str | None = shared(IMAGE_COLUMN)
    text_columns: tuple[str, ...] | None = shared(TEXT_COLUMNS)
    kind: str | None = option(
        None,
        "the benchmark's format (default: told from the path; irds:ID is ir_datasets)",
        choices=KINDS,
        label="Format",
        wanted="one of " + ", ".join(KINDS),
    )
