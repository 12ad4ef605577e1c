"""Which systems a comparison holds, and each one evaluated on the same queries and judgements.

A *system* is one ranking of every query of a benchmark:

- a stored collection searched exactly by Lexlens (its own query encoder, or one given, at
  a query gate ``gate_k``): several collections of the same benchmark (two encoders), or one
  collection with two query gates, two document gates or two query encoders. A document
  gate ``doc_gate_k`` re-gates the stored document vectors exactly, without encoding them
  again (:func:`~lexlens.analysis.compare.regate.regated_index`: each item keeps the top-k
  of its stored weights plus its own tokens, as indexing at that gate keeps them; a k
  larger than the stored gate is refused);
- a run from another engine (TREC format, a mapping, or a results frame such as a
  PyTerrier pipeline returns), read against a collection: the
  collection gives the queries, the judgements and the item texts; the run is explained by
  its ranks and its own scores only (its scoring is not decomposed);
- BM25 computed by Lexlens over the first collection's item texts (``bm25``: its
  :class:`~lexlens.analysis.systems.bm25.Bm25Options`; bm25s's scores, each decomposed into
  its query terms: :mod:`lexlens.analysis.systems.bm25`), named by its parameters.

Which systems :func:`systems_of` makes of what is given: with no run, one system per
collection, gate or query encoder (only one of the three may vary); with runs, one system
per run over the first collection, and the collection's own ranking joins them when a
collection, gate or query encoder varies or ``with_exact`` asks for it; BM25, when asked,
follows the collections, before the runs. A run is named by
``names`` in order (default: its file's stem); a Lexlens system by its collection, plus the
query gate ("query gate k=16"), document gate ("doc gate k=64") or query encoder that varies.

Every system is evaluated with :func:`~lexlens.analysis.evaluation.evaluate.evaluate` on the
same queries and judgements (given, or the first collection's own): the same judged queries
in the same order, so their per-query values pair up. A judged query a run does not list is
*missing* from it: named and counted, and scored 0 in every measure, as trec_eval ``-c``
and ir-measures score it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.arguments import index_argument
from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.compare.regate import check_regate, regated_index
from lexlens.analysis.core.gating import GATE_K
from lexlens.analysis.core.metrics import checked_qrels, is_results_frame, ranked_run
from lexlens.analysis.core.results import Progress, Record, progress_part
from lexlens.analysis.datasets.trec import Problems, read_qrels, read_queries, read_run
from lexlens.analysis.evaluation.evaluate import evaluate
from lexlens.analysis.evaluation.options import EvaluationOptions
from lexlens.analysis.evaluation.result import Evaluation
from lexlens.analysis.evaluation.selection import checked_queries
from lexlens.analysis.systems.bm25 import Bm25Options, bm25_run, bm25s_module, check_texts
from lexlens.analysis.systems.options import MAX_SYSTEMS
from lexlens.models.base import InputError

#: A system's kinds.
LEXLENS = "lexlens"
RUN = "run"
BM25 = "bm25"


@dataclass(frozen=True)
class System(Record):
    """One system: its name, kind, the collection it is evaluated against, its query gate and
    encoder and its document gate (a Lexlens system; ``None``: the stored vectors as built),
    or its run (a file's path; a mapping given through the API stays out of the JSON
    document)."""

    name: str
    kind: str
    index: str  # the collection's folder
    gate_k: int | None = None
    query_encoder: str | None = None
    run: str | None = None
    #: the run given as a mapping (API), not in the JSON document
    run_mapping: Mapping | None = field(default=None, repr=False, compare=False)
    #: a BM25 system's parameters and tokenizer (:meth:`Bm25Options.parameters`)
    bm25: dict | None = None
    doc_gate_k: int | None = None

    def to_dict(self) -> dict:
        """The JSON document: every field but the run mapping (and ``bm25`` but for BM25)."""
        document = super().to_dict()
        document.pop("run_mapping", None)
        if self.bm25 is None:
            document.pop("bm25", None)
        return document


@dataclass(frozen=True)
class SystemsSpec(Record):
    """What a comparison is given: collections, runs and their names, gates, query
    encoders (see the module docstring for the systems made of them)."""

    indexes: Sequence[Any]
    runs: Sequence[Any] = ()
    names: Sequence[str] = ()
    gate_ks: Sequence[int] = ()
    query_encoders: Sequence[str] = ()
    with_exact: bool = False
    bm25: Bm25Options | None = None
    doc_gate_ks: Sequence[int] = ()


def _label(ix: StoredCollection) -> str:
    return ix.path.name or str(ix.path)


def _run_name(run: Any, i: int) -> str:
    return Path(run).stem if isinstance(run, (str, Path)) else f"run{i + 1}"


def _sequence(value: Any, name: str) -> list:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise InputError(f"{name} must be a list, not {type(value).__name__}")
    return list(value)


def check_spec(spec: Any) -> None:
    """Refuse a spec that is not a :class:`SystemsSpec`, or a field of the wrong type,
    naming the field."""

    if not isinstance(spec, SystemsSpec):
        raise InputError(f"spec must be a SystemsSpec, not {type(spec).__name__}")
    _sequence(spec.indexes, "indexes")
    for i, run in enumerate(_sequence(spec.runs, "runs")):
        if not isinstance(run, (str, Path, Mapping)) and not is_results_frame(run):
            raise InputError(
                f"runs[{i}] must be a TREC file's path, a mapping or a results frame, not "
                f"{type(run).__name__}"
            )
    for field_name in ("names", "query_encoders"):
        for i, value in enumerate(_sequence(getattr(spec, field_name), field_name)):
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"{field_name}[{i}] must be a non-empty text, not {value!r}")
    for value in _sequence(spec.gate_ks, "gate_ks"):
        GATE_K.check(value)
    for value in _sequence(spec.doc_gate_ks, "doc_gate_ks"):
        if isinstance(value, bool) or not isinstance(value, int) or value < -1:
            raise InputError(
                f"doc gate k must be -1 (every stored weight), 0 (the items' own tokens only) "
                f"or a positive count, not {value!r}"
            )
    if not isinstance(spec.with_exact, bool):
        raise InputError(f"with_exact must be True or False, not {spec.with_exact!r}")
    if spec.bm25 is not None and not isinstance(spec.bm25, Bm25Options):
        raise InputError(f"bm25 must be Bm25Options (or None), not {type(spec.bm25).__name__}")


def systems_of(spec: SystemsSpec, default_gate: int) -> list[System]:
    """The systems ``spec`` describes (see the module docstring); refused in one line when
    more than one of collections, gates and query encoders vary, a name is given twice, a
    run has no name left, or there are more than :data:`MAX_SYSTEMS`."""
    check_spec(spec)
    if isinstance(default_gate, bool) or not isinstance(default_gate, int):
        raise InputError(f"default_gate must be a gate k (an integer), not {default_gate!r}")
    indexes = [index_argument(ix, "index") for ix in spec.indexes]
    if not indexes:
        raise InputError("index: give at least one stored collection")
    varying = [
        n
        for n, v in (
            ("--index", indexes),
            ("--gate-k", spec.gate_ks),
            ("--doc-gate-k", spec.doc_gate_ks),
            ("--query-encoder", spec.query_encoders),
        )
        if len(v) > 1
    ]
    if len(varying) > 1:
        raise InputError(
            f"{' and '.join(varying)} are each given more than once: vary one of them at a time"
        )
    if len(spec.names) > len(spec.runs):
        raise InputError(f"--name is given {len(spec.names)} times for {len(spec.runs)} runs")
    gates = list(spec.gate_ks) or [default_gate]
    encoders = list(spec.query_encoders) or [None]
    doc_gates: list[int | None] = list(spec.doc_gate_ks) or [None]
    for ix in indexes:
        for doc_gate in doc_gates:
            if doc_gate is not None:
                check_regate(ix, doc_gate)
    systems: list[System] = []
    if not spec.runs or varying or spec.with_exact:
        for ix in indexes:
            for gate_k in gates:
                for encoder in encoders:
                    for doc_gate in doc_gates:
                        name = _label(ix)
                        if len(gates) > 1:
                            name += f" query gate k={gate_k}"
                        if len(doc_gates) > 1 or doc_gate is not None:
                            name += f" doc gate k={doc_gate}"
                        if len(encoders) > 1:
                            name += f" {encoder}"
                        systems.append(
                            System(
                                name,
                                LEXLENS,
                                str(ix.path),
                                gate_k,
                                encoder,
                                doc_gate_k=doc_gate,
                            )
                        )
    if spec.bm25 is not None:
        check_texts(indexes[0])
        bm25s_module()
        bm25 = spec.bm25.parameters()
        first = str(indexes[0].path)
        systems.append(System(spec.bm25.name, BM25, first, gates[0], encoders[0], bm25=bm25))
    for i, run in enumerate(spec.runs):
        name = spec.names[i].strip() if i < len(spec.names) else _run_name(run, i)
        mapping = ranked_run(run) if is_results_frame(run) else None
        mapping = run if isinstance(run, Mapping) else mapping
        path = None if mapping is not None else str(run)
        systems.append(
            System(
                name or _run_name(run, i),
                RUN,
                str(indexes[0].path),
                gates[0],
                encoders[0],
                path,
                mapping,
            )
        )
    if len(systems) > MAX_SYSTEMS:
        raise InputError(f"{len(systems)} systems: at most {MAX_SYSTEMS} are compared at once")
    names = [s.name for s in systems]
    clash = {n for n in names if names.count(n) > 1}
    if clash:  # two collections in folders of one name: their paths tell them apart
        systems = [
            replace(s, name=s.index) if s.kind == LEXLENS and s.name in clash else s
            for s in systems
        ]
        names = [s.name for s in systems]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise InputError(
            f"two systems are named {twice!r}: a system is given twice, or a run's name is "
            "taken (name the runs with --name)"
        )
    return systems


@dataclass(frozen=True)
class Benchmark:
    """The queries and judgements every system is evaluated on, and the notes of reading
    them (malformed lines)."""

    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    notes: list[str] = field(default_factory=list)


def read_benchmark(first: StoredCollection, queries: Any, qrels: Any) -> Benchmark:
    """The queries and judgements given (files or mappings), else those ``first`` keeps."""

    for value, name in ((queries, "queries"), (qrels, "qrels")):
        if value is not None and not isinstance(value, (str, Path, Mapping)):
            raise InputError(
                f"{name} must be a file's path or a mapping (or None), not {type(value).__name__}"
            )

    stored = first.benchmark_files
    if (queries is None or qrels is None) and stored is None:
        raise InputError(
            f"{first.label} keeps no queries and judgements: give --queries and --qrels"
        )
    problems = Problems()
    if not isinstance(queries, Mapping):
        queries = read_queries(queries if queries is not None else stored[0], problems)
    if not isinstance(qrels, Mapping):
        qrels = read_qrels(qrels if qrels is not None else stored[1], problems)
    notes = []
    if problems.count:
        notes.append(f"{problems.count} malformed lines skipped: " + "; ".join(problems.lines[:5]))

    return Benchmark(checked_queries(queries), checked_qrels(qrels), notes)


def read_system_run(system: System) -> tuple[dict[str, list[tuple[str, float]]], list[str]]:
    """A run system's ranking ({query: [(item, score), …]}) and the notes of reading it."""
    if system.run_mapping is not None:
        return ranked_run(system.run_mapping), []
    problems = Problems()
    run = read_run(system.run, problems)
    notes = []
    if problems.count:
        notes.append(
            f"{system.name}: {problems.count} malformed run lines skipped: "
            + "; ".join(problems.lines[:5])
        )
    return run, notes


def collection_key(system: System) -> str:
    """What names the collection a system ranks: its folder, with its document gate when it
    re-gates the stored vectors (two document gates of one folder are two collections)."""
    if system.doc_gate_k is None:
        return system.index
    return f"{system.index}#doc_gate_k={system.doc_gate_k}"


def system_collection(
    system: System, opened: dict[str, StoredCollection], progress: Progress | None = None
) -> StoredCollection:
    """The collection ``system`` ranks: its folder opened once, re-gated at its document
    gate from the stored vectors (no encoder), each kept in ``opened`` by
    :func:`collection_key`."""
    key = collection_key(system)
    if key not in opened:
        base = opened.get(system.index) or index_argument(system.index, "index")
        opened[system.index] = base
        if system.doc_gate_k is not None and system.doc_gate_k != base.gate_k:
            opened[key] = regated_index(base, system.doc_gate_k, None, progress)
        else:
            opened[key] = base
    return opened[key]


@dataclass(frozen=True)
class Evaluated:
    """One system evaluated: its evaluation, and the judged queries its run does not list."""

    system: System
    evaluation: Evaluation
    missing: list[str]


def evaluate_each(
    systems: Sequence[System],
    benchmark: Benchmark,
    evaluation: EvaluationOptions,
    device: str | None,
    progress: Progress | None,
    opened: Mapping[str, StoredCollection] | None = None,
) -> list[Evaluated]:
    """Every system evaluated on ``benchmark`` (each with its own gates and query encoder);
    a collection in ``opened`` (by :func:`collection_key`) is not opened again."""
    opened = dict(opened or {})
    out: list[Evaluated] = []
    for i, system in enumerate(systems):
        part = progress_part(progress, i / len(systems), (i + 1) / len(systems), f"{system.name}: ")
        run = None
        notes: list[str] = []
        if system.kind == RUN:
            run, notes = read_system_run(system)
        if system.kind == BM25:
            ix = (opened or {}).get(system.index) or index_argument(system.index)
            options = Bm25Options.from_parameters(system.bm25)
            judged = {q: t for q, t in benchmark.queries.items() if q in benchmark.qrels}
            run, notes = bm25_run(ix, judged, options, evaluation.top)
        result = evaluate(
            system_collection(system, opened),
            benchmark.queries,
            benchmark.qrels,
            run=run,
            query_encoder=system.query_encoder,
            device=device,
            progress=part,
            options=replace(evaluation, gate_k=system.gate_k),
        )
        order = [q["id"] for q in result.metrics["per_query"]]
        missing = [q for q in order if run is not None and not run.get(q)]
        if notes:
            result = replace(result, notes=[*result.notes, *notes])
        out.append(Evaluated(system, result, missing))
    return out
