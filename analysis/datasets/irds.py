"""A dataset of ``ir_datasets`` that is already in the user's local cache
(``IR_DATASETS_HOME``, default ``~/.ir_datasets``): its documents, queries and judgements,
read through ``ir_datasets`` — which would otherwise download what is missing on first use.
Lexlens never lets it: while the dataset is read, any download ``ir_datasets`` starts is
stopped before it connects, and the reader says, in one line, that the id is not in the
local cache (where it looked). Its documents are checked at open (the first one read), so a
missing corpus is refused before any index folder is made; the folders ``ir_datasets``
makes on the way (at import, before a download) are removed again when they stay empty, and
its log lines are kept off the terminal."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from lexlens.analysis.core.metrics import relevance_value
from lexlens.analysis.datasets.dataset import Benchmark, pick_split
from lexlens.analysis.datasets.items import Skipped, SourceItem, id_problem
from lexlens.analysis.datasets.trec import Problems
from lexlens.models.base import InputError


class _WouldDownload(Exception):
    """ir_datasets asked the network for a file."""


def _home() -> Path:
    return Path(os.environ.get("IR_DATASETS_HOME") or Path.home() / ".ir_datasets").expanduser()


@contextlib.contextmanager
def _no_downloads() -> Iterator[None]:
    """Every download class of ir_datasets refuses to start while this is open."""
    from ir_datasets.util import download  # optional extra: irds

    def refuse(self, *args, **kwargs):
        raise _WouldDownload(getattr(self, "url", getattr(self, "uri", "a remote file")))

    names = [
        n
        for n in ("RequestsDownload", "GoogleDriveDownload", "GoogleCloudBucketStream")
        if hasattr(download, n)
    ]
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


def _folders() -> set[Path]:
    """The folders under the ir_datasets home and its temporary folder (a handful per
    dataset), to tell afterwards which ones a call made."""
    found: set[Path] = set()
    for top in (_home(), _tmp_home()):
        found.update(Path(d) for d, _, _ in os.walk(top))
        found.update(top.parents)
    return {f for f in found if f.exists()}


def _tmp_home() -> Path:
    return Path(os.environ.get("IR_DATASETS_TMP") or Path(tempfile.gettempdir()) / "ir_datasets")


@contextlib.contextmanager
def _leaves_no_folder() -> Iterator[None]:
    """Folders made inside (by ir_datasets's import or a refused download) that are still
    empty at the end are removed, deepest first; anything holding a file stays."""
    before = _folders()
    try:
        yield
    finally:
        made = sorted(_folders() - before, key=lambda p: len(p.parts), reverse=True)
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """ir_datasets's log lines (``[INFO] …``, ``[WARNING] Download failed``) kept off the
    terminal: the reader says what went wrong in its own one line."""
    logger = logging.getLogger("ir_datasets")
    from ir_datasets import log  # optional extra: irds

    log.easy().logger()  # made now, so the level set below is not reset on first use
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _refused(dataset_id: str, exc: Exception) -> InputError:
    """The one line for a dataset ir_datasets could not read: not in the local cache (it
    wanted a download, or a file is missing; several mirrors fail as one RuntimeError), or
    a cached file it cannot read."""
    mirrors = exc.args[1] if isinstance(exc, RuntimeError) and len(exc.args) > 1 else []
    failures = [e for _, e in mirrors] if isinstance(mirrors, list) else []
    if any(isinstance(e, (_WouldDownload, FileNotFoundError)) for e in [exc, *failures]):
        return InputError(
            f"irds:{dataset_id}: not in the local ir_datasets cache ({_home()}): download it "
            "with ir_datasets first (Lexlens reads only what is on this machine)"
        )
    first = (str(exc).splitlines() or [""])[0]
    return InputError(
        f"irds:{dataset_id}: ir_datasets cannot read it ({type(exc).__name__}: {first})"
    )


def open_irds(dataset_id: str, *, split: str | None = None) -> Benchmark:
    """The documents, queries and judgements of ``dataset_id`` (its split given in the id,
    as ir_datasets names them: ``beir/scifact/test``)."""
    with _leaves_no_folder():
        try:
            import ir_datasets  # optional extra: irds
        except ImportError:
            raise InputError(
                "reading an ir_datasets id needs the ir_datasets package: "
                'pip install "lexlens[irds]"'
            ) from None
        with _quiet():
            return _open(ir_datasets, dataset_id, split)


def _open(ir_datasets, dataset_id: str, split: str | None) -> Benchmark:
    try:
        dataset = ir_datasets.load(dataset_id)
    except KeyError:
        raise InputError(f"irds:{dataset_id}: no such ir_datasets id") from None
    if not (dataset.has_docs() and dataset.has_queries() and dataset.has_qrels()):
        raise InputError(f"irds:{dataset_id}: needs documents, queries and judgements")
    if split is not None:
        pick_split([dataset_id.rsplit("/", 1)[-1]], split, f"irds:{dataset_id}")
    problems = Problems()
    query_where: dict[str, str] = {}
    try:
        with _no_downloads():
            queries: dict[str, str] = {}
            for n, q in enumerate(dataset.queries_iter()):
                queries[str(q.query_id)] = str(q.text)
                if id_problem(str(q.query_id)):
                    query_where[str(q.query_id)] = f"irds:{dataset_id} queries[{n}]"
            qrels: dict[str, dict[str, int]] = {}
            for n, q in enumerate(dataset.qrels_iter()):
                grade = relevance_value(q.relevance, f"irds:{dataset_id} qrels[{n}]")
                qrels.setdefault(str(q.query_id), {})[str(q.doc_id)] = grade
            docs = dataset.docs_iter()
            next(iter(docs), None)  # the corpus is on this machine too
            close = getattr(docs, "close", None)
            if close is not None:
                close()
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001  (ir_datasets raises many kinds)
        raise _refused(dataset_id, exc) from None

    def read(found: Problems) -> Iterator[SourceItem | Skipped]:
        try:
            with _leaves_no_folder(), _quiet(), _no_downloads():
                for n, doc in enumerate(dataset.docs_iter()):
                    title = str(getattr(doc, "title", "") or "").strip()
                    body = str(getattr(doc, "text", "") or "").strip()
                    joined = f"{title} {body}".strip()
                    where = f"irds:{dataset_id}[{n}]"
                    if not joined:
                        yield Skipped(where, "empty document")
                        continue
                    yield SourceItem(str(doc.doc_id), text=joined, where=where)
        except Exception as exc:  # noqa: BLE001  (ir_datasets raises many kinds)
            raise _refused(dataset_id, exc) from None

    return Benchmark(
        kind="ir_datasets",
        label=f"irds:{dataset_id}",
        root=_home(),
        split=dataset_id.rsplit("/", 1)[-1],
        splits=[dataset_id.rsplit("/", 1)[-1]],
        queries=queries,
        qrels=qrels,
        read_items=read,
        fingerprint_parts=lambda: [dataset_id, str(_home())],
        problems=problems,
        query_where=lambda qid: query_where.get(qid, f"irds:{dataset_id}"),
    )
