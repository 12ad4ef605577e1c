"""What a stored evaluation's failures teach the next training run: read back from the
folder ``lexlens evaluate --out`` wrote (``evaluation.json`` and ``run.trec``), nothing
ranked or encoded again.

- ``hard-negatives`` (``hard_negatives.jsonl``): per failing query, the items its ranking
  put above its best relevant item — every one of them is not relevant, since that item is
  the first relevant one the ranking holds — hardest first, at most ``negatives``, each
  with its rank and score as run.trec lists them (the positive's too, or the evaluation's
  exact score when the ranking does not list it). One line ``{"query", "positive", "negatives": […],
  …}``: the query, positive and hard-negatives texts sentence-transformers'
  ``mine_hard_negatives`` and the SPLADE repository's trainers read, with the ids, ranks
  and scores beside them. A relevant item beyond the ranking's depth or not retrieved is
  outranked by every item listed.
- ``expansions`` (``expansions.jsonl``): per relevant item that a failing query reached,
  the query's content words the item does not spell (the failure's ``missing_words``):
  document-expansion training data (doc2query's: the queries an item should answer).
  One line per item ``{"id", "text", "missing_words", "queries": [{"query_id", "query",
  "missing_words"}, …]}``, the words in the order the queries first miss them.

Texts come from the collection the evaluation evaluated (checked by its fingerprint): the
failures' own items from evaluation.json, the other hard negatives from the collection's
stored metadata. An item the collection does not hold (another system's run may name one)
is left out and counted in the notes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.arguments import path_argument
from lexlens.analysis.core.inputs import decode_text, load_json
from lexlens.analysis.datasets.trec import read_run
from lexlens.analysis.evaluation.result import index_evaluated
from lexlens.models.base import InputError
from lexlens.models.files import read_bytes, user_path

#: The files a training export reads from an evaluation's folder.
EVALUATION_FILE = "evaluation.json"
RUN_FILE = "run.trec"
#: The file each training format writes.
TRAINING_FILES = {"hard-negatives": "hard_negatives.jsonl", "expansions": "expansions.jsonl"}
#: The largest evaluation.json read (it is read whole).
MAX_EVALUATION_BYTES = 1024 * 1024 * 1024


@dataclass(frozen=True)
class StoredEvaluation:
    """One system's evaluation read back: its JSON document, its run as evaluated
    ({query: [(item, score), …]} best first; ``None`` for expansions, which need none) and
    where it was read."""

    document: dict
    run: dict[str, list[tuple[str, float]]] | None
    folder: Path


def read_evaluation(source: str | Path, *, with_run: bool) -> StoredEvaluation:
    """The evaluation ``lexlens evaluate --out`` wrote in folder ``source`` (or its
    evaluation.json; run.trec beside it when ``with_run``), refused in one line when it is
    none, or several systems' comparison."""
    raw = path_argument(source, "evaluation", "the folder `lexlens evaluate --out` wrote")
    path = user_path(raw, "evaluation")
    folder = path if path.is_dir() else path.parent
    file = folder / EVALUATION_FILE if path.is_dir() else path
    if path.is_dir() and not file.exists():
        other = (
            " (a comparison of several systems)" if (folder / "comparison.json").exists() else ""
        )
        raise InputError(
            f"evaluation {folder}: no {EVALUATION_FILE} there{other}: give the folder "
            "`lexlens evaluate --out` wrote for one system"
        )
    data, label = read_bytes(
        file, str(file), limit=MAX_EVALUATION_BYTES, advice="evaluate fewer queries"
    )
    try:
        document = load_json(decode_text(data, label), label)
    except json.JSONDecodeError as exc:
        raise InputError(f"{label}: not JSON ({exc.msg}, line {exc.lineno})") from None
    keys = ("index", "failures", "metrics")
    if not isinstance(document, dict) or any(k not in document for k in keys):
        raise InputError(f"{label}: not the evaluation.json of `lexlens evaluate` (one system)")
    run = None
    if with_run:
        run_file = folder / RUN_FILE
        if not run_file.exists():
            raise InputError(
                f"evaluation {folder}: no {RUN_FILE} beside {EVALUATION_FILE}: hard negatives "
                "are read from the ranking evaluated"
            )
        run = read_run(run_file)
    return StoredEvaluation(document, run, folder)


@dataclass
class TrainingLines:
    """A training export's lines and its notes."""

    lines: list[str]
    notes: list[str] = field(default_factory=list)


def _texts(ix: StoredCollection, ids: list[str]) -> dict[str, str]:
    """The stored texts of items ``ids`` (those the collection holds)."""
    row_of = {str(item): r for r, item in enumerate(ix.column("id"))}
    rows = sorted({row_of[i] for i in ids if i in row_of})
    metas = ix.meta(rows, ["id", "text", "captions"]) if rows else []
    return {str(m["id"]): str(m.get("text") or " ".join(m.get("captions") or [])) for m in metas}


def _listed_score(run: Mapping | None, query: str, relevant: Mapping) -> float:
    """The relevant item's score as run.trec lists it (its negatives' scores are read
    there), or the evaluation's exact score when the ranking does not list it."""
    rank = relevant.get("rank")
    listed = (run or {}).get(query, [])
    if rank is not None and rank <= len(listed) and listed[rank - 1][0] == relevant["id"]:
        return listed[rank - 1][1]
    return relevant["score"]


def hard_negative_lines(
    ix: StoredCollection, evaluation: StoredEvaluation, negatives: int
) -> TrainingLines:
    """``hard_negatives.jsonl``'s lines (see the module docstring)."""
    failures = evaluation.document["failures"]
    run = evaluation.run or {}
    picked: list[tuple[Mapping, list[tuple[int, str, float]]]] = []
    skipped = 0
    for f in failures:
        relevant = f.get("relevant")
        if not relevant or relevant.get("row", -1) < 0:
            skipped += 1  # no relevant item the collection holds: nothing to pair
            continue
        listed = run.get(f["query_id"], [])
        rank = relevant.get("rank")
        above = len(listed) if rank is None else min(rank - 1, len(listed))
        ranked = [(i, d, s) for i, (d, s) in enumerate(listed[:above], 1)]
        picked.append((f, ranked))
    texts = _texts(ix, [d for _, ranked in picked for _, d, _ in ranked])
    out = TrainingLines([])
    lacking = 0
    for f, ranked in picked:
        held = [(i, d, s) for i, d, s in ranked if d in texts]
        lacking += len(ranked) - len(held)
        held = held[:negatives]
        if not held:
            continue
        r = f["relevant"]
        line = {
            "query": f["query"],
            "positive": r["text"],
            "negatives": [texts[d] for _, d, _ in held],
            "query_id": f["query_id"],
            "positive_id": r["id"],
            "positive_rank": r["rank"],
            "positive_score": _listed_score(evaluation.run, f["query_id"], r),
            "negative_ids": [d for _, d, _ in held],
            "negative_ranks": [i for i, _, _ in held],
            "negative_scores": [s for _, _, s in held],
        }
        out.lines.append(json.dumps(line, ensure_ascii=False))
    if skipped:
        out.notes.append(f"{skipped} failures have no relevant item the collection holds: left out")
    if lacking:
        out.notes.append(
            f"{lacking} items ranked above a relevant one are not in the collection (no "
            "text): left out"
        )
    return out


def expansion_lines(evaluation: StoredEvaluation) -> TrainingLines:
    """``expansions.jsonl``'s lines (see the module docstring), items in the order their
    first failing query is listed."""
    items: dict[str, dict[str, Any]] = {}
    for f in evaluation.document["failures"]:
        relevant, words = f.get("relevant"), list(f.get("missing_words") or [])
        if not relevant or not words:
            continue
        entry = items.setdefault(
            str(relevant["id"]),
            {
                "id": str(relevant["id"]),
                "text": relevant["text"],
                "missing_words": [],
                "queries": [],
            },
        )
        entry["missing_words"] += [w for w in words if w not in entry["missing_words"]]
        entry["queries"].append(
            {"query_id": f["query_id"], "query": f["query"], "missing_words": words}
        )
    return TrainingLines([json.dumps(e, ensure_ascii=False) for e in items.values()])


def training_lines(
    ix: StoredCollection, evaluation: Any, fmt: str, negatives: int
) -> tuple[dict[str, Iterator[str] | list[str]], list[str]]:
    """The file ``fmt`` writes and its lines from the evaluation in ``evaluation`` (a
    folder or its evaluation.json) of ``ix``, and the notes."""
    if evaluation is None:
        raise InputError(f"a {fmt} export reads a stored evaluation: give --evaluation FOLDER")
    stored = read_evaluation(evaluation, with_run=fmt == "hard-negatives")
    index_evaluated(ix, stored.document["index"], f"{fmt} export")
    found = (
        hard_negative_lines(ix, stored, negatives)
        if fmt == "hard-negatives"
        else expansion_lines(stored)
    )
    notes = list(found.notes)
    if not found.lines:
        notes.append(f"the evaluation has no failure to learn from: {TRAINING_FILES[fmt]} is empty")
    return {TRAINING_FILES[fmt]: found.lines}, notes
