"""Building a stored collection: a source encoded in batches into an index.

:func:`build_index` streams a source (:mod:`lexlens.analysis.collections.sources`) through an encoder,
gates each vector (``E = V ⊙ G``), and writes an index folder
(:mod:`lexlens.analysis.collections.store_writer`; the format: :mod:`lexlens.analysis.collections.store`).
Unreadable items are listed and skipped, the rest is indexed. Re-indexing reuses every
stored vector whose content (text, or image bytes) is unchanged under the same encoder
fingerprint and gate k: an unchanged source encodes nothing, three added files encode
three. ``--ray`` encodes on Ray (:mod:`lexlens.analysis.collections.ray_encode`); a dense features
source goes through a D2S head (:mod:`lexlens.analysis.collections.features_index`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.encoding import (
    INDEX_NEEDS,
    IndexResult,
    check_build_options,
    content_key,
    encode_payloads,
    encoder_entry,
)
from lexlens.analysis.collections.features_index import build_features_index, read_source
from lexlens.analysis.collections.ray_encode import RayEncoder, check_ray
from lexlens.analysis.collections.sources import (
    IMAGE_SUFFIXES,
    Skipped,
    Source,
    SourceItem,
    count_items,
    is_features_source,
    iter_items,
    open_source,
    source_fingerprint,
)
from lexlens.analysis.collections.store import StoredIndex, existing_index, vocab_hash
from lexlens.analysis.collections.store_writer import (
    IndexWriter,
    check_out,
    clean_stale,
    write_atomically,
)
from lexlens.analysis.core.gating import DEFAULT_GATE_K, accepts_topk
from lexlens.analysis.core.results import Progress
from lexlens.models.base import Capability, Encoder, InputError
from lexlens.models.registry import as_encoder


@accepts_topk
def build_index(
    encoder: Encoder,
    source: str | Path,
    out: str | Path,
    *,
    gate_k: int = DEFAULT_GATE_K,
    batch_size: int = 32,
    progress: Progress | None = None,
    ray: str | None = None,
    postings: bool | None = None,
    source_label: str | None = None,
    encoder_spec: str | None = None,
    captions: str | Path | None = None,
    ids: str | Path | None = None,
) -> IndexResult:
    """Encode a source into an index folder at ``out`` (see the module docstring).

    ``ray``: ``None`` encodes in this process; ``"local"`` starts a local Ray, ``"auto"`` or
    ``"ray://HOST:PORT"`` uses a cluster (Ray Data ``map_batches``, one encoder per actor).
    ``postings``: store the inverted index (default: from
    :data:`~lexlens.analysis.collections.store.POSTINGS_MIN_NNZ` non-zeros). A dense features file
    (.npy, .safetensors, .parquet) goes through a feature head (D2S) with its ``ids`` and
    ``captions`` files: :mod:`lexlens.analysis.collections.features_index`.
    """
    started = time.perf_counter()
    check_build_options(gate_k, batch_size)
    _check_features_options(source, ray, captions, ids)
    if is_features_source(source):
        return build_features_index(
            encoder, source, out, gate_k=gate_k, batch_size=batch_size, captions=captions, ids=ids,
            progress=progress, postings=postings, encoder_spec=encoder_spec,
            source_label=source_label,
        )  # fmt: skip
    INDEX_NEEDS.check(encoder)
    src = open_source(source, label=source_label)
    out = Path(out).expanduser()
    if src.kind == "folder" and not encoder.can(Capability.IMAGE_LEXICAL):
        raise InputError(
            f"--source {src.label} is a folder of images but {encoder.name!r} does not encode "
            "images: pick an image encoder (e.g. efficientnet-lite0-lexical)"
        )
    if src.has_images and not src.has_texts and not encoder.can(Capability.IMAGE_LEXICAL):
        raise InputError(f"{src.label} lists images but {encoder.name!r} does not encode images")
    if not src.has_images and not encoder.can(Capability.TEXT_LEXICAL):
        raise InputError(f"{src.label} holds texts but {encoder.name!r} does not encode text")
    check_out(out)
    clean_stale(out)
    modality = "image" if src.has_images and encoder.can(Capability.IMAGE_LEXICAL) else "text"
    entry = encoder_entry(encoder, encoder_spec)
    s_fingerprint = source_fingerprint(src)
    old = existing_index(out)
    notes: list[str] = []
    compatible = (
        old is not None
        and old.manifest["encoder"].get("fingerprint") == entry["fingerprint"]
        and old.manifest["vocab"].get("hash") == vocab_hash(encoder.vocab)
        and old.manifest.get("gate_k") == gate_k
        and old.manifest.get("modality") == modality
    )
    if old is not None and not compatible:
        notes.append(
            "the stored index was built with another encoder, vocabulary or gate k: "
            "every item is encoded again"
        )
    if (
        compatible
        and old.manifest["source"].get("fingerprint") == s_fingerprint
        and old.manifest["source"].get("root") == str(src.root.resolve())
        and (postings is None or postings == (old.postings is not None))
    ):
        return IndexResult(
            str(out), encoder.name, len(old), 0, len(old),
            [Skipped(**s) for s in old.manifest.get("skipped", [])],
            True, time.perf_counter() - started, old.manifest,
            ["source and encoder unchanged: nothing to encode"],
        )  # fmt: skip
    reuse: dict[str, int] = {}
    stats: dict[str, tuple[int, int, str]] = {}
    if compatible:
        keys = old.column("content_key")
        images = old.column("image")
        sizes = old.column("size")
        mtimes = old.column("mtime_ns")
        for row, key in enumerate(keys):
            reuse.setdefault(key, row)
            if images[row]:
                stats[images[row]] = (sizes[row], mtimes[row], key)

    def fill(writer: IndexWriter) -> tuple[int, int, list[dict]]:
        encoded, reused = _encode_into(
            writer, encoder, src, modality, gate_k, batch_size, reuse, stats, old,
            progress, ray, entry["spec"],
        )  # fmt: skip
        if writer.count == 0:
            first = src.skipped[0] if src.skipped else None
            why = f" ({first.file}: {first.reason})" if first else ""
            if src.kind == "folder" and not src.skipped:
                raise InputError(
                    f"--source {src.label}: no images found (looked for "
                    f"{', '.join(IMAGE_SUFFIXES)} in every sub-folder)"
                )
            raise InputError(
                f"--source {src.label}: no item could be indexed: {len(src.skipped)} skipped{why}"
            )
        return encoded, reused, [s.to_dict() for s in src.skipped]

    source_entry = {
        "path": str(src.path.resolve()),
        "root": str(src.root.resolve()),
        "kind": src.kind,
        "fingerprint": s_fingerprint,
    }
    manifest = write_atomically(
        out, encoder.vocab, fill, encoder=entry, gate_k=gate_k, modality=modality,
        source=source_entry, postings=postings,
        created=old.manifest.get("created") if old is not None else None,
    )  # fmt: skip
    if src.skipped:
        notes.append(f"{len(src.skipped)} item(s) skipped (listed)")
    counts = manifest["counts"]
    return IndexResult(
        str(out), encoder.name, counts["items"], counts["encoded"], counts["reused"],
        list(src.skipped), False, time.perf_counter() - started, manifest, notes,
    )  # fmt: skip


@dataclass
class _Pending:
    item: SourceItem
    kind: str  # what gets encoded: "image" | "text"
    key: str = ""
    size: int = 0
    mtime_ns: int = 0
    payload: bytes | str = b""
    reuse_row: int | None = None


def _prepare(
    item: SourceItem,
    src: Source,
    modality: str,
    stats: dict[str, tuple[int, int, str]],
) -> _Pending | Skipped:
    """Decide what an item encodes and its content key (reading image bytes if needed)."""
    if modality == "image" and item.image:
        path = src.root / item.image
        try:
            st = path.stat()
            if not path.is_file():
                return Skipped(item.where, "not a file")
            known = stats.get(item.image)
            if known and known[0] == st.st_size and known[1] == st.st_mtime_ns:
                return _Pending(item, "image", known[2], st.st_size, st.st_mtime_ns)
            data = path.read_bytes()
        except FileNotFoundError:
            return Skipped(item.where, "image file not found")
        except PermissionError:
            return Skipped(item.where, "permission denied")
        except OSError as exc:
            return Skipped(item.where, f"cannot read ({exc.strerror or exc})")
        return _Pending(item, "image", content_key("image", data), st.st_size, st.st_mtime_ns, data)
    if not item.text:
        return Skipped(item.where, "no text to encode (the encoder reads text only)")
    return _Pending(item, "text", content_key("text", item.text.encode("utf-8")), payload=item.text)


def _encode_into(
    writer: IndexWriter,
    encoder: Encoder,
    src: Source,
    modality: str,
    gate_k: int,
    batch_size: int,
    reuse: dict[str, int],
    stats: dict[str, tuple[int, int, str]],
    old: StoredIndex | None,
    progress: Progress | None,
    ray: str | None,
    spec: str,
) -> tuple[int, int]:
    """Stream the source into ``writer``: reuse stored vectors, encode the rest (here, or
    on Ray), list what cannot be read. Returns (encoded, reused)."""
    total = count_items(src)
    counters = {"encoded": 0, "reused": 0}
    done = 0

    def tick(n: int = 1) -> None:
        nonlocal done
        done += n
        if progress and (done % max(1, batch_size) == 0 or done >= total):
            shown = max(total, done)
            progress(done / shown, f"{done}/{shown} items read, {writer.count} indexed")

    def write(p: _Pending, cols: np.ndarray, vals: np.ndarray, reused: bool) -> None:
        item = p.item
        writer.add(
            {
                "id": item.id, "kind": p.kind, "image": item.image, "text": item.text,
                "captions": list(item.captions), "labels": list(item.labels),
                "content_key": p.key, "size": p.size, "mtime_ns": p.mtime_ns,
                "where": item.where,
            },
            cols,
            vals,
        )  # fmt: skip
        counters["reused" if reused else "encoded"] += 1

    def prepared() -> Iterator[_Pending]:
        for entry in iter_items(src):
            if isinstance(entry, SourceItem):
                entry = _prepare(entry, src, modality, stats)
            if isinstance(entry, Skipped):
                src.skipped.append(entry)
                tick()
                continue
            entry.reuse_row = reuse.get(entry.key)
            yield entry

    def reused_row(p: _Pending) -> tuple[np.ndarray, np.ndarray]:
        assert old is not None and p.reuse_row is not None
        return old.row(p.reuse_row)

    if ray is None:
        pending: list[_Pending] = []

        def flush() -> None:
            todo = [p for p in pending if p.reuse_row is None]
            results = encode_payloads(
                encoder, gate_k, [(p.kind, p.payload, p.item.where) for p in todo], src.root
            )
            by_id = {id(p): r for p, r in zip(todo, results, strict=True)}
            for p in pending:
                if p.reuse_row is not None:
                    write(p, *reused_row(p), reused=True)
                elif isinstance(by_id[id(p)], Skipped):
                    src.skipped.append(by_id[id(p)])
                else:
                    write(p, *by_id[id(p)], reused=False)
                tick()
            pending.clear()

        for p in prepared():
            pending.append(p)
            if len(pending) >= batch_size:
                flush()
        if pending:
            flush()
    else:
        engine = RayEncoder(encoder, gate_k, batch_size, address=ray, spec=spec)
        results = None
        try:
            items = []
            for p in prepared():
                p.payload = p.payload if p.kind == "text" else b""  # actors read the file
                items.append(p)
            todo = [
                (p.kind, p.item.image if p.kind == "image" else str(p.payload), p.item.where)
                for p in items
                if p.reuse_row is None
            ]
            results = engine.encode_all(todo, src.root)
            for p in items:
                if p.reuse_row is not None:
                    write(p, *reused_row(p), reused=True)
                else:
                    result = next(results)
                    if isinstance(result, str):
                        src.skipped.append(Skipped(p.item.where, result))
                    else:
                        write(p, *result, reused=False)
                tick()
        finally:
            if results is not None:
                results.close()  # release Ray's iterator while Ray is still up
            engine.close()
    return counters["encoded"], counters["reused"]


def _check_features_options(source: str | Path, ray: str | None, captions: Any, ids: Any) -> None:
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
def index_collection(
    encoder: str | Encoder,
    source: str | Path,
    out: str | Path,
    *,
    device: str | None = None,
    gate_k: int = DEFAULT_GATE_K,
    batch_size: int = 32,
    progress: Progress | None = None,
    ray: str | None = None,
    postings: bool | None = None,
    captions: str | Path | None = None,
    ids: str | Path | None = None,
) -> IndexResult:
    """``lexlens index``: the source, ``--out`` and options are checked before the encoder
    loads, then :func:`build_index` runs (a dense features source: every file is read and
    checked first, then :func:`lexlens.analysis.collections.features_index.build_features_index`)."""
    check_build_options(gate_k, batch_size)
    open_source(source)
    _check_features_options(source, ray, captions, ids)
    check_out(Path(out).expanduser())
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
