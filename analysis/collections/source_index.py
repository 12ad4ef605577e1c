"""Building an index from a source of texts or images, in this process or on Ray.

:func:`build_source_index` streams a source (:mod:`.sources`) through an encoder, gates
each vector (``E = V ⊙ G``, VDR) and writes an index folder (:mod:`.store_writer`; the
format: :mod:`.store`). Unreadable items are listed and skipped, the rest is indexed.
Re-indexing reuses every stored vector whose content (text, or image bytes) is unchanged
under the same encoder fingerprint and gate k: an unchanged source encodes nothing, three
added files encode three. With ``ray`` the items are encoded by Ray actors
(:mod:`.ray_encode`) and written here in source order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lexlens.analysis.collections.build_parts import (
    MAX_SKIPPED_LISTED,
    IndexResult,
    encoder_entry,
    listed_skipped,
    unchanged,
)
from lexlens.analysis.collections.encoding import EncodedRow, content_key, encode_payloads
from lexlens.analysis.collections.options import IndexOptions
from lexlens.analysis.collections.ray_encode import RayEncoder
from lexlens.analysis.collections.store import StoredIndex, existing_index, vocab_hash
from lexlens.analysis.collections.store_writer import (
    IndexHeader,
    IndexWriter,
    check_out,
    clean_stale,
    write_atomically,
)
from lexlens.analysis.collections.token_ids import stored_token_ids
from lexlens.analysis.core.counts import counted
from lexlens.analysis.core.results import Progress
from lexlens.analysis.datasets.dataset import Benchmark
from lexlens.analysis.datasets.items import SkippedItems
from lexlens.analysis.datasets.sources import (
    IMAGE_SUFFIXES,
    Skipped,
    Source,
    SourceItem,
    count_items,
    iter_items,
    open_source,
    source_fingerprint,
)
from lexlens.models.base import Capability, Encoder, InputError, Needs

#: What indexing needs of an encoder: texts or images into a vocabulary.
INDEX_NEEDS = Needs(
    "a stored collection", any_of=frozenset({Capability.TEXT_LEXICAL, Capability.IMAGE_LEXICAL})
)


def _check_encoder_reads(encoder: Encoder, src: Source) -> str:
    """The modality the encoder indexes the source in ("image" or "text"); refused in one
    line when the encoder cannot read what the source holds."""
    images = encoder.can(Capability.IMAGE_LEXICAL)
    if src.kind == "folder" and not images:
        raise InputError(
            f"--source {src.label} is a folder of images but {encoder.name!r} does not encode "
            "images: pick an image encoder (e.g. efficientnet-lite0-lexical)"
        )
    if src.has_images and not src.has_texts and not images:
        raise InputError(f"{src.label} lists images but {encoder.name!r} does not encode images")
    if not src.has_images and not encoder.can(Capability.TEXT_LEXICAL):
        raise InputError(f"{src.label} holds texts but {encoder.name!r} does not encode text")
    return "image" if src.has_images and images else "text"


def _reusable(
    old: StoredIndex | None, entry: dict, encoder: Encoder, gate_k: int, modality: str
) -> bool:
    """Whether the index already at ``--out`` holds vectors this build would compute again
    identically (the same encoder weights, vocabulary, gate k and modality)."""
    return (
        old is not None
        and old.manifest.encoder.fingerprint == entry["fingerprint"]
        and old.manifest.vocab.hash == vocab_hash(encoder.vocab)
        and old.gate_k == gate_k
        and old.manifest.modality == modality
    )


def build_source_index(
    encoder: Encoder,
    source: str | Path | Benchmark,
    out: str | Path,
    *,
    options: IndexOptions,
    progress: Progress | None = None,
    source_label: str | None = None,
    encoder_spec: str | None = None,
) -> IndexResult:
    """Encode a source of texts or images (a path, or an opened benchmark) into an index
    folder at ``out`` (see the module docstring); ``options.ray``: ``None`` encodes here,
    else the Ray address (:class:`~.ray_encode.RayEncoder`)."""
    started = time.perf_counter()
    INDEX_NEEDS.check(encoder)
    src = open_source(source, label=source_label)
    out = Path(out).expanduser()
    modality = _check_encoder_reads(encoder, src)
    check_out(out)
    clean_stale(out)
    entry = encoder_entry(encoder, encoder_spec)
    s_fingerprint = source_fingerprint(src)
    old = existing_index(out)
    compatible = _reusable(old, entry, encoder, options.gate_k, modality)
    notes: list[str] = []
    if old is not None and not compatible:
        notes.append(
            "the stored index was built with another encoder, vocabulary or gate k: "
            "every item is encoded again"
        )
    if (
        compatible
        and old.manifest.source.fingerprint == s_fingerprint
        and old.manifest.source.root == str(src.root.resolve())
        and (options.postings is None or options.postings == (old.postings is not None))
    ):
        return unchanged(str(out), encoder, old, time.perf_counter() - started)
    build = _Build(encoder, src, modality, options, old if compatible else None, progress)
    header = IndexHeader(
        encoder=entry,
        gate_k=options.gate_k,
        modality=modality,
        source={
            "path": str(src.path.resolve()),
            "root": str(src.root.resolve()),
            "kind": src.kind,
            "fingerprint": s_fingerprint,
        },
        created=old.manifest.created if old is not None else None,
    )

    def fill(writer: IndexWriter) -> tuple[int, int, SkippedItems]:
        encoded, reused = build.run(writer, options.ray, entry["spec"])
        if src.benchmark is not None:  # its counts and problems, now that the items are read
            header.source["benchmark"] = src.benchmark.describe()
            header.source["problems"] = src.benchmark.problem_lines()[:100]
        if writer.count == 0:
            _nothing_indexed(src, build.skipped)
        return encoded, reused, build.skipped

    manifest = write_atomically(
        out,
        encoder.vocab,
        fill,
        header,
        postings=options.postings,
        extra=extra_files(encoder, src),
    )
    counts = manifest.counts
    return IndexResult(
        out=str(out),
        encoder=encoder.name,
        items=counts.items,
        encoded=counts.encoded,
        reused=counts.reused,
        skipped=listed_skipped(manifest),
        up_to_date=False,
        seconds=time.perf_counter() - started,
        manifest=manifest.to_dict(),
        notes=notes + _build_notes(src, build.skipped),
    )


def _nothing_indexed(src: Source, skipped: SkippedItems) -> None:
    """Refuse a build that indexed no item, naming the first item skipped (or that a
    folder holds no image)."""
    first = skipped.first[0] if skipped.first else None
    why = f" ({first.file}: {first.reason})" if first else ""
    if src.kind == "folder" and not skipped.count:
        raise InputError(
            f"--source {src.label}: no images found (looked for "
            f"{', '.join(IMAGE_SUFFIXES)} in every sub-folder)"
        )
    raise InputError(
        f"--source {src.label}: no item could be indexed: {skipped.count} skipped{why}"
    )


def _build_notes(src: Source, skipped: SkippedItems) -> list[str]:
    """What a build's result notes: the items skipped, a benchmark's queries, judgements and
    problems."""
    notes = []
    if skipped.count:
        listed = min(skipped.count, MAX_SKIPPED_LISTED)
        notes.append(f"{skipped.count} item(s) skipped (the first {listed} listed)")
    if src.benchmark is not None:
        bench = src.benchmark
        notes.append(
            f"{bench.kind} split {bench.split!r}: {counted(len(bench.queries), 'query')} and "
            f"{counted(sum(len(v) for v in bench.qrels.values()), 'judgement')} kept with the "
            "collection"
        )
        count = bench.describe()["problems"]
        if count:
            shown = "; ".join(bench.problem_lines()[:5])
            notes.append(f"{count} problems in the benchmark's files: {shown}")
    return notes


def extra_files(encoder: Encoder, src: Source) -> dict[str, bytes]:
    """Files an index keeps beside its vectors: the words its encoder knows it expresses
    (words.txt: the evidence that joins word pieces into words when its items have no text,
    e.g. ImageNet class words for the label-space image encoder), and a benchmark's queries
    and judgements."""
    files = {}
    if encoder.known_words:
        words = sorted(w for w in encoder.known_words if "\n" not in w)
        files["words.txt"] = "".join(w + "\n" for w in words).encode("utf-8")
    if src.benchmark is not None:
        files.update(benchmark_files(src.benchmark))
    return files


def benchmark_files(bench) -> dict[str, bytes]:
    """A benchmark's queries (BEIR's queries.jsonl) and judgements (BEIR's qrels TSV), kept
    with the collection so ``lexlens evaluate`` finds them."""

    queries = "".join(
        json.dumps({"_id": q, "text": text}, ensure_ascii=False) + "\n"
        for q, text in bench.queries.items()
    )
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{r}\n" for q, docs in bench.qrels.items() for d, r in docs.items()
    )
    return {"queries.jsonl": queries.encode("utf-8"), "qrels.tsv": qrels.encode("utf-8")}


@dataclass
class _Pending:
    """An item on its way into the index: what it encodes and whether a stored row serves."""

    item: SourceItem
    kind: str  # what gets encoded: "image" | "text"
    key: str = ""
    size: int = 0
    mtime_ns: int = 0
    payload: bytes | str = b""
    reuse_row: int | None = None


class _Build:
    """One build's streaming state: the stored rows it may reuse, the items it skipped,
    the progress it reports."""

    def __init__(
        self,
        encoder: Encoder,
        src: Source,
        modality: str,
        options: IndexOptions,
        old: StoredIndex | None,
        progress: Progress | None,
    ) -> None:
        self.encoder, self.src, self.modality = encoder, src, modality
        self.gate_k, self.batch_size = options.gate_k, options.batch_size
        self.old, self.progress = old, progress
        self.skipped = SkippedItems()
        self.reuse: dict[str, int] = {}
        self.stats: dict[str, tuple[int, int, str]] = {}
        self.counters = {"encoded": 0, "reused": 0}
        self.total = count_items(src)  # 0: unknown
        self.done = 0
        self.fraction = 0.0  # the last fraction reported: never more than done / total
        if old is not None:
            keys = old.column("content_key")
            images = old.column("image")
            sizes = old.column("size")
            mtimes = old.column("mtime_ns")
            for row, key in enumerate(keys):
                self.reuse.setdefault(key, row)
                if images[row]:
                    self.stats[images[row]] = (sizes[row], mtimes[row], key)

    def run(self, writer: IndexWriter, ray: str | None, spec: str) -> tuple[int, int]:
        """Stream the source into ``writer``: reuse stored vectors, encode the rest (here,
        or on Ray), list what cannot be read. Returns (encoded, reused)."""
        self.writer = writer
        if ray is None:
            self._encode_here()
        else:
            self._encode_on_ray(ray, spec)
        return self.counters["encoded"], self.counters["reused"]

    def _tick(self) -> None:
        self.done += 1
        done, total = self.done, self.total
        if self.progress and (done % max(1, self.batch_size) == 0 or done == total):
            indexed = self.writer.count
            if done <= total:  # of the source's counted items: a fraction that only grows
                self.fraction = done / total
                self.progress(self.fraction, f"{done}/{total}: {indexed} items indexed")
            else:  # more than counted (an estimate, or no count): the bar holds where it is
                self.progress(self.fraction, f"{done} read: {indexed} items indexed")

    def _write(self, p: _Pending, row: EncodedRow, reused: bool) -> None:
        item = p.item
        self.writer.add(
            {
                "id": item.id,
                "kind": p.kind,
                "image": item.image,
                "text": item.text,
                "captions": list(item.captions),
                "labels": list(item.labels),
                "content_key": p.key,
                "size": p.size,
                "mtime_ns": p.mtime_ns,
                "where": item.where,
            },
            *row,
        )
        self.counters["reused" if reused else "encoded"] += 1

    def _stored(self, p: _Pending) -> EncodedRow:
        assert self.old is not None and p.reuse_row is not None
        return (*self.old.row(p.reuse_row), stored_token_ids(self.old).row(p.reuse_row))

    def _prepared(self) -> Iterator[_Pending]:
        for entry in iter_items(self.src):
            if isinstance(entry, SourceItem):
                entry = self._prepare(entry)
            if isinstance(entry, Skipped):
                self.skipped.add(entry)
                self._tick()
                continue
            entry.reuse_row = self.reuse.get(entry.key)
            yield entry

    def _prepare(self, item: SourceItem) -> _Pending | Skipped:
        """Decide what an item encodes and its content key (reading image bytes if needed)."""
        if self.modality == "image" and item.image:
            path = self.src.root / item.image
            try:
                st = path.stat()
                if not path.is_file():
                    return Skipped(item.where, "not a file")
                known = self.stats.get(item.image)
                if known and known[0] == st.st_size and known[1] == st.st_mtime_ns:
                    return _Pending(item, "image", known[2], st.st_size, st.st_mtime_ns)
                data = path.read_bytes()
            except FileNotFoundError:
                return Skipped(item.where, "image file not found")
            except PermissionError:
                return Skipped(item.where, "permission denied")
            except OSError as exc:
                return Skipped(item.where, f"cannot read ({exc.strerror or exc})")
            return _Pending(
                item, "image", content_key("image", data), st.st_size, st.st_mtime_ns, data
            )
        if not item.text:
            return Skipped(item.where, "no text to encode (the encoder reads text only)")
        return _Pending(
            item, "text", content_key("text", item.text.encode("utf-8")), payload=item.text
        )

    def _encode_here(self) -> None:
        pending: list[_Pending] = []

        def flush() -> None:
            todo = [p for p in pending if p.reuse_row is None]
            results = encode_payloads(
                self.encoder, self.gate_k, [(p.kind, p.payload, p.item.where) for p in todo]
            )
            by_id = {id(p): r for p, r in zip(todo, results, strict=True)}
            for p in pending:
                if p.reuse_row is not None:
                    self._write(p, self._stored(p), reused=True)
                elif isinstance(by_id[id(p)], Skipped):
                    self.skipped.add(by_id[id(p)])
                else:
                    self._write(p, by_id[id(p)], reused=False)
                self._tick()
            pending.clear()

        for p in self._prepared():
            pending.append(p)
            if len(pending) >= self.batch_size:
                flush()
        if pending:
            flush()

    def _encode_on_ray(self, address: str, spec: str) -> None:
        engine = RayEncoder(self.encoder, self.gate_k, self.batch_size, address=address, spec=spec)
        results = None
        try:
            items = []
            for p in self._prepared():
                p.payload = p.payload if p.kind == "text" else b""  # actors read the file
                items.append(p)
            todo = [
                (p.kind, p.item.image if p.kind == "image" else str(p.payload), p.item.where)
                for p in items
                if p.reuse_row is None
            ]
            results = engine.encode_all(todo, self.src.root)
            for p in items:
                if p.reuse_row is not None:
                    self._write(p, self._stored(p), reused=True)
                else:
                    result = next(results)
                    if isinstance(result, str):
                        self.skipped.add(Skipped(p.item.where, result))
                    else:
                        self._write(p, result, reused=False)
                self._tick()
        finally:
            if results is not None:
                results.close()  # release Ray's iterator while Ray is still up
            engine.close()
