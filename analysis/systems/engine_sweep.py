"""What if the engine ran at other settings: Seismic (Bruch et al., "Efficient Inverted
Indexes for Approximate Retrieval over Learned Sparse Representations", SIGIR 2024;
``pyseismic-lsr``, an optional extra) built once over a collection's stored vectors and
searched at several ``query_cut`` settings, each setting's quality beside its latency and
the exact scorer's.

The rule (:func:`engine_sweep`):

- Seismic is built once from the stored vectors (each item's row number its id, the
  vocabulary ids its components), with ``n_postings`` and ``max_fraction`` 1 (each posting
  list keeps at most its ``n_postings`` largest weights: the static cut
  :mod:`~lexlens.analysis.systems.engine_loss` replays), its other build settings at
  their defaults, on every core; the build time is reported;
- each query (its dense vector, as the evaluation encodes it) is searched one at a time,
  single thread, for its top 10 at every ``query_cut`` (and the one ``heap_factor``); the
  exact top 10 is :meth:`~lexlens.analysis.retrieval.scorer.Scorer.top`'s, timed the same
  way (``time.perf_counter`` around the call, the query's arrays made before; each query's
  fastest of three passes over all the queries when there are at most 1,000,
  :func:`timed_runs`);
- per setting: accuracy@10 (the share of the exact top 10 the engine returns, Seismic's
  own measure, mean over queries), nDCG@10 (ir-measures over the judgements, the code every
  evaluation measures with; none without judgements, and the note says so), the median
  latency per query, and the items lost by reason
  (:func:`~lexlens.analysis.systems.engine_loss.engine_losses`); the exact scorer's own
  row (accuracy 1 by construction, its nDCG@10, its median latency) beside them.

Seismic's README anchors the figures: SPLADE on MS MARCO (8.8M passages), single thread,
accuracy@10 90.5 % at 187 µs and 97.2 % at 531 µs per query.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from lexlens.analysis.core.metrics import measure
from lexlens.analysis.core.options import Options, integer_list, option
from lexlens.analysis.core.outputs import csv_bytes, json_bytes
from lexlens.analysis.core.results import Progress, Record, Result, internal
from lexlens.analysis.systems.engine_loss import REASONS, SEISMIC, EngineOptions, engine_losses
from lexlens.models.base import InputError

#: The engines a sweep can run (``pyseismic-lsr``'s Seismic).
SWEEP_ENGINES = (SEISMIC,)
#: The depth every figure of a sweep is at (accuracy@10, nDCG@10: Seismic's README's).
DEPTH = 10
NDCG = f"nDCG@{DEPTH}"
ACCURACY = f"accuracy@{DEPTH}"
#: The settings swept when none are given.
DEFAULT_QUERY_CUTS = (1, 2, 3, 5, 8, 13, 21)
DEFAULT_N_POSTINGS = 3500  # Seismic's own default
DEFAULT_HEAP_FACTOR = 0.9
#: Each posting list keeps at most n_postings × max_fraction weights: 1, the static cut.
MAX_FRACTION = 1.0
#: Passes over the queries timed (each query's fastest counts) when there are at most
#: FEW_QUERIES.
TIMED_RUNS = 3
FEW_QUERIES = 1_000
#: Items handed to Seismic's dataset at once.
BUILD_BATCH = 65_536
EXACT = "exact"
#: engine_sweep.csv's columns: one row per setting, the exact scorer's last.
SWEEP_COLUMNS = (
    "name",
    "engine",
    "query_cut",
    "n_postings",
    "heap_factor",
    ACCURACY,
    NDCG,
    "latency_us",
    "lost",
    "lost_relevant",
    *(f"lost_{r.replace(' ', '_')}" for r in REASONS),
)


def _query_cuts(value: tuple) -> tuple[int, ...]:
    """At least one query cut, each an integer from 1 to 100,000, none repeated (ascending)."""
    refuse = SweepOptions.option("sweep_query_cuts").refuse
    if not value or any(isinstance(c, bool) or not hasattr(c, "__index__") for c in value):
        raise refuse(value)
    cuts = tuple(int(c.__index__()) for c in value)
    if min(cuts) < 1 or max(cuts) > 100_000 or len(set(cuts)) != len(cuts):
        raise refuse(value)
    return tuple(sorted(cuts))


@dataclass(frozen=True)
class SweepOptions(Options):
    """Which engine to run at several settings, and the settings (``lexlens evaluate
    --sweep``); a setting given without ``sweep`` is refused (:func:`check_sweep`)."""

    what = "evaluate"

    sweep: str | None = option(
        None,
        "what if: build the engine over the collection's stored vectors and search it at "
        "each --sweep-query-cuts setting; accuracy@10, nDCG@10 and latency beside the exact "
        "scorer's",
        choices=SWEEP_ENGINES,
        label="What-if engine",
        widget="select",
    )
    sweep_query_cuts: tuple[int, ...] | None = option(
        None,
        "the query_cut values swept (the query's largest terms kept; default "
        + ",".join(map(str, DEFAULT_QUERY_CUTS))
        + ")",
        parse=integer_list,
        check=_query_cuts,
        metavar="CUT,CUT,…",
        label="Query cuts",
        wanted="distinct integers from 1 to 100,000, comma-separated",
    )
    sweep_n_postings: int | None = option(
        None,
        f"the largest weights each posting list keeps (Seismic's n_postings; default "
        f"{DEFAULT_N_POSTINGS:,})",
        low=1,
        high=1_000_000_000,
        label="Postings per term",
        widget="number",
    )
    sweep_heap_factor: float | None = option(
        None,
        f"Seismic's heap_factor: a block is scanned when its summary's score reaches this "
        f"share of the k-th best (default {DEFAULT_HEAP_FACTOR})",
        low=0.01,
        high=1.0,
        label="Heap factor",
        widget="number",
    )

    @property
    def query_cuts(self) -> tuple[int, ...]:
        """The query cuts swept (given, else :data:`DEFAULT_QUERY_CUTS`)."""
        return self.sweep_query_cuts or DEFAULT_QUERY_CUTS

    @property
    def n_postings(self) -> int:
        """Seismic's n_postings (given, else :data:`DEFAULT_N_POSTINGS`)."""
        return self.sweep_n_postings or DEFAULT_N_POSTINGS

    @property
    def heap_factor(self) -> float:
        """Seismic's heap_factor (given, else :data:`DEFAULT_HEAP_FACTOR`)."""
        return self.sweep_heap_factor or DEFAULT_HEAP_FACTOR


def check_sweep(options: SweepOptions) -> None:
    """Refuse options of another type, and a sweep setting given without ``--sweep``."""
    if not isinstance(options, SweepOptions):
        raise InputError(f"sweep must be SweepOptions, not {type(options).__name__}")
    if options.sweep is None:
        given = [d.flag for d in SweepOptions.declared()[1:] if getattr(options, d.name)]
        if given:
            raise InputError(f"{given[0]} applies with --sweep seismic")


def _seismic() -> Any:
    """``pyseismic-lsr``'s module, or a one-line refusal naming the extra to install."""
    try:
        import seismic  # heavy, optional: pyseismic-lsr
    except ImportError:
        raise InputError(
            "--sweep seismic needs pyseismic-lsr: pip install 'lexlens[seismic]'"
        ) from None
    return seismic


@contextlib.contextmanager
def _build_log_to_stderr() -> Iterator[None]:
    """Seismic's build log (printed by its Rust core to file descriptor 1) sent to stderr,
    so the command's own output (text or JSON) stays its own."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1 (an embedded interpreter): nothing to redirect
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


@dataclass(frozen=True)
class SweepPoint(Record):
    """One row of a sweep: the engine at one setting, or the exact scorer (``engine``
    ``exact``, accuracy 1 by construction); ``reasons``: the lost items' summary per reason
    (:func:`~lexlens.analysis.systems.engine_loss.engine_losses`)."""

    name: str
    engine: str
    query_cut: int | None
    heap_factor: float | None
    accuracy: float
    ndcg: float | None
    latency_us: float
    lost: int
    lost_relevant: int
    reasons: list[dict]


@dataclass(frozen=True)
class EngineSweep(Result):
    """An engine at several settings over one collection (see the module docstring):
    ``points`` one per setting, then the exact scorer's; ``build_seconds`` the engine's
    build; ``ndcg_note`` why nDCG@10 is absent (``None``: it is measured). A section of a
    comparison or of one system's evaluation (``engine_sweep`` in its JSON)."""

    file_stem = "engine_sweep"
    key: ClassVar[str] = "engine_sweep"
    #: The names its charts give the measures and the exact scorer's point.
    accuracy_label: ClassVar[str] = ACCURACY
    ndcg_label: ClassVar[str] = NDCG
    exact_name: ClassVar[str] = EXACT

    engine: str
    collection: str
    items: int
    queries: int
    depth: int
    n_postings: int
    heap_factor: float
    max_fraction: float
    build_seconds: float
    points: list[SweepPoint]
    ndcg_note: str | None = None
    notes: list[str] = field(default_factory=list)
    #: {setting's name: {query: [(item, score), …]}}: what the engine returned at each
    #: setting (and the exact top 10); not in the JSON
    runs: dict = internal(default_factory=dict)

    @property
    def exact(self) -> SweepPoint:
        """The exact scorer's point."""
        return next(p for p in self.points if p.engine == EXACT)

    @property
    def settings(self) -> list[SweepPoint]:
        """The engine's points, one per setting, in the order swept."""
        return [p for p in self.points if p.engine != EXACT]

    def rows(self) -> list[dict]:
        """engine_sweep.csv's rows: one per setting, the exact scorer's last."""
        out = []
        for p in self.points:
            counts = {s["reason"]: s["items"] for s in p.reasons}
            out.append(
                {
                    "name": p.name,
                    "engine": p.engine,
                    "query_cut": p.query_cut,
                    "n_postings": None if p.engine == EXACT else self.n_postings,
                    "heap_factor": p.heap_factor,
                    ACCURACY: p.accuracy,
                    NDCG: p.ndcg,
                    "latency_us": p.latency_us,
                    "lost": p.lost,
                    "lost_relevant": p.lost_relevant,
                    **{f"lost_{r.replace(' ', '_')}": counts.get(r, 0) for r in REASONS},
                }
            )
        return out

    def frame_rows(self) -> list[dict]:
        """The sweep's table (engine_sweep.csv's rows)."""
        return self.rows()

    def csv(self) -> bytes:
        """engine_sweep.csv."""
        return csv_bytes(SWEEP_COLUMNS, [[r[c] for c in SWEEP_COLUMNS] for r in self.rows()])

    def files(self) -> dict[str, bytes]:
        """engine_sweep.json, engine_sweep.csv and engine_sweep.html."""
        from lexlens.analysis.systems.report import sweep_html  # the report imports this

        return {
            "engine_sweep.json": json_bytes(self),
            "engine_sweep.csv": self.csv(),
            "engine_sweep.html": sweep_html(self).encode("utf-8"),
        }

    def section_files(self) -> dict[str, bytes]:
        """engine_sweep.csv, beside the evaluation's or the comparison's files."""
        return {"engine_sweep.csv": self.csv()}

    def html(self) -> str:
        """The sweep's charts and tables as an HTML section (inside evaluation.html)."""
        from lexlens.analysis.systems.report import sweep_section

        return sweep_section(self)

    def text(self) -> str:
        """The command's lines after the evaluation (:func:`sweep_lines`)."""
        return "\n\n" + "\n".join(sweep_lines(self))


def sweep_lines(sweep: EngineSweep) -> list[str]:
    """The command's lines: the build, one line per setting and the exact scorer's."""
    lines = [
        f"what if {sweep.engine} (n_postings {sweep.n_postings:,}, heap_factor "
        f"{sweep.heap_factor:g}) over {sweep.collection}: {sweep.items:,} items, "
        f"{sweep.queries:,} queries, built in {sweep.build_seconds:.2f} s; one query at a "
        "time, median latency"
    ]
    for p in sweep.points:
        ndcg = "–" if p.ndcg is None else f"{p.ndcg:.4f}"
        counts = ", ".join(f"{s['reason']} {s['items']}" for s in p.reasons if s["items"])
        lines.append(
            f"  {p.name:<16} {ACCURACY} {p.accuracy:.4f}  {NDCG} {ndcg:>6}  "
            f"{p.latency_us:10,.1f} µs" + (f"  lost: {counts}" if counts else "")
        )
    if sweep.ndcg_note:
        lines.append(f"  note: {sweep.ndcg_note}")
    lines += [f"  note: {n}" for n in sweep.notes]
    return lines


def _timed(call: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    out = call()
    return out, time.perf_counter() - started


def _fastest_each(calls: Mapping[str, Any], passes: int) -> tuple[dict, dict]:
    """Each call's result and its fastest time over ``passes`` passes through all the calls
    in order (a pass is the whole query set, as a benchmark's warm runs are; never one
    query repeated back to back)."""
    out, best = {}, {}
    for _ in range(passes):
        for q, call in calls.items():
            out[q], took = _timed(call)
            best[q] = min(took, best.get(q, took))
    return out, best


def timed_runs(queries: int) -> int:
    """How many passes over the queries are timed (each query's fastest counts): three up
    to :data:`FEW_QUERIES` queries, where a median over few is noisy; else one."""
    return TIMED_RUNS if queries <= FEW_QUERIES else 1


def _built(seismic: Any, collection: Any, n_postings: int) -> tuple[Any, float]:
    """Seismic built over every stored row (row numbers as ids), and its build time."""
    dataset = seismic.SeismicDataset(dim=int(collection.vocab_size))
    for start in range(0, len(collection), BUILD_BATCH):
        stop = min(len(collection), start + BUILD_BATCH)
        rows = collection.rows(start, stop)
        rows.sort_indices()
        dataset.add_documents_by_id(
            [str(r) for r in range(start, stop)],
            np.asarray(rows.indices, dtype=np.int64),
            np.asarray(rows.data, dtype=np.float32),
            np.asarray(rows.indptr, dtype=np.int64),
        )
    with _build_log_to_stderr():
        return _timed(
            lambda: seismic.SeismicIndex.build_from_dataset(
                dataset, n_postings=n_postings, max_fraction=MAX_FRACTION
            )
        )


def engine_sweep(
    collection: Any,
    vectors: Mapping[str, np.ndarray],
    qrels: Mapping[str, Mapping[str, int]] | None,
    options: SweepOptions,
    progress: Progress | None = None,
) -> EngineSweep:
    """Seismic over ``collection``'s stored vectors at each of ``options``' settings beside
    the exact scorer (see the module docstring): ``vectors`` {query: dense vector [|V|]} as
    the evaluation encodes them, ``qrels`` {query: {item: relevance}} (``None`` or empty:
    no nDCG@10, said in ``ndcg_note``)."""
    from lexlens.analysis.retrieval.scorer import scorer_for

    check_sweep(options)
    if options.sweep is None:
        raise InputError("sweep: name the engine to run (seismic)")
    if not isinstance(vectors, Mapping) or not vectors:
        raise InputError("--sweep: no queries to search")
    seismic = _seismic()
    size = int(collection.vocab_size)
    vectors = {str(q): np.asarray(v, dtype=np.float32).ravel() for q, v in vectors.items()}
    wrong = next((q for q, v in vectors.items() if v.size != size), None)
    if wrong is not None:
        raise InputError(
            f"--sweep: query {wrong!r}'s vector has {vectors[wrong].size} terms, the "
            f"collection's vocabulary {size}"
        )
    ids = [str(i) for i in collection.column("id")]
    row_of = {d: r for r, d in enumerate(ids)}
    scorer = scorer_for(collection)
    kind = seismic.get_seismic_string()
    asked = {}
    for q, v in vectors.items():
        terms = np.flatnonzero(v)
        asked[q] = (np.array([str(t) for t in terms], dtype=kind), v[terms].astype(np.float32))
    repeats = timed_runs(len(vectors))
    searched = [q for q in vectors if asked[q][0].size]  # a query with no term: not timed
    found, took = _fastest_each(
        {q: (lambda v=vectors[q]: scorer.top(v, DEPTH)) for q in searched}, repeats
    )
    exact_times = [took[q] for q in searched]
    exact = {q: [] for q in vectors}
    for q, (rows, scores) in found.items():
        exact[q] = [(ids[r], float(s)) for r, s in zip(rows, scores, strict=True) if s > 0]
    if progress:
        progress(0.1, f"exact top {DEPTH} of {len(vectors)} queries; building {SEISMIC}")
    engine, build_seconds = _built(seismic, collection, options.n_postings)
    judged = None
    if qrels:
        judged = {q: dict(qrels[q]) for q in vectors if q in qrels}
    relevant = {q: {d for d, r in (judged or {}).get(q, {}).items() if r > 0} for q in vectors}
    notes: list[str] = []

    def point(name: str, engine_name: str, cut: int | None, run: dict, times: list) -> SweepPoint:
        losses = engine_losses(
            scorer,
            vectors,
            exact,
            run,
            row_of,
            relevant,
            EngineOptions(engine=SEISMIC, query_cut=cut, n_postings=options.n_postings)
            if cut is not None
            else EngineOptions(engine=SEISMIC),
            collection.vocab,
            DEPTH,
        )
        notes.extend(n for n in losses["notes"] if n not in notes)
        ndcg = measure(run, judged, [NDCG])[0][NDCG] if judged else None
        return SweepPoint(
            name=name,
            engine=engine_name,
            query_cut=cut,
            heap_factor=None if cut is None else options.heap_factor,
            accuracy=float(losses["mean_accuracy"]),
            ndcg=ndcg,
            latency_us=float(np.median(times)) * 1e6 if times else 0.0,
            lost=int(losses["lost"]),
            lost_relevant=int(losses["lost_relevant"]),
            reasons=losses["reasons"],
        )

    points, runs = [], {}
    cuts = options.query_cuts
    for i, cut in enumerate(cuts):
        calls = {
            q: (
                lambda q=q, c=asked[q][0], w=asked[q][1], k=cut: engine.search(
                    q, c, w, DEPTH, k, options.heap_factor
                )
            )
            for q in searched
        }
        hits, took = _fastest_each(calls, repeats)
        times = [took[q] for q in searched]
        run = {q: [] for q in vectors}
        for q, found_hits in hits.items():
            run[q] = [(ids[int(d)], float(s)) for _, s, d in found_hits]
        points.append(point(f"query_cut {cut}", SEISMIC, cut, run, times))
        runs[points[-1].name] = run
        if progress:
            progress(0.2 + 0.8 * (i + 1) / len(cuts), f"query_cut {cut}: searched")
    points.append(point(EXACT, EXACT, None, exact, exact_times))
    runs[EXACT] = exact
    return EngineSweep(
        engine=SEISMIC,
        collection=str(collection.label),
        items=len(collection),
        queries=len(vectors),
        depth=DEPTH,
        n_postings=options.n_postings,
        heap_factor=options.heap_factor,
        max_fraction=MAX_FRACTION,
        build_seconds=build_seconds,
        points=points,
        ndcg_note=None
        if judged
        else f"no judgements for these queries: {NDCG} needs qrels (accuracy@10 is against "
        "the exact top 10)",
        notes=notes,
        runs=runs,
    )


def sweep_system(systems: Any, preferred: tuple[str, ...] = ()) -> Any:
    """The system whose collection and query vectors a sweep runs on: the first of
    ``preferred`` (names: the exact side of an engine's run, the baseline) ranked by Lexlens
    itself, else the first such system; refused when every system is a run or BM25."""
    from lexlens.analysis.systems.systems import LEXLENS

    own = [s for s in systems if s.kind == LEXLENS]
    if not own:
        raise InputError(
            "--sweep seismic runs over a collection Lexlens ranks: give --index (with --run, "
            "add --with-exact)"
        )
    by_name = {s.name: s for s in own}
    return next((by_name[n] for n in preferred if n in by_name), own[0])


def sweep_over(
    system: Any,
    texts: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]] | None,
    options: SweepOptions,
    query_mode: str,
    device: str | None = None,
    opened: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> EngineSweep:
    """:func:`engine_sweep` over ``system``'s collection, the queries ``texts`` ({id: text})
    encoded as that system encodes them (the evaluation's rule: its query encoder, mode and
    gate)."""
    from lexlens.analysis.systems.why import Explaining

    explaining = Explaining(device, query_mode, opened)
    collection = explaining.collection(system)[0]
    order = list(texts)
    vectors = dict(zip(order, explaining.vectors(system, [texts[q] for q in order]), strict=True))
    swept = engine_sweep(collection, vectors, qrels, options, progress)
    return replace(swept, collection=system.name)  # named as the report names the system
