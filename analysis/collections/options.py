"""How a stored collection is built: one declaration of every setting of a build
(:class:`IndexOptions`), from which ``lexlens index``'s flags and the Collections page's
widgets are derived, and through which ``build_index``, ``index_collection`` and
``build_collection`` check their keywords.

The settings: the gate k (VDR's ``E = V ⊙ G``, :data:`~lexlens.analysis.core.gating.GATE_K`),
the batch size (:data:`~lexlens.analysis.core.options.BATCH_SIZE`), a Ray address, whether to
store the inverted postings, a dense features source's ``captions`` and ``ids`` files, and a
benchmark's ``split``, ``images`` root, ``image_column`` and ``text_columns``: declared with
its reader (:mod:`lexlens.analysis.evaluation.options`), passed on to
:func:`lexlens.analysis.datasets.readers.open_benchmark`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.store import POSTINGS_MIN_NNZ
from lexlens.analysis.core.gating import GATE_K
from lexlens.analysis.core.options import (
    BATCH_SIZE,
    OptionError,
    Options,
    option,
    shared,
    shared_option,
)
from lexlens.analysis.datasets.options import (
    IMAGE_COLUMN,
    IMAGES,
    SPLIT,
    TEXT_COLUMNS,
    path_option,
)

#: Items encoded per batch when the caller does not say.
DEFAULT_BATCH_SIZE = 32
#: The Ray addresses a build understands besides ``ray://HOST:PORT`` and ``HOST:PORT``.
RAY_WORDS = ("local", "auto")


def _refuse(name: str, value: Any) -> OptionError:
    """The declared message of option ``name`` for a wrong ``value``."""
    return IndexOptions.option(name).refuse(value)


def _ray_address(address: str) -> str:
    """A Ray address: ``local``, ``auto``, ``ray://HOST:PORT`` or ``HOST:PORT``."""
    address = address.strip()
    if address in RAY_WORDS or address.startswith("ray://") or ":" in address:
        return address
    raise _refuse("ray", address)


#: The ids of a dense features file, one per line: a build's and ``lexlens terms``'s (one
#: declaration for both).
FEATURE_IDS = shared_option(
    "ids",
    object,
    None,
    optional=True,
    check=lambda v: path_option(v, FEATURE_IDS),
    parse=str,
    metavar="FILE",
    wanted="a text file's path",
    help="dense features: one id per line (default FILE.ids.txt, else the row numbers)",
)


@dataclass(frozen=True)
class IndexOptions(Options):
    """The settings of a build (``lexlens index``, ``build_index``, the Collections page)."""

    what = "index"

    gate_k: int = shared(GATE_K)
    batch_size: int = shared(BATCH_SIZE, default=DEFAULT_BATCH_SIZE)
    ray: str | None = option(
        None,
        "encode on Ray: local starts a Ray here, auto joins this machine's cluster, "
        'ray://HOST:PORT connects to one (needs pip install "lexlens[ray]")',
        check=_ray_address,
        metavar="ADDRESS",
        label="Ray address",
        wanted="local, auto or ray://HOST:PORT",
    )
    postings: bool | None = option(
        None,
        "store the inverted postings (fast search on large indexes; default: from "
        f"{POSTINGS_MIN_NNZ:,} non-zeros on)",
        label="Inverted postings",
    )
    captions: str | Path | None = option(
        None,
        "dense features: a .csv/.jsonl pairing ids with captions",
        check=lambda v: path_option(v, IndexOptions.option("captions")),
        parse=str,
        metavar="FILE",
        wanted="a .csv or .jsonl file's path",
    )
    ids: str | Path | None = shared(FEATURE_IDS)
    split: str | None = shared(SPLIT)
    images: str | Path | None = shared(IMAGES)
    image_column: str | None = shared(IMAGE_COLUMN)
    text_columns: tuple[str, ...] | None = shared(TEXT_COLUMNS)

    def benchmark_options(self) -> dict[str, Any]:
        """The options a benchmark reader takes (``None``: not given)."""
        columns = list(self.text_columns) if self.text_columns else None
        return {
            "split": self.split,
            "images": self.images,
            "image_column": self.image_column,
            "text_columns": columns,
        }


#: The options that apply to a benchmark source only.
BENCHMARK_OPTIONS = ("split", "images", "image_column", "text_columns")
#: The options that apply to a dense features source only.
FEATURES_OPTIONS = ("captions", "ids")
#: The options that name a file or folder (held to the data roots on a served page).
PATH_OPTIONS = ("captions", "ids", "images")
