"""Stored collections of dense features (``modality`` "features"): a researcher's
``.npy`` / ``.safetensors`` / ``.parquet`` vectors put through a D2S (Dense2Sparse) head.

The vectors (BLIP/ALBEF image or caption embeddings, say) have no text or image the
workbench could show; each item keeps its id and its paired captions (``--captions``),
which deviation measures the vector against and search results show. The index is the
same format as any other (:mod:`.store`): gated CSR vectors ``E = V ⊙ G`` (VDR's gate;
a vector has no bag of words, so the gate is its top-k), ``items.parquet`` rows with
``kind`` "features" (``captions``: the paired captions, ``text``: the first of them,
which search results show), and a manifest whose ``source.kind`` is "features".
Search takes bag-of-words text queries (``--query-mode bow``): the head tokenises them.

Re-indexing the same files with the same head and gate k encodes nothing (the source
fingerprint covers the features, ids and captions files); anything else re-encodes every
vector (a D2S head is one matrix product per batch).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from lexlens.analysis.collections.build_parts import (
    MAX_SKIPPED_LISTED,
    IndexResult,
    encoder_entry,
    listed_skipped,
    unchanged,
)
from lexlens.analysis.collections.encoding import gated_sparse
from lexlens.analysis.collections.manifest import Manifest
from lexlens.analysis.collections.options import IndexOptions
from lexlens.analysis.collections.store import StoredIndex, existing_index, vocab_hash
from lexlens.analysis.collections.store_writer import (
    IndexHeader,
    IndexWriter,
    check_out,
    write_atomically,
)
from lexlens.analysis.core.results import Progress
from lexlens.analysis.datasets.feature_files import FeatureTable, read_features
from lexlens.analysis.datasets.items import (
    Skipped,
    SkippedItems,
    SourceItem,
    checked_items,
)
from lexlens.models.base import Capability, Encoder, InputError, Needs

#: What indexing dense features needs of an encoder: a head over feature vectors.
FEATURES_INDEX_NEEDS = Needs(
    "a stored collection of dense features", all_of=frozenset({Capability.FEATURE_LEXICAL})
)


def read_source(
    source: str | Path,
    *,
    captions: str | Path | None = None,
    ids: str | Path | None = None,
    label: str | None = None,
) -> FeatureTable:
    """The :class:`~.feature_files.FeatureTable` of a source, checked in full before
    anything is encoded."""
    shown = label or str(source)
    path = Path(source).expanduser()
    if not path.exists():
        raise InputError(f"--source {shown}: not found")
    return read_features(
        path,
        name=shown,
        ids=None if ids is None else Path(ids).expanduser(),
        ids_name=None if ids is None else str(ids),
        captions=None if captions is None else Path(captions).expanduser(),
        captions_name=None if captions is None else str(captions),
    )


def source_fingerprint(*paths: Path | None) -> str:
    """sha256 over the bytes of the features file and its ids and captions files."""
    digest = hashlib.sha256(b"features\0")
    for path in paths:
        digest.update(b"\0" if path is None else str(Path(path).name).encode() + b"\0")
        if path is None:
            continue
        with open(path, "rb") as handle:
            for block in iter(lambda h=handle: h.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def checked_rows(
    table: FeatureTable, skipped: SkippedItems, ids_file: str | None = None
) -> Iterator[int]:
    """The rows of ``table`` whose ids an index may store: every id passes the check every
    source's items pass (:func:`~.items.checked_items`: no whitespace, each once); the
    others are counted in ``skipped`` with their file and line (``ids_file``: the ids file
    as the user named it, one id per line; else the features file and the row)."""

    def where(row: int) -> str:
        return f"{ids_file}:{row + 1}" if ids_file else f"{table.name} row {row}"

    items = (SourceItem(item, where=where(n)) for n, item in enumerate(table.ids))
    for row, item in enumerate(checked_items(items)):
        if isinstance(item, Skipped):
            skipped.add(item)
        else:
            yield row


def _fill(
    encoder: Encoder,
    table: FeatureTable,
    options: IndexOptions,
    progress: Progress | None,
    ids_file: str | None,
):
    """What writes a features index: each kept vector through the head, gated
    (``E = V ⊙ G``), with its id and paired captions, a batch at a time."""
    skipped = SkippedItems()

    def fill(writer: IndexWriter) -> tuple[int, int, SkippedItems]:
        rows = np.fromiter(checked_rows(table, skipped, ids_file), dtype=np.int64)
        n, size = len(rows), options.batch_size
        for lo in range(0, n, size):
            batch = rows[lo : lo + size]
            block = np.asarray(table.vectors[batch])
            encodings = encoder.encode_features(block, keep_units=False)
            for row, vector, encoding in zip(batch, block, encodings, strict=True):
                cols, vals = gated_sparse(encoding, encoder.vocab, options.gate_k)
                paired = list(table.captions[row]) if table.captions else []
                writer.add(_features_meta(table.ids[row], paired, vector), cols, vals)
            if progress is not None:
                progress(min(n, lo + size) / n, f"{min(n, lo + size)}/{n} vectors")
        if writer.count == 0:
            first = skipped.first[0] if skipped.first else None
            why = f" ({first.file}: {first.reason})" if first else ""
            raise InputError(f"{table.name}: no vector could be indexed{why}")
        return writer.count, 0, skipped

    return fill


def _features_meta(item: str, paired: list[str], vector: np.ndarray) -> dict:
    """The metadata row of one vector: its id, its paired captions (the first is what
    search results show) and a hash of the vector (its content key)."""
    return {
        "id": item,
        "kind": "features",
        "image": "",
        "text": paired[0] if paired else "",
        "captions": paired,
        "labels": [],
        "content_key": hashlib.blake2b(vector.tobytes(), digest_size=16).hexdigest(),
        "size": 0,
        "mtime_ns": 0,
    }


def _up_to_date(
    old: StoredIndex | None, entry: dict, encoder: Encoder, gate_k: int, fingerprint: str
) -> bool:
    """Whether the index at ``--out`` holds these vectors already (the same head, gate k and
    files)."""
    return (
        old is not None
        and old.manifest.modality == "features"
        and old.manifest.encoder.fingerprint == entry["fingerprint"]
        and old.manifest.vocab.hash == vocab_hash(encoder.vocab)
        and old.gate_k == gate_k
        and old.manifest.source.fingerprint == fingerprint
    )


def build_features_index(
    encoder: Encoder,
    source: str | Path,
    out: str | Path,
    *,
    options: IndexOptions | None = None,
    progress: Progress | None = None,
    encoder_spec: str | None = None,
    source_label: str | None = None,
    table: FeatureTable | None = None,
    **given: object,
) -> IndexResult:
    """Encode a dense features file with a feature head into an index folder at ``out``
    (settings: :class:`~.options.IndexOptions`, its ``captions`` and ``ids`` files too).

    Checked before anything is encoded: the head (``FEATURE_LEXICAL``), the files (the
    features, ids and captions: see :func:`.feature_files.read_features`; ``table``: read
    already), the vectors' dimension against the head's, ``--out``. A vector whose id an
    index cannot store (:func:`~.items.checked_items`) is skipped and named.
    """
    started = time.perf_counter()
    options = IndexOptions.of(options, **given)
    FEATURES_INDEX_NEEDS.check(encoder)
    shown = source_label or str(source)
    if table is None:
        table = read_source(source, captions=options.captions, ids=options.ids, label=shown)
    if table.dim != encoder.feature_dim:
        raise InputError(
            f"--source {shown} holds {table.dim}-d vectors but the head {encoder.name!r} "
            f"expects {encoder.feature_dim}-d (its dense_size)"
        )
    out, path = Path(out).expanduser(), Path(source).expanduser()
    check_out(out)
    sidecar = path.with_name(f"{path.stem}.ids.txt")
    given_ids = None if options.ids is None else Path(options.ids).expanduser()
    ids_path = given_ids or (sidecar if sidecar.is_file() else None)
    caps_path = None if options.captions is None else Path(options.captions).expanduser()
    entry = encoder_entry(encoder, encoder_spec)
    s_fingerprint = source_fingerprint(path, ids_path, caps_path)
    old = existing_index(out)
    if _up_to_date(old, entry, encoder, options.gate_k, s_fingerprint):
        return unchanged(str(out), encoder, old, time.perf_counter() - started)
    # A features manifest lists the encoder's fingerprint and capabilities first.
    first = {"fingerprint": entry["fingerprint"], "capabilities": entry["capabilities"]}
    header = IndexHeader(
        encoder=first | entry,
        gate_k=options.gate_k,
        modality="features",
        source={
            "path": str(path.resolve()),
            "root": str(path.resolve().parent),
            "kind": "features",
            "fingerprint": s_fingerprint,
            "dim": table.dim,
            "ids": table.id_source,
            "captions": None if caps_path is None else str(caps_path.resolve()),
        },
    )
    named = None if ids_path is None else str(options.ids or ids_path)
    fill = _fill(encoder, table, options, progress, named)
    manifest = write_atomically(out, encoder.vocab, fill, header, postings=options.postings)
    return _features_result(out, encoder, manifest, table, old, time.perf_counter() - started)


def _features_result(
    out: Path,
    encoder: Encoder,
    manifest: Manifest,
    table: FeatureTable,
    old: StoredIndex | None,
    seconds: float,
) -> IndexResult:
    """The result of a features build that wrote its index."""
    counts = manifest.counts
    notes = list(table.notes)
    if old is not None:
        notes.append("the stored index was replaced: every vector was encoded again")
    if counts.skipped:
        notes.append(
            f"{counts.skipped} vector(s) skipped (the first "
            f"{min(counts.skipped, MAX_SKIPPED_LISTED)} listed)"
        )
    return IndexResult(
        out=str(out),
        encoder=encoder.name,
        items=counts.items,
        encoded=counts.encoded,
        reused=0,
        skipped=listed_skipped(manifest),
        up_to_date=False,
        seconds=seconds,
        manifest=manifest.to_dict(),
        notes=notes,
    )
