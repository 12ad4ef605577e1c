"""The Evaluation page's *several systems* mode: stored collections (with their gates and
query encoders), BM25 over the first collection's texts, and uploaded runs compared on one
benchmark — the significance table, the
per-query delta chart, the largest wins and losses, and the why of a chosen query side by
side.

Thin: the numbers are a :class:`~lexlens.analysis.systems.result.SystemsComparison` from
:func:`~lexlens.analysis.systems.comparison.compare_systems` (what ``lexlens evaluate`` with
several systems prints with ``--json``), computed as a job; the widgets are drawn from
:class:`~lexlens.analysis.systems.options.ComparisonOptions` and
:class:`~lexlens.analysis.evaluation.options.EvaluationOptions`; the downloads are its files.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st

from lexlens.analysis.collections.store import benchmark_files
from lexlens.analysis.collections.workspace import list_collections
from lexlens.analysis.evaluation.options import EvaluationOptions
from lexlens.analysis.systems.bm25 import Bm25Options
from lexlens.analysis.systems.comparison import compare_systems
from lexlens.analysis.systems.engine_loss import ENGINES, EngineOptions
from lexlens.analysis.systems.engine_sweep import (
    DEFAULT_HEAP_FACTOR,
    DEFAULT_N_POSTINGS,
    DEFAULT_QUERY_CUTS,
    SWEEP_ENGINES,
    SweepOptions,
)
from lexlens.analysis.systems.options import ComparisonOptions
from lexlens.analysis.systems.result import SystemsComparison
from lexlens.analysis.systems.systems import SystemsSpec, systems_of
from lexlens.app.runtime import state
from lexlens.app.runtime.access import server_spec
from lexlens.app.views.systems_results import show_comparison
from lexlens.app.views.widgets import option_widget
from lexlens.models import LexlensError

MODES = ["One system", "Several systems"]
MODE_KEY = "eval_systems_mode"
#: The comparison's own widgets' keys (kept across pages and in its run).
KEYS = {
    "collections": "sys_collections",
    "gates": "sys_gates",
    "doc_gates": "sys_doc_gates",
    "encoders": "sys_encoders",
    "names": "sys_names",
    "with_exact": "sys_with_exact",
    "bm25": "sys_bm25",
    "bm25_k1": "sys_bm25_k1",
    "bm25_b": "sys_bm25_b",
    "bm25_method": "sys_bm25_method",
    "top": "sys_top",
    "query_mode": "sys_query_mode",
    "baseline": "sys_baseline",
    "all_pairs": "sys_all_pairs",
    "correction": "sys_correction",
    "test": "sys_test",
    "significance": "sys_significance",
    "resamples": "sys_resamples",
    "explain": "sys_explain",
    "seed": "sys_seed",
    "engine": "sys_engine",
    "query_cut": "sys_query_cut",
    "n_postings": "sys_n_postings",
    "prune_ratio": "sys_prune_ratio",
    "scale": "sys_scale",
    "sweep": "sys_sweep",
    "sweep_query_cuts": "sys_sweep_query_cuts",
    "sweep_n_postings": "sys_sweep_n_postings",
    "sweep_heap_factor": "sys_sweep_heap_factor",
}
COMPARISON = ("baseline", "correction", "test", "significance", "resamples", "explain", "seed")
#: The BM25 widgets: its parameters (bm25s's), shown when BM25 is added as a system.
BM25 = ("bm25_k1", "bm25_b", "bm25_method")
#: The engine's widgets: which engine made the uploaded run and its declared pruning.
ENGINE = ("engine", "query_cut", "n_postings", "prune_ratio", "scale")
NO_ENGINE = "(not named)"
NO_SWEEP = "(no sweep)"


def _split(text: str) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _spec(paths: list[str], runs: list, values: dict) -> SystemsSpec:
    """The systems the widgets describe (gates checked by their declaration; a typed query
    encoder held to the data roots as every spec a page is given)."""
    gate = EvaluationOptions.option("gate_k")
    return SystemsSpec(
        indexes=paths,
        runs=runs,
        names=_split(values["names"]),
        gate_ks=[gate.from_text(g) for g in _split(values["gates"])],
        doc_gate_ks=[gate.from_text(g) for g in _split(values.get("doc_gates", ""))],
        query_encoders=[server_spec(e, "Query encoder") for e in _split(values["encoders"])],
        with_exact=bool(values["with_exact"]),
        bm25=Bm25Options.of(**{k: values[k] for k in BM25}) if values.get("bm25") else None,
    )


def _engine(values: dict) -> EngineOptions:
    """The engine the widgets name (none: no reasons for a run's lost items)."""
    given = {k: values.get(k) for k in ENGINE}
    given["engine"] = None if given["engine"] in (None, NO_ENGINE) else given["engine"]
    return EngineOptions.of(**given)


def _engine_widgets(values: dict) -> None:
    """Which engine made the run, and its pruning: each item it lost gets its reason."""
    with st.expander("The engine that made a run (why it lost items of the exact top 10)"):
        cols = st.columns(5)
        declared = EngineOptions.option("engine")
        values["engine"] = cols[0].selectbox(
            declared.label,
            [NO_ENGINE, *ENGINES],
            key=state.kept(KEYS["engine"], NO_ENGINE),
            help=declared.spec.help,
        )
        for i, name in enumerate(ENGINE[1:], 1):
            declared = EngineOptions.option(name)
            kind = declared.kind
            values[name] = cols[i].number_input(
                declared.label,
                min_value=kind(declared.spec.low),
                max_value=kind(declared.spec.high),
                value=None,
                key=state.kept(KEYS[name], None),
                help=declared.spec.help,
            )


def _sweep(values: dict) -> SweepOptions:
    """The what-if sweep the widgets ask for (none: no sweep)."""
    if values.get("sweep") in (None, NO_SWEEP):
        return SweepOptions()
    cuts = SweepOptions.option("sweep_query_cuts").from_text(values["sweep_query_cuts"] or "")
    return SweepOptions.of(
        sweep=values["sweep"],
        sweep_query_cuts=cuts,
        sweep_n_postings=values["sweep_n_postings"],
        sweep_heap_factor=values["sweep_heap_factor"],
    )


def _sweep_widgets(values: dict) -> None:
    """What if the engine ran at other settings: which engine, its query cuts, its build's
    postings per term and its heap factor (built once over the exact system's collection)."""
    with st.expander(
        "What if: run Seismic itself at several settings (accuracy@10, nDCG@10, "
        "latency beside the exact scorer)"
    ):
        cols = st.columns([1, 2, 1, 1])
        declared = SweepOptions.option("sweep")
        values["sweep"] = cols[0].selectbox(
            declared.label,
            [NO_SWEEP, *SWEEP_ENGINES],
            key=state.kept(KEYS["sweep"], NO_SWEEP),
            help=declared.spec.help,
        )
        declared = SweepOptions.option("sweep_query_cuts")
        values["sweep_query_cuts"] = cols[1].text_input(
            "Query cuts (comma-separated)",
            key=state.kept(KEYS["sweep_query_cuts"], ", ".join(map(str, DEFAULT_QUERY_CUTS))),
            help=declared.spec.help,
        )
        for where, name, default in (
            (cols[2], "sweep_n_postings", DEFAULT_N_POSTINGS),
            (cols[3], "sweep_heap_factor", DEFAULT_HEAP_FACTOR),
        ):
            declared = SweepOptions.option(name)
            kind = declared.kind
            values[name] = where.number_input(
                declared.label,
                min_value=kind(declared.spec.low),
                max_value=kind(declared.spec.high),
                key=state.kept(KEYS[name], default),
                help=declared.spec.help,
            )
        st.caption(
            "Seismic (pyseismic-lsr) is built once over the stored vectors of the collection "
            "Lexlens ranks exactly (the one an uploaded run is paired with, else the "
            "baseline's, else the first), then searched one query at a time at each query "
            "cut; the exact scorer is timed the same way."
        )


def _options(values: dict) -> tuple[EvaluationOptions, ComparisonOptions]:
    comparison = {k: values[k] for k in COMPARISON}
    comparison["baseline"] = (values["baseline"] or "").strip() or None
    return (
        EvaluationOptions.of(top=values["top"], query_mode=values["query_mode"]),
        ComparisonOptions.of(all_pairs=bool(values["all_pairs"]), **comparison),
    )


def _written(folder: Path, uploads: list[tuple[str, bytes]], default: str) -> list[str]:
    """Uploaded files written into ``folder`` (one subfolder each: names may repeat)."""
    files = []
    for i, (name, data) in enumerate(uploads):
        path = folder / str(i) / (Path(name).name or default)
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        files.append(str(path))
    return files


def _work(paths, runs, benchmark, values, device):
    """The comparison, for the job: uploaded runs (and queries and judgements, when given)
    go to a temporary folder first."""

    def work(progress):
        evaluation, options = _options(values)
        with tempfile.TemporaryDirectory(prefix="lexlens-systems-") as tmp:
            files = _written(Path(tmp) / "runs", runs, "run.trec")
            given = {k: _written(Path(tmp) / k, v, k)[0] for k, v in benchmark.items() if v}
            systems = systems_of(_spec(paths, files, values), evaluation.gate_k)
            return compare_systems(
                systems,
                queries=given.get("queries"),
                qrels=given.get("qrels"),
                device=None if device == "auto" else device,
                progress=progress,
                evaluation=evaluation,
                options=options,
                engine=_engine(values),
                sweep=_sweep(values),
            )

    return work


def _benchmark_uploads() -> dict[str, list[tuple[str, bytes]]]:
    """Queries and judgements uploaded for the comparison (none: the first collection's)."""
    with st.expander("Other queries and judgements (default: the first collection's own)"):
        b1, b2 = st.columns(2)
        queries = b1.file_uploader(
            "Queries (BEIR queries.jsonl or qid<TAB>text)",
            type=["jsonl", "tsv", "txt"],
            key="sys_queries",
        )
        qrels = b2.file_uploader(
            "Judgements (TREC or BEIR qrels)", type=["tsv", "txt", "qrels"], key="sys_qrels"
        )
    return {
        "queries": state.remembered_uploads("sys_queries", [queries] if queries else None)[:1],
        "qrels": state.remembered_uploads("sys_qrels", [qrels] if qrels else None)[:1],
    }


def _form(cards: list[dict]) -> tuple[dict, list, list[str]]:
    """The widgets: collections, gates, encoders, runs and their names, the options."""
    names = [c["name"] for c in cards]
    c1, c2 = st.columns([3, 2])
    chosen = c1.multiselect(
        "Collections (one system each; the first keeps the queries and judgements)",
        names,
        key=state.kept(KEYS["collections"], names[:1]),
    )
    values = {
        "gates": c2.text_input(
            "Query gates (comma-separated, e.g. 768, 16)", key=state.kept(KEYS["gates"], "")
        ),
        "doc_gates": c2.text_input(
            "Document gates (comma-separated, re-gated from the stored vectors, e.g. 64, 16)",
            key=state.kept(KEYS["doc_gates"], ""),
        ),
        "encoders": c2.text_input(
            "Query encoders (comma-separated; empty: the collection's)",
            key=state.kept(KEYS["encoders"], ""),
        ),
    }
    r1, r2 = st.columns([3, 2])
    upload = r1.file_uploader(
        "Runs of other engines (TREC)",
        type=["trec", "txt", "run"],
        accept_multiple_files=True,
        key="sys_runs",
    )
    runs = state.remembered_uploads("sys_runs", upload or None)
    values["names"] = r2.text_input(
        "Run names (comma-separated, in upload order)", key=state.kept(KEYS["names"], "")
    )
    values["with_exact"] = r2.toggle(
        "With runs: the collection's exact ranking too", key=state.kept(KEYS["with_exact"], False)
    )
    b1, b2, b3, b4 = st.columns([2, 1, 1, 1])
    values["bm25"] = b1.toggle(
        "BM25 (bm25s) over the first collection's texts, its own terms explaining it",
        key=state.kept(KEYS["bm25"], False),
    )
    for where, name in zip((b2, b3, b4), BM25, strict=True):
        values[name] = option_widget(
            Bm25Options, name, KEYS[name], where=where, disabled=not values["bm25"]
        )
    with st.expander("Tests, correction and how the queries are encoded"):
        cols = st.columns(4)
        for i, name in enumerate(
            ("correction", "test", "significance", "resamples", "explain", "seed", "all_pairs")
        ):
            values[name] = option_widget(ComparisonOptions, name, KEYS[name], where=cols[i % 4])
        values["baseline"] = cols[3].text_input(
            "Baseline (a system's name; empty: the first)", key=state.kept(KEYS["baseline"], "")
        )
        values["top"] = option_widget(EvaluationOptions, "top", KEYS["top"], where=cols[0])
        values["query_mode"] = option_widget(
            EvaluationOptions, "query_mode", KEYS["query_mode"], where=cols[1]
        )
    _engine_widgets(values)
    _sweep_widgets(values)
    paths = [next(c["path"] for c in cards if c["name"] == n) for n in chosen]
    return values, runs, paths


def show_systems(cards: list[dict]) -> None:
    """The page's mode switch; in *several systems* mode, the whole comparison (then the
    page stops: the one-system evaluation below is not drawn)."""
    mode = st.radio("Systems", MODES, key=state.kept(MODE_KEY, MODES[0]), horizontal=True)
    if mode != MODES[1]:
        return
    st.caption(
        "Two or more systems on one benchmark (the first collection's queries and "
        "judgements, or uploaded ones): several "
        "collections, one collection at several query or document gates or with several query "
        "encoders, "
        "BM25 over the collection's texts, or uploaded runs. Each is compared with the baseline: Δ with a 95% bootstrap "
        "interval, paired t, Wilcoxon and randomization tests (corrected), Cohen's d, "
        "wins/ties/losses, URisk/TRisk (GeoRisk with three or more), and why."
    )
    values, runs, paths = _form(cards)
    benchmark = _benchmark_uploads()
    inputs = {MODE_KEY: mode, **{KEYS[k]: st.session_state.get(KEYS[k]) for k in KEYS}}
    uploads = {f"sys_{k}": v for k, v in {"runs": runs, **benchmark}.items() if v}
    if st.button("Compare", type="primary"):
        try:
            evaluation, _ = _options(values)
            _engine(values)
            _sweep(values)
            if bool(benchmark["queries"]) != bool(benchmark["qrels"]):
                raise LexlensError("upload both the queries and the judgements, or neither")
            spec = _spec(paths, [name for name, _ in runs], values)
            systems = systems_of(spec, evaluation.gate_k)
            if len(systems) < 2:
                raise LexlensError(
                    "choose two or more systems: collections, gates, encoders, BM25 or runs"
                )
            device = st.session_state.get("device", "auto")
            summary = "compare " + " / ".join(s.name for s in systems)
            state.start_job(
                "evaluation",
                summary,
                inputs,
                uploads,
                _work(paths, runs, benchmark, values, device),
            )
        except LexlensError as exc:
            st.error(str(exc))
    result, job, status = state.job_outcome("evaluation", SystemsComparison, inputs, uploads)
    if not state.show_job_state(job, status, "Comparing", "comparison") and result is not None:
        show_comparison(result)
    elif result is None and status == "other":
        st.info("The inputs changed since the comparison in this page's URL: press **Compare**.")
    st.stop()


def _benchmark_bytes(card: dict) -> bytes | None:
    """The queries and judgements a collection keeps, as bytes (None: it keeps none)."""
    parts = benchmark_files(Path(card["path"]))
    if parts is None:
        return None
    return b"\0".join(p.read_bytes() for p in parts)


def systems_link() -> None:
    """On the Compare page: when its collections A and B are two collections that keep the
    same queries and judgements, a button that opens them on the Evaluation page as two
    systems (significance, where they differ, why)."""

    names = st.session_state.get("compare_index_a"), st.session_state.get("compare_index_b")
    cards = {c["name"]: c for c in list_collections() if "error" not in c}
    if names[0] == names[1] or not all(n in cards for n in names):
        return
    kept = [_benchmark_bytes(cards[n]) for n in names]
    if kept[0] is None or kept[0] != kept[1]:
        return
    st.caption(f"{names[0]} and {names[1]} keep the same queries and judgements.")
    if st.button("Compare them as systems on the Evaluation page", key="compare_systems_link"):
        st.session_state[MODE_KEY] = MODES[1]
        st.session_state[KEYS["collections"]] = list(names)
        state.fresh_mode("evaluation", MODES[1])  # no earlier comparison over these two
        st.switch_page("app_pages/evaluation.py")
