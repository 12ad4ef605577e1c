"""Building a stored collection: the entry points, which check a build's inputs and choose
how to encode.

- :func:`build_index` (``lexlens.build_index``): a loaded encoder and a source. A source of
  texts or images is encoded in batches (:mod:`.source_index`; on Ray with ``ray``:
  :mod:`.ray_encode`); a dense features file goes through a D2S (Dense2Sparse) head
  (:mod:`.features_index`).
- :func:`index_collection` (``lexlens index``): the same, but the source, ``--out`` and the
  options are checked before the encoder loads.
- :func:`build_collection` (the Collections page): a named collection of the workspace
  (:mod:`.workspace`), from uploaded files, a path on the server or the sample photos.

The index format: :mod:`.store`; writing it: :mod:`.store_writer`.
"""

from __future__ import annotations

from pathlib import Path

from lexlens.analysis.benchmark.readers import is_benchmark_source, open_benchmark
from lexlens.analysis.collections.build_parts import (
    DEFAULT_BATCH_SIZE,
    IndexResult,
    check_build_options,
)
from lexlens.analysis.collections.features_index import build_features_index, read_source
from lexlens.analysis.collections.ray_encode import check_ray
from lexlens.analysis.collections.source_index import build_source_index
from lexlens.analysis.collections.sources import is_features_source, open_source
from lexlens.analysis.collections.store_writer import check_out
from lexlens.analysis.collections.workspace import (
    check_name,
    collections_dir,
    load_sample_photos,
    save_upload_source,
    sources_dir,
)
from lexlens.analysis.core.gating import DEFAULT_GATE_K, accepts_topk
from lexlens.analysis.core.results import Progress
from lexlens.models.base import Encoder, InputError
from lexlens.models.registry import as_encoder

#: Where the Collections page takes a collection's source from.
SOURCE_KINDS = ("upload", "path", "sample")


def check_features_options(
    source: str | Path, ray: str | None, captions: str | Path | None, ids: str | Path | None
) -> None:
    """``--captions`` / ``--ids`` belong to a dense features source, ``--ray`` does not."""
    if is_features_source(source):
        if ray is not None:
            raise InputError(
                "--ray encodes images and texts: dense features are encoded in this process "
                "(a D2S head is one matrix product per batch)"
            )
    elif captions is not None or ids is not None:
        raise InputError(
            "--captions and --ids apply to a dense features source (.npy, .safetensors, "
            ".parquet); a text or image source names its captions in its own columns"
        )


@accepts_topk
def build_index(
    encoder: Encoder,
    source: str | Path,
    out: str | Path,
    *,
    gate_k: int = DEFAULT_GATE_K,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
    ray: str | None = None,
    postings: bool | None = None,
    source_label: str | None = None,
    encoder_spec: str | None = None,
    captions: str | Path | None = None,
    ids: str | Path | None = None,
) -> IndexResult:
    """Encode a source into an index folder at ``out``, reusing what an index already there
    holds for unchanged items.

    ``ray``: ``None`` encodes in this process; ``"local"`` starts a local Ray, ``"auto"`` or
    ``"ray://HOST:PORT"`` uses a cluster (Ray Data ``map_batches``, one encoder per actor).
    ``postings``: store the inverted index (default: from
    :data:`~.store.POSTINGS_MIN_NNZ` non-zeros). A dense features file (.npy, .safetensors,
    .parquet) goes through a feature head (D2S) with its ``ids`` and ``captions`` files.
    """
    check_build_options(gate_k, batch_size)
    check_features_options(source, ray, captions, ids)
    if is_features_source(source):
        return build_features_index(
            encoder, source, out, gate_k=gate_k, batch_size=batch_size, captions=captions,
            ids=ids, progress=progress, postings=postings, encoder_spec=encoder_spec,
            source_label=source_label,
        )  # fmt: skip
    return build_source_index(
        encoder, source, out, gate_k=gate_k, batch_size=batch_size, progress=progress, ray=ray,
        postings=postings, source_label=source_label, encoder_spec=encoder_spec,
    )  # fmt: skip


def index_collection(
    encoder: str | Encoder,
    source: str | Path,
    out: str | Path,
    *,
    device: str | None = None,
    gate_k: int = DEFAULT_GATE_K,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
    ray: str | None = None,
    postings: bool | None = None,
    captions: str | Path | None = None,
    ids: str | Path | None = None,
    split: str | None = None,
    images: str | Path | None = None,
    image_column: str | None = None,
    text_columns: list[str] | None = None,
) -> IndexResult:
    """``lexlens index``: the source, ``--out`` and options are checked before the encoder
    loads (a dense features source: every file is read and checked), then it is built. A
    benchmark (a BEIR folder, MS MARCO files, a Karpathy JSON with its ``images`` root, a
    Hugging Face dataset on disk, ``irds:ID``) keeps its ``split``'s queries and judgements
    with the collection."""
    check_build_options(gate_k, batch_size)
    if is_benchmark_source(source):
        source = open_benchmark(
            source, split=split, images=images, image_column=image_column,
            text_columns=text_columns,
        )  # fmt: skip
    elif any(v is not None for v in (split, images, image_column, text_columns)):
        raise InputError(
            "--split, --images, --image-column and --text-column apply to a benchmark source "
            "(a BEIR folder, MS MARCO files, a Karpathy JSON, a Hugging Face dataset or "
            "Parquet/Arrow files, irds:ID)"
        )
    open_source(source)
    check_features_options(source, ray, captions, ids)
    out = Path(out).expanduser()
    made = _missing_folders(out.parent)
    try:
        return _index_checked(
            encoder, source, out, device=device, gate_k=gate_k, batch_size=batch_size,
            progress=progress, ray=ray, postings=postings, captions=captions, ids=ids,
        )  # fmt: skip
    except BaseException:
        _remove_empty(made)  # a failed build leaves no folder it made behind
        raise


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


def _index_checked(
    encoder: str | Encoder, source, out: Path, *, device: str | None, gate_k: int,
    batch_size: int, progress: Progress | None, ray: str | None, postings: bool | None,
    captions: str | Path | None, ids: str | Path | None,
) -> IndexResult:  # fmt: skip
    """The rest of :func:`index_collection`, once its source and options are checked."""
    check_out(out)
    spec = encoder.name if isinstance(encoder, Encoder) else encoder
    if is_features_source(source):
        table = read_source(source, captions=captions, ids=ids)
        return build_features_index(
            as_encoder(encoder, device), source, out, gate_k=gate_k, batch_size=batch_size,
            captions=captions, ids=ids, progress=progress, postings=postings,
            encoder_spec=spec, table=table,
        )  # fmt: skip
    if ray is not None:
        check_ray(ray)
    return build_index(
        as_encoder(encoder, device), source, out, gate_k=gate_k, batch_size=batch_size,
        progress=progress, ray=ray, postings=postings, encoder_spec=spec,
    )  # fmt: skip


def build_collection(
    encoder: Encoder,
    name: str,
    source_kind: str,
    *,
    files: list[tuple[str, bytes]] | None = None,
    path: str = "",
    gate_k: int = DEFAULT_GATE_K,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
    split: str | None = None,
    images: str | None = None,
    image_column: str | None = None,
    text_columns: list[str] | None = None,
) -> IndexResult:
    """Build (or update) the workspace collection ``name`` from uploaded ``files``, a
    ``path`` on this server or the sample photos (``source_kind``: :data:`SOURCE_KINDS`).
    A path to a benchmark takes the options of ``lexlens index`` (``split``, ``images``,
    ``image_column``, ``text_columns``); empty ones are left out."""
    name = check_name(name)
    if source_kind == "upload":
        source = save_upload_source(name, files or [])
    elif source_kind == "path":
        if not path.strip():
            raise InputError("type the path of a folder or file on this server")
        source = Path(path.strip()).expanduser()
    elif source_kind == "sample":
        source = load_sample_photos(sources_dir() / name)
    else:
        raise InputError(f"source kind {source_kind!r}: one of {', '.join(SOURCE_KINDS)}")
    bench = {
        "split": (split or "").strip() or None,
        "images": (images or "").strip() or None,
        "image_column": (image_column or "").strip() or None,
        "text_columns": [c.strip() for c in text_columns or [] if c.strip()] or None,
    }
    return index_collection(
        encoder, source, collections_dir() / name, gate_k=gate_k, batch_size=batch_size,
        progress=progress, **bench,
    )  # fmt: skip
