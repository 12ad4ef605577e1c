"""The Collections page's build: a named collection of the workspace (:mod:`.workspace`) from
uploaded files, a path on the server (or ``sample:NAME``, ``irds:ID``) or the sample photos,
built as ``lexlens index`` builds (:func:`~.indexing.index_collection`); or vectors encoded
elsewhere, imported as ``lexlens index --vectors`` imports them
(:func:`~.vector_import.import_vectors`).

A served app reads the server's files only inside its data roots (Jupyter's rule,
:func:`lexlens.analysis.core.roots.inside_roots`): given ``roots``, a typed path and every
path option (``images``, ``captions``, ``ids``; an import's ``vector_ids``, ``queries``,
``qrels``) outside them is refused in one line before
anything is read or written. A packaged sample and an ``irds:ID`` name no path of the
server's and pass as typed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.arguments import data_roots, one_of, uploaded_files
from lexlens.analysis.collections.build_parts import IndexResult
from lexlens.analysis.collections.indexing import default_encoder, index_collection
from lexlens.analysis.collections.options import PATH_OPTIONS, IndexOptions
from lexlens.analysis.collections.vector_import import VectorImportOptions, import_vectors
from lexlens.analysis.collections.workspace import (
    check_name,
    collections_dir,
    load_sample_photos,
    save_upload_source,
    sources_dir,
)
from lexlens.analysis.core.arguments import loaded_encoder, progress_argument, text_argument
from lexlens.analysis.core.results import Progress, Record
from lexlens.analysis.core.roots import inside_roots
from lexlens.analysis.core.samples import SAMPLE_PREFIX, resolve_sample
from lexlens.analysis.datasets.readers import detect, open_benchmark
from lexlens.analysis.datasets.sources import open_source
from lexlens.models.base import Encoder, InputError, LexlensError

#: Where the Collections page takes a collection's source from.
SOURCE_KINDS = ("upload", "path", "sample")
#: The path options of an import (each held to the data roots like the vectors' path).
IMPORT_PATH_OPTIONS = ("vector_ids", "queries", "qrels")
#: Sources that name no file of the server's: a packaged sample, ir_datasets' own cache.
NOT_A_PATH = (SAMPLE_PREFIX, "irds:")


def _server_path(path: Any, roots: Sequence[str | Path] | None) -> str | Path:
    """A typed server path: stripped, inside ``roots`` when given (links followed)."""
    path = text_argument(path, "path").strip()
    if not path:
        raise InputError("type the path of a folder or file on this server")
    if path.startswith(NOT_A_PATH):
        return path
    if roots is None:
        return Path(path).expanduser()
    return inside_roots(path, roots, "path")


def server_path_refusal(path: Any, roots: Sequence[str | Path] | None) -> str:
    """Why a build could not read the typed server ``path`` — the build's own check of it
    against ``roots`` (``None``: any), in its one line — or "" when it passes or nothing is
    typed yet: the page says so under the field, before Build."""
    if not str(path or "").strip():
        return ""
    try:
        _server_path(path, data_roots(roots))
    except LexlensError as exc:
        return str(exc)
    return ""


#: What each kind of benchmark holds, as a collection reads it ("hf": it depends).
BENCHMARK_READS = {"beir": "text", "msmarco": "text", "irds": "text", "karpathy": "image"}


@dataclass(frozen=True)
class BuildProposal(Record):
    """What a typed source suggests: a collection name (its folder's or file's name), what
    its items are read as ("text" or "image") and a registry encoder that reads them."""

    name: str
    reads: str
    encoder: str | None


def propose_build(path: Any, roots: Sequence[str | Path] | None = None) -> BuildProposal | None:
    """The name and encoder a typed source proposes on the Collections page: a text
    benchmark (BEIR, MS MARCO, ir_datasets) or a table of texts → a text encoder, a folder
    of images or a Karpathy split → an image encoder; ``None`` when the path cannot be read
    (yet): the build says why."""
    try:
        source = _server_path(path, data_roots(roots))
        reads = _reads(resolve_sample(source))
    except LexlensError:
        return None
    return BuildProposal(_proposed_name(str(source)), reads, default_encoder(reads))


def _reads(source: str | Path) -> str:
    """What a source's items are read as: "image" or "text" (its header or fields read)."""
    text = str(source)
    if text.startswith("irds:"):
        return "text"
    kind = detect(Path(text).expanduser())
    if kind in BENCHMARK_READS:
        return BENCHMARK_READS[kind]
    if kind is not None:  # a Hugging Face dataset: its columns say
        return "image" if open_benchmark(source).has_images else "text"
    opened = open_source(source)
    return "image" if opened.has_images else "text"


def _proposed_name(source: str) -> str:
    """A collection name from a source: its folder's or file's name (``sample:NAME``,
    ``irds:a/b`` → its last part), cut to the characters a name may hold."""
    stem = re.split(r"[/:]", source.rstrip("/"))[-1]
    stem = Path(stem).stem if "." in stem[1:] else stem
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:64]
    return name or "collection"


def _paths_inside(options: Any, names: Sequence[str], roots: list[str | Path] | None) -> Any:
    """``options`` with each given path option of ``names`` resolved inside ``roots`` (one
    outside them refused in its one line); unchanged when ``roots`` is ``None``."""
    if roots is None:
        return options
    inside = {
        name: str(inside_roots(getattr(options, name), roots, name))
        for name in names
        if getattr(options, name) is not None
    }
    return dataclasses.replace(options, **inside) if inside else options


def check_collection_request(
    name: str,
    source_kind: str,
    *,
    path: str = "",
    roots: Sequence[str | Path] | None = None,
    options: IndexOptions | None = None,
    **given: Any,
) -> IndexOptions:
    """A workspace build's request checked before anything is read or written (the page
    calls it before it starts the build): the name, the source kind, the options, and — given
    ``roots`` — the typed path and every path option inside them. Returns the options with
    their paths resolved."""
    options = IndexOptions.of(options, **given)
    check_name(name)
    one_of(source_kind, "source kind", SOURCE_KINDS)
    roots = data_roots(roots)
    if source_kind == "path":
        _server_path(path, roots)
    return _paths_inside(options, PATH_OPTIONS, roots)


def build_collection(
    encoder: Encoder,
    name: str,
    source_kind: str,
    *,
    files: list[tuple[str, bytes]] | None = None,
    path: str = "",
    roots: Sequence[str | Path] | None = None,
    options: IndexOptions | None = None,
    progress: Progress | None = None,
    **given: Any,
) -> IndexResult:
    """Build (or update) the workspace collection ``name`` from uploaded ``files``, a
    ``path`` on this server or the sample photos (``source_kind``: :data:`SOURCE_KINDS`).
    Settings: :class:`~.options.IndexOptions` (a benchmark's ``split``, ``images``,
    ``image_column``, ``text_columns`` as ``lexlens index`` takes them). ``roots``: the
    folders a served page may read (``None``: any)."""
    options = check_collection_request(
        name, source_kind, path=path, roots=roots, options=options, **given
    )
    encoder = loaded_encoder(encoder)
    files = uploaded_files(files)
    progress = progress_argument(progress)
    name = check_name(name)
    if source_kind == "upload":
        source: str | Path = save_upload_source(name, files)
    elif source_kind == "path":
        source = _server_path(path, data_roots(roots))
    else:
        source = load_sample_photos(sources_dir() / name)
    return index_collection(
        encoder, source, collections_dir() / name, options=options, progress=progress
    )


def check_import_request(
    name: str,
    path: str,
    *,
    roots: Sequence[str | Path] | None = None,
    options: VectorImportOptions | None = None,
    **given: Any,
) -> VectorImportOptions:
    """A workspace import's request checked before anything is read or written: the name,
    and — given ``roots`` — the vectors' path and every path option inside them. Returns the
    options with their paths resolved."""
    options = VectorImportOptions.of(options, **given)
    check_name(name)
    roots = data_roots(roots)
    _server_path(path, roots)
    return _paths_inside(options, IMPORT_PATH_OPTIONS, roots)


def import_collection(
    encoder: Encoder | str | None,
    name: str,
    path: str,
    *,
    roots: Sequence[str | Path] | None = None,
    options: VectorImportOptions | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    **given: Any,
) -> IndexResult:
    """Store vectors encoded elsewhere (``path`` on this server: Anserini's
    JsonVectorCollection, a ``.npz`` CSR, a Hugging Face dataset or Parquet) as the
    workspace collection ``name``, checked against ``encoder`` on a seeded sample (``None``:
    stored as given). ``roots``: the folders a served page may read (``None``: any)."""
    options = check_import_request(name, path, roots=roots, options=options, **given)
    source = _server_path(path, data_roots(roots))
    return import_vectors(
        encoder,
        source,
        collections_dir() / check_name(name),
        options=options,
        device=device,
        progress=progress,
    )
