"""A stored collection, and its queries, in the formats other engines index and search.

- ``anserini``: Anserini's JsonVectorCollection, ``{"id", "contents", "vector": {term:
  int}}`` per line, each weight multiplied by ``scale`` (100 by default) and rounded (terms
  that round to 0 are left out); queries as ``queries.tsv`` (``qid<TAB>`` each term repeated
  as often as its quantised weight, the form Anserini's ``-impact -pretokenized`` search
  reads) and ``queries.jsonl`` (``{"id", "vector"}``).
- ``seismic``: Seismic's JSONL, ``{"id", "content", "vector": {term: float}}`` for items and
  queries alike (weights as stored).
- ``trec-run``: the collection searched with every query (exact top ``top``), as a TREC run.

Terms are the vocabulary's tokens (word pieces as they are): the engines match them as
given. Items are streamed, so a collection of any size is exported in bounded memory;
every file is written whole or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lexlens.analysis.benchmark.retrieval import BatchScorer, encode_queries
from lexlens.analysis.collections.store import StoredIndex, open_index
from lexlens.analysis.core.gating import DEFAULT_GATE_K
from lexlens.analysis.core.outputs import check_out_dir, write_lines
from lexlens.analysis.core.results import Progress, Result, progress_part
from lexlens.models.base import Encoder, InputError

FORMATS = ("trec-run", "anserini", "seismic")
#: Anserini's integer impacts: weight × scale, rounded.
DEFAULT_SCALE = 100.0


@dataclass(frozen=True)
class ExportResult(Result):
    """What an export wrote: the format, the files and their line counts."""

    file_stem = "export"

    format: str
    out: str
    written: dict  # file name → lines written
    scale: float | None = None
    notes: list[str] = field(default_factory=list)


def _sparse(cols: np.ndarray, vals: np.ndarray, vocab: list[str], scale: float | None) -> dict:
    if scale is None:
        return {vocab[int(c)]: float(v) for c, v in zip(cols, vals, strict=True)}
    out = {}
    for c, v in zip(cols, vals, strict=True):
        q = int(round(float(v) * scale))
        if q:
            out[vocab[int(c)]] = q
    return out


def _item_lines(ix: StoredIndex, fmt: str, scale: float | None, progress) -> Iterator[str]:
    text_key = "contents" if fmt == "anserini" else "content"
    total = len(ix)
    for batch in ix.iter_batches(4096, columns=["id", "text", "captions"]):
        matrix = batch.vectors
        for i, meta in enumerate(batch.meta):
            a, b = matrix.indptr[i], matrix.indptr[i + 1]
            vector = _sparse(matrix.indices[a:b], matrix.data[a:b], ix.vocab, scale)
            text = meta.get("text") or " ".join(meta.get("captions") or [])
            yield json.dumps(
                {"id": str(meta["id"]), text_key: text, "vector": vector}, ensure_ascii=False
            )
        if progress:
            progress(batch.stop / max(total, 1), f"{batch.stop}/{total} items")


def query_vectors(
    ix: StoredIndex, queries: Mapping[str, str], query_encoder: Encoder | str | None,
    mode: str, gate_k: int, device: str | None, progress: Progress | None = None,
) -> tuple[Encoder, list[np.ndarray]]:  # fmt: skip
    """The queries' vectors in the collection's vocabulary (its own query encoder by default)."""
    from lexlens.analysis.search.queries import check_vocabulary, default_query_encoder
    from lexlens.models.registry import as_encoder

    spec = query_encoder if query_encoder is not None else default_query_encoder(ix, "text")
    encoder = as_encoder(spec, device)
    check_vocabulary(ix, encoder)
    return encoder, encode_queries(encoder, list(queries.values()), mode, gate_k, progress)


def export_index(
    index: str | Path | StoredIndex,
    fmt: str,
    out: str | Path,
    *,
    queries: str | Path | Mapping[str, str] | None = None,
    scale: float = DEFAULT_SCALE,
    top: int = 100,
    query_encoder: Encoder | str | None = None,
    mode: str = "parametric",
    gate_k: int = DEFAULT_GATE_K,
    device: str | None = None,
    progress: Progress | None = None,
) -> ExportResult:
    """Write ``index`` (and its queries: a file, a mapping, or the ones it keeps) in ``fmt``
    into the folder ``out`` (see the module docstring)."""
    from lexlens.analysis.benchmark.evaluate import stored_benchmark
    from lexlens.analysis.benchmark.trec import Problems, read_queries, run_text

    if fmt not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if not (isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0):
        raise InputError("--scale must be a positive number")
    ix = index if isinstance(index, StoredIndex) else open_index(index)
    folder = check_out_dir(out)
    if folder.resolve() == ix.path.resolve() or ix.path.resolve() in folder.resolve().parents:
        raise InputError(f"--out {folder}: inside the index folder; export elsewhere")
    notes: list[str] = []
    problems = Problems()
    if queries is None and (stored := stored_benchmark(ix)) is not None:
        queries = stored[0]
    if queries is not None and not isinstance(queries, Mapping):
        queries = read_queries(queries, problems)
    if problems.count:
        notes.append(
            f"{problems.count} malformed query lines skipped: " + "; ".join(problems.lines[:3])
        )
    if fmt == "trec-run" and not queries:
        raise InputError("a TREC run needs queries: give --queries (the collection keeps none)")
    written: dict[str, int] = {}
    item_part = progress_part(progress, 0.0, 0.7)
    if fmt != "trec-run":
        quantise = scale if fmt == "anserini" else None
        name = "docs.jsonl"
        written[name] = write_lines(folder / name, _item_lines(ix, fmt, quantise, item_part))
    if queries:
        encoder, vectors = query_vectors(
            ix, queries, query_encoder, mode, gate_k, device, progress_part(progress, 0.7, 0.85)
        )
        ids = list(queries)
        if fmt == "trec-run":
            item_ids = [str(i) for i in ix.column("id")]
            rankings = BatchScorer(ix).rank(vectors, top, progress_part(progress, 0.85, 1.0))
            run = {
                q: [(item_ids[int(r)], float(s)) for r, s in zip(k.rows, k.scores, strict=True)]
                for q, k in zip(ids, rankings, strict=True)
            }
            text = run_text(run, tag=f"lexlens-{encoder.name}")
            written["run.trec"] = write_lines(folder / "run.trec", text.splitlines())
        else:
            sparse = [
                _sparse(np.flatnonzero(v), v[np.flatnonzero(v)], ix.vocab, quantise)
                for v in vectors
            ]
            if fmt == "anserini":
                written["queries.tsv"] = write_lines(
                    folder / "queries.tsv",
                    (f"{q}\t" + " ".join(t for t, n in s.items() for _ in range(n))
                     for q, s in zip(ids, sparse, strict=True)),
                )  # fmt: skip
                written["queries.jsonl"] = write_lines(
                    folder / "queries.jsonl",
                    (json.dumps({"id": q, "vector": s}, ensure_ascii=False)
                     for q, s in zip(ids, sparse, strict=True)),
                )  # fmt: skip
            else:
                written["queries.jsonl"] = write_lines(
                    folder / "queries.jsonl",
                    (json.dumps({"id": q, "content": queries[q], "vector": s}, ensure_ascii=False)
                     for q, s in zip(ids, sparse, strict=True)),
                )  # fmt: skip
    elif fmt != "trec-run":
        notes.append("the collection keeps no queries: items only (give --queries for theirs)")
    return ExportResult(
        format=fmt, out=str(folder), written=written,
        scale=scale if fmt == "anserini" else None, notes=notes,
    )  # fmt: skip
