"""A stored collection, and its queries, in the formats other engines index and search.

- ``anserini``: Anserini's JsonVectorCollection, ``{"id", "contents", "vector": {term:
  int}}`` per line in ``docs.jsonl``: each weight × ``scale``, rounded half to even. A
  weight that rounds to 0 is left out, and so is a negative one (JsonVectorCollection writes
  a term ``impact`` times, so an impact below 1 is no term at all); the result's notes say
  from which weight on and how many postings that drops, and a scale that drops every one
  is refused. The queries come twice. ``queries.jsonl``, ``{"qid", "vector": {term: int}}``
  at the same scale, carries the impacts themselves (the line form of Anserini's
  JsonStringVector topic reader, JsonIntVector when the ids are integers). ``queries.tsv``,
  ``qid<TAB>`` each term repeated, is the form Anserini's ``SearchCollection -impact
  -pretokenized`` searches with (``-topicReader TsvString``; it counts a term's repeats as
  its query weight). The TSV does not grow with ``scale``: a term is repeated round(weight
  × 100) times whatever the scale, and a query whose repeats would pass 10,000 is scaled
  down as a whole. An impact score is Σ query weight × document impact, so a common factor
  on one query's weights changes its scores (Anserini's scores are about 100 × scale ×
  Lexlens's) but never its ranking.
- ``scale`` is a finite number from 1 to 1,000,000 (:class:`~.options.ExportOptions`). Below 1 an impact unit would stand for
  more than a whole unit of weight and most of a learned sparse vector rounds to 0. Above
  1e6 the integers would carry digits a float32 weight does not have (about 7 significant
  ones), while Anserini's indexing cost grows with every unit: JsonVectorCollection builds
  each document as a Java string holding each term ``impact`` times (Java strings and
  Lucene's token count per field are ints, at most 2^31 − 1). An item whose pseudo-document
  would pass 2^31 − 1 characters at the chosen scale is refused with its id.
- ``seismic``: Seismic's JSONL, ``{"id", "content", "vector": {term: float}}`` for items and
  queries alike (weights as stored).
- ``trec-run``: the collection searched with every query (exact top ``top``), as a TREC run.
- ``hard-negatives`` and ``expansions``: what a stored evaluation's failures teach the next
  training run, read back from the folder ``lexlens evaluate --out`` wrote
  (``evaluation``), nothing ranked again (:mod:`.training`).

Terms are the vocabulary's tokens (word pieces as they are): the engines match them as
given. Items are streamed, so a collection of any size is exported in bounded memory.

An export is all or nothing. Its files are written as one
:func:`~lexlens.analysis.core.outputs.file_set`: staged in a private folder inside ``out``
(the same file system), fsynced, then renamed into place together; a full disk, an
interrupt or any error removes the staging folder and leaves the previous export in ``out``
whole, never a mix of two (a ``docs.jsonl`` at one scale beside queries at another).
``lexlens-export.json`` (the result's JSON document) lists the files an export wrote: the
next export into the folder replaces them and removes the ones it does not write again. A
file of the same name as an export file that no such list names is taken for the user's:
the export is refused before any work rather than overwrite it. Any other file in ``out`` is
never touched. ``out`` may be neither the index folder nor inside it, links resolved; that
is checked before anything is created.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lexlens.analysis.collections.arguments import index_argument
from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.arguments import (
    device_argument,
    encoder_or_spec,
    path_argument,
    progress_argument,
)
from lexlens.analysis.core.inputs import load_json
from lexlens.analysis.core.outputs import check_replaceable, file_set, json_bytes
from lexlens.analysis.core.results import Progress, Result, progress_part
from lexlens.analysis.datasets.trec import Problems, read_queries, run_text
from lexlens.analysis.evaluation.selection import checked_queries
from lexlens.analysis.export.options import FORMATS, MAX_SCALE, TRAINING_FORMATS, ExportOptions
from lexlens.analysis.export.training import TRAINING_FILES, training_lines
from lexlens.analysis.retrieval.queries import QuerySpec, query_encoder_for
from lexlens.analysis.retrieval.scorer import scorer_for
from lexlens.models.base import Encoder, InputError

#: Repeats of a term in ``queries.tsv`` per unit of its weight, whatever the scale.
TSV_QUERY_SCALE = 100
#: At most this many repeats (plus rounding) on one line of ``queries.tsv``.
MAX_TSV_QUERY_TOKENS = 10_000
#: A Java int: the largest impact Anserini reads, and the longest string it builds.
JAVA_INT_MAX = 2**31 - 1
#: The list of the files an export wrote (the result's JSON document).
MANIFEST = "lexlens-export.json"
#: Every file name an export writes: the only names it replaces or removes.
EXPORT_FILES = (
    "docs.jsonl",
    "queries.tsv",
    "queries.jsonl",
    "run.trec",
    *TRAINING_FILES.values(),
)
#: Items per chunk of the impact check (their weights are read once, in float64).
_CHECK_ROWS = 8192


@dataclass(frozen=True)
class ExportResult(Result):
    """What an export wrote: the format, the files and their line counts."""

    file_stem = "lexlens-export"

    format: str
    out: str
    written: dict  # file name → lines written
    scale: float | None = None
    notes: list[str] = field(default_factory=list)
    postings: int | None = None  # anserini: stored weights of the collection
    dropped_postings: int | None = None  # anserini: of them, those that are no impact ≥ 1


@dataclass
class _Impacts:
    """What the scale does to the stored weights (the check before an Anserini export)."""

    postings: int = 0
    rounded: int = 0  # weights ≥ 0 that round to 0
    negative: int = 0
    smallest: float = math.inf  # smallest positive stored weight
    largest: float = 0.0


def _java_lengths(vocab: list[str]) -> np.ndarray:
    """Each term's length in a Java string (UTF-16 units) plus the space after it."""
    return np.array([len(t.encode("utf-16-le")) // 2 + 1 for t in vocab], dtype=np.float64)


def _check_impacts(ix: StoredCollection, scale: float, progress: Progress | None) -> _Impacts:
    """Count what rounding at ``scale`` drops; refuse a scale that drops every weight or
    makes an item too long for Anserini (a pass over the stored weights, chunk by chunk)."""
    found = _Impacts()
    lengths = _java_lengths(ix.vocab)
    n = len(ix)
    for start in range(0, n, _CHECK_ROWS):
        stop = min(n, start + _CHECK_ROWS)
        a, b = int(ix.indptr[start]), int(ix.indptr[stop])
        weights = np.asarray(ix.data[a:b], dtype=np.float64)
        cols = np.asarray(ix.indices[a:b])
        if not np.isfinite(weights).all():
            raise ix.corrupt(f"data.npy: items {start}–{stop - 1} have a NaN or infinite weight")
        if cols.size and (cols.min() < 0 or cols.max() >= ix.vocab_size):
            raise ix.corrupt(f"items {start}–{stop - 1} have vocabulary ids out of range")
        impacts = np.rint(weights * scale)
        found.postings += weights.size
        found.rounded += int(np.count_nonzero((weights >= 0) & (impacts == 0)))
        found.negative += int(np.count_nonzero(weights < 0))
        positive = weights[weights > 0]
        if positive.size:
            found.smallest = min(found.smallest, float(positive.min()))
            found.largest = max(found.largest, float(positive.max()))
        chars = np.where(impacts > 0, impacts, 0.0) * lengths[cols]
        total = np.concatenate(([0.0], np.cumsum(chars)))
        bounds = np.asarray(ix.indptr[start : stop + 1]) - a
        per_item = total[bounds[1:]] - total[bounds[:-1]]
        if per_item.size and per_item.max() > JAVA_INT_MAX:
            row = start + int(per_item.argmax())
            item = ix.meta([row], ["id"])[0]["id"]
            raise InputError(
                f"item {item}: at scale {scale:g} Anserini would index it as a "
                f"{per_item.max():,.0f}-character pseudo-document (JsonVectorCollection "
                f"writes each term `impact` times; a Java string holds at most "
                f"{JAVA_INT_MAX:,}): give a smaller scale"
            )
        if progress:
            progress(stop / max(n, 1), f"checking the impacts: {stop}/{n} items")
    if found.postings and found.rounded + found.negative == found.postings:
        if found.largest <= 0:
            raise InputError("the collection has no positive weight: no Anserini impact holds it")
        needed = 0.5 / found.largest
        hint = (
            f"give a scale above {needed:.3g}"
            if needed < MAX_SCALE
            else f"no scale up to {MAX_SCALE:,.0f} keeps one"
        )
        raise InputError(
            f"at scale {scale:g} every stored weight rounds to 0 (the largest is "
            f"{found.largest:.3g}): {hint}"
        )
    return found


def _impact_notes(found: _Impacts, scale: float) -> list[str]:
    smallest = f"the smallest stored weight is {found.smallest:.3g}"
    notes = [
        f"weights of {0.5 / scale:.3g} or less round to 0 at scale {scale:g}: "
        f"{found.rounded:,} of {found.postings:,} postings dropped ({smallest})"
    ]
    if found.negative:
        notes.append(
            f"{found.negative:,} negative weights left out (an Anserini impact repeats a "
            "term, so it cannot be below 1): Anserini's scores leave them out"
        )
    return notes


def _item_lines(
    ix: StoredCollection, fmt: str, scale: float | None, progress: Progress | None
) -> Iterator[str]:
    text_key = "contents" if fmt == "anserini" else "content"
    vocab = ix.vocab
    total = len(ix)
    for batch in ix.iter_batches(4096, columns=["id", "text", "captions"]):
        matrix = batch.vectors
        values = (
            np.rint(matrix.data.astype(np.float64) * scale) if scale is not None else matrix.data
        )
        for i, meta in enumerate(batch.meta):
            a, b = matrix.indptr[i], matrix.indptr[i + 1]
            cols, vals = matrix.indices[a:b], values[a:b]
            if scale is not None:
                keep = vals > 0
                cols, vals = cols[keep], vals[keep].astype(np.int64)
            vector = dict(zip([vocab[c] for c in cols.tolist()], vals.tolist(), strict=True))
            text = meta.get("text") or " ".join(meta.get("captions") or [])
            yield json.dumps(
                {"id": str(meta["id"]), text_key: text, "vector": vector}, ensure_ascii=False
            )
        if progress:
            progress(batch.stop / max(total, 1), f"{batch.stop}/{total} items")


def query_vectors(
    ix: StoredCollection,
    queries: Mapping[str, str],
    query_encoder: Encoder | str | None,
    device: str | None,
    options: ExportOptions,
    progress: Progress | None = None,
) -> tuple[Encoder, list[np.ndarray]]:
    """The queries' vectors in the collection's vocabulary (its own query encoder by default)."""
    encoder = query_encoder_for(ix, query_encoder, device)
    texts = list(queries.values())
    spec = QuerySpec(encoder, options.query_mode, options.gate_k)
    return encoder, spec.vectors(texts, progress)


@dataclass
class _AnseriniQueries:
    """The queries' lines in both Anserini forms, and what quantising them did."""

    jsonl: list[str]
    tsv: list[str]
    empty: int = 0  # queries left with no impact at ``scale``
    shrunk: int = 0  # queries whose TSV repeats were scaled down


def _anserini_queries(
    ids: list[str], vectors: list[np.ndarray], vocab: list[str], scale: float
) -> _AnseriniQueries:
    out = _AnseriniQueries([], [])
    for qid, vector in zip(ids, vectors, strict=True):
        cols = np.flatnonzero(vector)
        weights = vector[cols].astype(np.float64)
        impacts = np.rint(weights * scale)
        if impacts.size and impacts.max() > JAVA_INT_MAX:
            raise InputError(
                f"query {qid}: an impact of {impacts.max():,.0f} at scale {scale:g} is more "
                f"than a Java int holds ({JAVA_INT_MAX:,}): give a smaller scale"
            )
        keep = impacts > 0
        out.empty += not keep.any()
        terms = [vocab[c] for c in cols[keep].tolist()]
        vector = dict(zip(terms, impacts[keep].astype(np.int64).tolist(), strict=True))
        out.jsonl.append(json.dumps({"qid": qid, "vector": vector}, ensure_ascii=False))
        positive = weights[weights > 0]
        per_unit = float(TSV_QUERY_SCALE)
        if positive.sum() * per_unit > MAX_TSV_QUERY_TOKENS:
            per_unit = MAX_TSV_QUERY_TOKENS / float(positive.sum())
            out.shrunk += 1
        repeats = np.rint(weights * per_unit).astype(np.int64)
        words = [
            " ".join([vocab[c]] * int(r))
            for c, r in zip(cols.tolist(), repeats, strict=True)
            if r > 0
        ]
        out.tsv.append(f"{qid}\t{' '.join(words)}")
    return out


def _check_out(out: object, ix: StoredCollection) -> Path:
    """``out`` as a folder path that is neither the index folder nor inside it, links
    resolved (nothing is created)."""
    folder = Path(path_argument(out, "out", "a folder path")).expanduser()
    try:
        real, index_real = folder.resolve(), ix.path.resolve()
    except (OSError, RuntimeError) as exc:  # a loop of links
        raise InputError(f"--out {folder}: cannot follow its links ({exc})") from None
    if real == index_real or index_real in real.parents:
        raise InputError(
            f"--out {folder}: inside the index folder {ix.path} (links followed); export elsewhere"
        )
    if os.path.lexists(folder) and not folder.is_dir():
        raise InputError(f"--out {folder}: is a file, not a folder")
    return folder


def _previous_export(folder: Path) -> set[str]:
    """The export files that the list of a previous export in ``folder`` names."""
    path = folder / MANIFEST
    if not os.path.lexists(path):
        return set()
    document = None
    if path.is_file():
        try:
            with open(path, "rb") as handle:
                text = handle.read(1 << 20).decode("utf-8")
            document = load_json(text, str(path), precheck=False)
        except (OSError, ValueError, InputError):  # unreadable, not JSON, nested too deeply
            document = None
    written = document.get("written") if isinstance(document, dict) else None
    if not isinstance(written, dict) or document.get("format") not in FORMATS:
        raise InputError(
            f"--out {folder}: {MANIFEST} is not the list of a Lexlens export; move it or "
            "export elsewhere"
        )
    return {name for name in written if name in EXPORT_FILES}


def _check_targets(folder: Path, names: list[str], previous: set[str]) -> None:
    """Refuse to overwrite a file that no previous export in ``folder`` wrote."""
    if not folder.is_dir():
        return
    check_replaceable(folder, [*names, MANIFEST])
    for name in names:
        if os.path.lexists(folder / name) and name not in previous:
            raise InputError(
                f"--out {folder}: {name} is there and no {MANIFEST} says a Lexlens export "
                "wrote it; move it or export elsewhere"
            )


def _check_ids(ids: list[str], fmt: str, what: str) -> None:
    """Refuse an id that would break a line of the format (a TSV or TREC column)."""
    for one in ids:
        broken = (
            any(c.isspace() for c in one) if fmt == "trec-run" else any(c in one for c in "\t\n\r")
        )
        if broken or not one:
            rule = "no space" if fmt == "trec-run" else "no tab or line break"
            raise InputError(f"{what} id {one!r}: a {fmt} export needs ids with {rule}")


def _export_queries(
    ix: StoredCollection, queries: str | Path | Mapping[str, str] | None, fmt: str
) -> tuple[dict[str, str], list[str]]:
    """The queries to export (a file, a mapping, or the ones the collection keeps; none:
    ``{}``) and a note on the malformed lines of a file."""

    problems = Problems()
    if queries is None and (stored := ix.benchmark_files) is not None:
        queries = stored[0]
    if isinstance(queries, (str, Path)):
        queries = read_queries(queries, problems)
    elif queries is not None and not isinstance(queries, Mapping):
        raise InputError(
            "queries must be a file's path or a mapping of query id to text, not "
            + type(queries).__name__
        )
    queries = checked_queries(queries) if queries is not None else {}
    if fmt == "trec-run" and not queries:
        raise InputError("a TREC run needs queries: give --queries (the collection keeps none)")
    notes = []
    if problems.count:
        notes.append(
            f"{problems.count} malformed query lines skipped: " + "; ".join(problems.lines[:3])
        )
    return queries, notes


def _query_lines(
    ix: StoredCollection,
    queries: dict[str, str],
    vectors: list[np.ndarray],
    tag: str,
    options: ExportOptions,
    progress: Progress | None,
) -> tuple[dict[str, list[str]], list[str]]:
    """The lines of the query files of ``options.format`` and their notes."""

    ids, fmt, scale = list(queries), options.format, options.scale
    if fmt == "trec-run":
        item_ids = [str(i) for i in ix.column("id")]
        _check_ids(item_ids, fmt, "item")
        rankings = scorer_for(ix).rank(vectors, options.top, progress)
        run = {
            q: [(item_ids[int(r)], float(s)) for r, s in zip(k.rows, k.scores, strict=True)]
            for q, k in zip(ids, rankings, strict=True)
        }
        return {"run.trec": run_text(run, tag=tag).splitlines()}, []
    if fmt == "seismic":
        lines = [
            json.dumps(
                {
                    "id": q,
                    "content": text,
                    "vector": {ix.vocab[c]: float(v[c]) for c in np.flatnonzero(v).tolist()},
                },
                ensure_ascii=False,
            )
            for q, text, v in zip(ids, queries.values(), vectors, strict=True)
        ]
        return {"queries.jsonl": lines}, []
    found = _anserini_queries(ids, vectors, ix.vocab, scale)
    notes = []
    if found.empty:
        notes.append(
            f"{found.empty} queries have no impact left at scale {scale:g}: Anserini "
            "finds nothing for them"
        )
    if found.shrunk:
        notes.append(
            f"{found.shrunk} queries would repeat their terms more than "
            f"{MAX_TSV_QUERY_TOKENS:,} times in queries.tsv: scaled down as a whole "
            "(their rankings are unchanged)"
        )
    return {"queries.tsv": found.tsv, "queries.jsonl": found.jsonl}, notes


def export_index(
    index: str | Path | StoredCollection,
    out: str | Path,
    *,
    queries: str | Path | Mapping[str, str] | None = None,
    query_encoder: Encoder | str | None = None,
    evaluation: str | Path | None = None,
    device: str | None = None,
    progress: Progress | None = None,
    options: ExportOptions | None = None,
    **given: object,
) -> ExportResult:
    """Write ``index`` (and its queries: a file, a mapping, or the ones it keeps) in
    ``options.format`` into the folder ``out``, all or nothing (see the module docstring);
    a training format reads the stored ``evaluation`` of ``index`` instead (a folder
    ``lexlens evaluate --out`` wrote). The settings are ``options`` (:class:`ExportOptions`)
    or its fields as keywords."""
    options = ExportOptions.of(options, **given)
    fmt, scale = options.format, options.scale
    training = fmt in TRAINING_FORMATS
    if evaluation is not None and not training:
        raise InputError(f"--evaluation applies to {' and '.join(TRAINING_FORMATS)}, not {fmt}")
    if training and (queries is not None or query_encoder is not None):
        given_flag = "--queries" if queries is not None else "--query-encoder"
        raise InputError(f"{given_flag}: a {fmt} export reads the stored evaluation's queries")
    ix = index_argument(index)
    folder = _check_out(out, ix)
    device_argument(device)
    progress = progress_argument(progress)
    if query_encoder is not None:
        encoder_or_spec(query_encoder, "query_encoder")
    if training:
        queries, notes = {}, []
        query_lines, more = training_lines(ix, evaluation, fmt, options.negatives)
        notes += more
    else:
        queries, notes = _export_queries(ix, queries, fmt)
    ids = list(queries)
    names = {
        "trec-run": ["run.trec"],
        "anserini": ["docs.jsonl", *(["queries.tsv", "queries.jsonl"] if ids else [])],
        "seismic": ["docs.jsonl", *(["queries.jsonl"] if ids else [])],
        **{f: [TRAINING_FILES[f]] for f in TRAINING_FORMATS},
    }[fmt]
    if fmt in ("trec-run", "anserini"):
        _check_ids(ids, fmt, "query")
    previous = _previous_export(folder) if folder.is_dir() else set()
    _check_targets(folder, names, previous)

    found = None
    if fmt == "anserini":
        found = _check_impacts(ix, scale, progress_part(progress, 0.0, 0.05))
        notes += _impact_notes(found, scale)
    if not training:
        query_lines = {}
    if ids:
        encoder, vectors = query_vectors(
            ix, queries, query_encoder, device, options, progress_part(progress, 0.05, 0.2)
        )
        query_lines, more = _query_lines(
            ix,
            queries,
            vectors,
            f"lexlens-{encoder.name}",
            options,
            progress_part(progress, 0.2, 1.0),
        )
        notes += more
    elif fmt in ("anserini", "seismic"):
        notes.append("the collection keeps no queries: items only (give --queries for theirs)")

    unchanged = (
        "the previous export there is unchanged" if previous else "no file of this export was kept"
    )
    written: dict[str, int] = {}
    with file_set(folder, unchanged=unchanged) as staged:
        if fmt in ("anserini", "seismic"):
            quantise = scale if fmt == "anserini" else None
            written["docs.jsonl"] = staged.write_lines(
                "docs.jsonl", _item_lines(ix, fmt, quantise, progress_part(progress, 0.2, 1.0))
            )
        for name, lines_of in query_lines.items():
            written[name] = staged.write_lines(name, lines_of)
        for name in sorted(previous - set(names)):
            staged.remove(name)
        result = ExportResult(
            format=fmt,
            out=str(folder),
            written=written,
            scale=scale if fmt == "anserini" else None,
            notes=notes,
            postings=found.postings if found else None,
            dropped_postings=found.rounded + found.negative if found else None,
        )
        staged.write_bytes(MANIFEST, json_bytes(result))
    return result
