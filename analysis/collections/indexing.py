"""Building a stored collection: the entry points, which check a build's inputs and choose
how to encode. Every setting is declared once in :class:`~.options.IndexOptions`; each entry
point takes ``(inputs, options)``, its keywords checked through that type.

- :func:`build_index` (``lexlens.build_index``): a loaded encoder and a source. A source of
  texts or images is encoded in batches (:mod:`.source_index`; on Ray with ``ray``:
  :mod:`.ray_encode`); a dense features file goes through a D2S (Dense2Sparse) head
  (:mod:`.features_index`).
- :func:`index_collection` (``lexlens index``): the same, but the source, ``--out`` and the
  options are checked before the encoder loads.
- :func:`~.workspace_build.build_collection` (the Collections page): a named collection of
  the workspace, from uploaded files, a path on the server or the sample photos.

Every source is opened in one place, :func:`opened_source`: ``sample:NAME`` is a benchmark
shipped in the package (:func:`lexlens.analysis.core.samples.resolve_sample`), a benchmark
(a BEIR folder, MS MARCO files, a Karpathy JSON, a Hugging Face dataset, ``irds:ID``) is
opened with its split's queries and judgements, and an option that does not apply to the
source is refused. The index format: :mod:`.store`; writing it: :mod:`.store_writer`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.build_parts import IndexResult
from lexlens.analysis.collections.features_index import build_features_index, read_source
from lexlens.analysis.collections.options import (
    BENCHMARK_OPTIONS,
    FEATURES_OPTIONS,
    IndexOptions,
)
from lexlens.analysis.collections.ray_encode import check_ray
from lexlens.analysis.collections.source_index import INDEX_NEEDS, build_source_index
from lexlens.analysis.collections.store_writer import check_out
from lexlens.analysis.collections.workspace import sample_photos_folder
from lexlens.analysis.core.arguments import (
    device_argument,
    encoder_argument,
    encoder_or_spec,
    loaded_encoder,
    path_argument,
    progress_argument,
    text_argument,
)
from lexlens.analysis.core.results import Progress
from lexlens.analysis.core.samples import SAMPLE_PREFIX, resolve_sample
from lexlens.analysis.datasets.dataset import Benchmark
from lexlens.analysis.datasets.feature_files import FeatureTable
from lexlens.analysis.datasets.readers import is_benchmark_source, open_benchmark
from lexlens.analysis.datasets.sources import is_features_source, open_source
from lexlens.models.base import Capability, Encoder, InputError
from lexlens.models.registry import available_encoders

#: A source: a path, ``sample:NAME``, ``irds:ID``, or a benchmark opened already.
SourceArg = str | Path | Benchmark
#: Where the packaged sample benchmarks find their images when no ``images`` is given.
SAMPLE_IMAGES = {"photos_karpathy": sample_photos_folder}


def checked_source(source: Any) -> SourceArg:
    """``source``: a path, ``sample:NAME``, ``irds:ID`` or an opened benchmark."""
    if isinstance(source, Benchmark):
        return source
    return path_argument(
        source, "source", "a folder or file path, sample:NAME or irds:ID (or a benchmark)"
    )


def opened_source(source: SourceArg, options: IndexOptions) -> str | Path | Benchmark:
    """The one place a build's source is opened: ``sample:NAME`` as the packaged benchmark,
    a benchmark with its split's queries and judgements (the benchmark options), any other
    path as it is; an option that does not apply to the source is refused in one line."""
    given = [name for name in BENCHMARK_OPTIONS if getattr(options, name) is not None]
    if not isinstance(source, Benchmark):
        sample = str(source).strip()[len(SAMPLE_PREFIX) :] if _is_sample(source) else None
        source = resolve_sample(source)
        if is_benchmark_source(source):
            bench = options.benchmark_options()
            if sample in SAMPLE_IMAGES and bench["images"] is None:
                bench["images"] = SAMPLE_IMAGES[sample]()
            source, given = open_benchmark(source, **bench), []
    if given:
        raise InputError(
            "--split, --images, --image-column and --text-columns apply to a benchmark source "
            "read from its path (a BEIR folder, MS MARCO files, a Karpathy JSON, a Hugging "
            "Face dataset or Parquet/Arrow files, irds:ID, sample:NAME)"
        )
    features = is_features_source(source)
    if features and options.ray is not None:
        raise InputError(
            "--ray encodes images and texts: dense features are encoded in this process "
            "(a D2S head is one matrix product per batch)"
        )
    if not features and any(getattr(options, name) is not None for name in FEATURES_OPTIONS):
        raise InputError(
            "--captions and --ids apply to a dense features source (.npy, .safetensors, "
            ".parquet); a text or image source names its captions in its own columns"
        )
    return source


def _is_sample(source: SourceArg) -> bool:
    return isinstance(source, str) and source.strip().startswith(SAMPLE_PREFIX)


def build_index(
    encoder: Encoder,
    source: SourceArg,
    out: str | Path,
    *,
    options: IndexOptions | None = None,
    progress: Progress | None = None,
    source_label: str | None = None,
    encoder_spec: str | None = None,
    **given: Any,
) -> IndexResult:
    """Encode a source into an index folder at ``out``, reusing what an index already there
    holds for unchanged items. Settings: :class:`~.options.IndexOptions` (or its fields as
    keywords: ``gate_k``, ``batch_size``, ``ray``, ``postings``, ``captions``, ``ids``, and a
    benchmark's ``split``, ``images``, ``image_column``, ``text_columns``).

    ``source``: a folder of images, a .txt/.csv/.jsonl file, dense features (.npy,
    .safetensors, .parquet, through a feature head: D2S), a benchmark (its path, ``irds:ID``,
    or one opened with :func:`~lexlens.analysis.datasets.readers.open_benchmark`), or a
    benchmark shipped with Lexlens (``sample:imagenet_beir``, ``sample:photos_karpathy``).
    ``ray``: ``None`` encodes in this process; ``"local"`` starts a local Ray, ``"auto"`` or
    ``"ray://HOST:PORT"`` uses a cluster (Ray Data ``map_batches``, one encoder per actor).
    """
    options = IndexOptions.of(options, **given)
    encoder = loaded_encoder(encoder)
    source = checked_source(source)
    out = path_argument(out, "out", "a folder path")
    progress = progress_argument(progress)
    source_label = text_argument(source_label, "source_label", optional=True)
    encoder_spec = text_argument(encoder_spec, "encoder_spec", optional=True)
    opened = opened_source(source, options)
    return _build(encoder, opened, Path(out), options, progress, source_label, encoder_spec)


def _build(
    encoder: Encoder,
    source: str | Path | Benchmark,
    out: Path,
    options: IndexOptions,
    progress: Progress | None,
    label: str | None,
    spec: str | None,
    table: FeatureTable | None = None,
) -> IndexResult:
    """A build of an opened source: dense features through their head, anything else
    through the source build."""
    if is_features_source(source):
        return build_features_index(
            encoder,
            source,
            out,
            options=options,
            progress=progress,
            encoder_spec=spec,
            source_label=label,
            table=table,
        )
    return build_source_index(
        encoder,
        source,
        out,
        options=options,
        progress=progress,
        source_label=label,
        encoder_spec=spec,
    )


def default_encoder(reads: str) -> str | None:
    """The registry encoder a build uses when none is named, by what its source's items are
    read as (``"text"`` or ``"image"``): the first registry encoder that stores them — the
    default text encoder (splade-tiny), the default image encoder (efficientnet-lite0-lexical)."""
    wanted = Capability.IMAGE_LEXICAL if reads == "image" else Capability.TEXT_LEXICAL
    cards = [c for c in available_encoders() if INDEX_NEEDS.is_compatible(c.capabilities)]
    return next((c.name for c in cards if wanted in c.capabilities), None)


def _default_for(opened: str | Path | Benchmark) -> tuple[str, str]:
    """The default encoder of an opened source, and the note that says it was chosen."""
    if is_features_source(opened):
        raise InputError(
            "a dense features source needs --encoder: the folder of a D2S head that maps "
            "the features onto a vocabulary"
        )
    reads = "image" if open_source(opened).has_images else "text"
    name = default_encoder(reads)
    if name is None:
        raise InputError(f"no registry encoder stores {reads}s: pass --encoder")
    return name, f"encoder: {name} (the default {reads} encoder; --encoder names another)"


def index_collection(
    encoder: str | Encoder | None,
    source: SourceArg,
    out: str | Path,
    *,
    options: IndexOptions | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    **given: Any,
) -> IndexResult:
    """``lexlens index``: the source, ``--out`` and options are checked before the encoder
    loads (a dense features source: every file is read and checked), then it is built (see
    :func:`build_index`). A benchmark keeps its ``split``'s queries and judgements with the
    collection. ``encoder`` ``None``: the default encoder of what the source holds
    (:func:`default_encoder`), said in the result's notes; a dense features source names its
    head."""
    options = IndexOptions.of(options, **given)
    encoder = None if encoder is None else encoder_or_spec(encoder)
    source = checked_source(source)
    out = Path(path_argument(out, "out", "a folder path")).expanduser()
    device = device_argument(device)
    progress = progress_argument(progress)
    opened = opened_source(source, options)
    open_source(opened)
    chosen = None
    if encoder is None:
        encoder, chosen = _default_for(opened)
    table = None
    if is_features_source(opened):
        table = read_source(opened, captions=options.captions, ids=options.ids)
    if options.ray is not None:
        check_ray()
    made = _missing_folders(out.parent)
    try:
        check_out(out)
        spec = encoder.name if isinstance(encoder, Encoder) else encoder
        loaded = encoder_argument(encoder, device=device)
        result = _build(loaded, opened, out, options, progress, None, spec, table)
    except BaseException:
        _remove_empty(made)  # a failed build leaves no folder it made behind
        raise
    return result if chosen is None else dataclasses.replace(result, notes=[chosen, *result.notes])


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """Remove each folder that is (still) empty, deepest first; anything else stays."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return
