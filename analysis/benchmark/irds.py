"""A dataset of ``ir_datasets`` that is already in the user's local cache
(``IR_DATASETS_HOME``, default ``~/.ir_datasets``): its documents, queries and judgements,
read through ``ir_datasets`` — which would otherwise download what is missing on first use.
Lexlens never lets it: while the dataset is read, any download ``ir_datasets`` starts is
stopped before it connects, and the reader says, in one line, that the id is not in the
local cache (where it looked)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from lexlens.analysis.benchmark.dataset import Benchmark, pick_split
from lexlens.analysis.benchmark.trec import Problems
from lexlens.analysis.collections.items import Skipped, SourceItem
from lexlens.models.base import InputError


class _WouldDownload(Exception):
    """ir_datasets asked the network for a file."""


def _home() -> Path:
    return Path(os.environ.get("IR_DATASETS_HOME") or Path.home() / ".ir_datasets").expanduser()


@contextlib.contextmanager
def _no_downloads() -> Iterator[None]:
    """Every download class of ir_datasets refuses to start while this is open."""
    from ir_datasets.util import download

    def refuse(self, *args, **kwargs):
        raise _WouldDownload(getattr(self, "url", getattr(self, "uri", "a remote file")))

    names = [n for n in ("RequestsDownload", "GoogleDriveDownload", "GoogleCloudBucketStream")
             if hasattr(download, n)]  # fmt: skip
    saved = {}
    for name in names:
        cls = getattr(download, name)
        for attr in ("stream", "__iter__"):
            if attr in cls.__dict__:
                saved[(cls, attr)] = cls.__dict__[attr]
                setattr(cls, attr, refuse)
    try:
        yield
    finally:
        for (cls, attr), original in saved.items():
            setattr(cls, attr, original)


def _missing(dataset_id: str) -> InputError:
    return InputError(
        f"irds:{dataset_id}: not in the local ir_datasets cache ({_home()}): download it "
        "with ir_datasets first (Lexlens reads only what is on this machine)"
    )


def open_irds(dataset_id: str, *, split: str | None = None) -> Benchmark:
    """The documents, queries and judgements of ``dataset_id`` (its split given in the id,
    as ir_datasets names them: ``beir/scifact/test``)."""
    try:
        import ir_datasets
    except ImportError:
        raise InputError(
            'reading an ir_datasets id needs the ir_datasets package: pip install "lexlens[irds]"'
        ) from None
    try:
        dataset = ir_datasets.load(dataset_id)
    except KeyError:
        raise InputError(f"irds:{dataset_id}: no such ir_datasets id") from None
    if not (dataset.has_docs() and dataset.has_queries() and dataset.has_qrels()):
        raise InputError(f"irds:{dataset_id}: needs documents, queries and judgements")
    if split is not None:
        pick_split([dataset_id.rsplit("/", 1)[-1]], split, f"irds:{dataset_id}")
    problems = Problems()
    try:
        with _no_downloads():
            queries = {str(q.query_id): str(q.text) for q in dataset.queries_iter()}
            qrels: dict[str, dict[str, int]] = {}
            for q in dataset.qrels_iter():
                qrels.setdefault(str(q.query_id), {})[str(q.doc_id)] = int(q.relevance)
    except (_WouldDownload, FileNotFoundError):
        raise _missing(dataset_id) from None

    def read(found: Problems) -> Iterator[SourceItem | Skipped]:
        try:
            with _no_downloads():
                for n, doc in enumerate(dataset.docs_iter()):
                    title = str(getattr(doc, "title", "") or "").strip()
                    body = str(getattr(doc, "text", "") or "").strip()
                    joined = f"{title} {body}".strip()
                    where = f"irds:{dataset_id}[{n}]"
                    if not joined:
                        yield Skipped(where, "empty document")
                        continue
                    yield SourceItem(str(doc.doc_id), text=joined, where=where)
        except (_WouldDownload, FileNotFoundError):
            raise _missing(dataset_id) from None

    return Benchmark(
        kind="ir_datasets", label=f"irds:{dataset_id}", root=_home(),
        split=dataset_id.rsplit("/", 1)[-1], splits=[dataset_id.rsplit("/", 1)[-1]],
        queries=queries, qrels=qrels, read_items=read,
        fingerprint_parts=lambda: [dataset_id, str(_home())], problems=problems,
    )  # fmt: skip
