"""Lexlens as PyTerrier stages, on the packaged BEIR sample indexed with splade-tiny:
``pt.Experiment`` with two ``LexlensRetriever``s gives ``lexlens evaluate``'s two systems'
measures, the retriever's ranking is ``run.trec``'s line for line, ``LexlensExplain`` adds
the encoder's words to another system's hits, and a results frame is read as a run."""

from __future__ import annotations

import subprocess
import sys

import ir_measures
import numpy as np
import pytest

pt = pytest.importorskip("pyterrier")

from lexlens.analysis.collections.indexing import index_collection  # noqa: E402
from lexlens.analysis.collections.store import open_index  # noqa: E402
from lexlens.analysis.core.samples import sample_benchmark  # noqa: E402
from lexlens.analysis.datasets.trec import read_qrels, read_queries  # noqa: E402
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark  # noqa: E402
from lexlens.analysis.evaluation.result import MEASURES  # noqa: E402
from lexlens.analysis.systems.comparison import evaluate_systems  # noqa: E402
from lexlens.analysis.systems.systems import SystemsSpec  # noqa: E402
from lexlens.models.base import InputError  # noqa: E402
from lexlens.pyterrier import LexlensExplain, LexlensRetriever  # noqa: E402
from tests.helpers import ROOT, close_to  # noqa: E402

#: Two means of the same ≤ 60 per-query values in [0, 1], summed in another order (numpy's
#: pairwise sum, Python's left to right): each addition rounds by at most half a step of the
#: sum (≤ 60 · 2⁻⁵³), so they may differ by 60 × 60 · 2⁻⁵³ / 60 ≈ 7e-15.
MEAN_TOLERANCE = 60 * 2.0**-52
#: The evaluation's measures as PyTerrier takes them (ir-measures objects).
METRICS = [ir_measures.parse_measure(m) for m in MEASURES]


@pytest.fixture(scope="module")
def sample(tmp_path_factory, splade):
    """The packaged imagenet_beir sample indexed with splade-tiny; its topics and qrels as
    PyTerrier frames."""
    import pandas as pd

    folder = tmp_path_factory.mktemp("pyterrier")
    index_collection(splade, sample_benchmark("imagenet_beir"), folder / "ix")
    ix = open_index(folder / "ix")
    queries_file, qrels_file = ix.benchmark_files
    queries, qrels = read_queries(queries_file), read_qrels(qrels_file)
    topics = pd.DataFrame({"qid": list(queries), "query": list(queries.values())})
    judged = [(q, d, r) for q, items in qrels.items() for d, r in items.items()]
    return {
        "path": folder / "ix",
        "ix": ix,
        "topics": topics,
        "qrels": pd.DataFrame(judged, columns=["qid", "docno", "label"]),
    }


def test_experiment_equals_lexlens_evaluate_measure_by_measure(sample, splade, cli):
    path = sample["path"]
    systems = [
        LexlensRetriever(path, query_encoder=splade),
        LexlensRetriever(path, query_encoder=splade, gate_k=2),
    ]
    experiment = pt.Experiment(
        systems, sample["topics"], sample["qrels"], METRICS, names=["full", "gate2"]
    )
    run = cli("evaluate", "--index", path, "--gate-k", "768", "--gate-k", "2", "--json")
    assert run.returncode == 0, run.stderr
    means = run.json()["means"]
    names = list(means)
    assert len(names) == 2 and means[names[0]] != means[names[1]]  # the gates rank otherwise
    for (_, row), name in zip(experiment.iterrows(), names, strict=True):
        for m in MEASURES:
            assert row[m] == pytest.approx(means[name][m], rel=0, abs=MEAN_TOLERANCE), (name, m)
    per_query = pt.Experiment(
        systems, sample["topics"], sample["qrels"], METRICS, names=names, perquery=True
    )
    values = {(q["id"], n): q["values"][n] for q in run.json()["per_query"] for n in names}
    assert len(per_query) == len(values) * len(MEASURES)
    for row in per_query.itertuples():
        assert row.value == values[(row.qid, row.name)][str(row.measure)], (row.qid, row.name)


def test_retriever_ranking_is_evaluate_run_trec(sample, splade, cli, tmp_path):
    run = cli("evaluate", "--index", sample["path"], "--gate-k", "2", "--out", tmp_path / "out")
    assert run.returncode == 0, run.stderr
    lines = [line.split() for line in (tmp_path / "out" / "run.trec").read_text().splitlines()]
    hits = LexlensRetriever(sample["path"], query_encoder=splade, gate_k=2).transform(
        sample["topics"]
    )
    assert len(hits) == len(lines) > len(sample["topics"])
    for (q, _, doc, rank, score, _), row in zip(lines, hits.itertuples(), strict=True):
        assert (row.qid, row.docno, row.rank + 1) == (q, doc, int(rank))  # PyTerrier: from 0
        assert np.float32(row.score) == np.float32(score)  # run.trec's float32, exactly
    assert list(hits.columns) == ["qid", "query", "docno", "score", "rank"]


def test_explain_sums_to_the_collections_score(sample, splade):
    """Another system's hits (the gate-2 ranking) explained in the full query's vocabulary:
    each hit's words sum (with the rest) to the exact score the full system gives it."""
    path = sample["path"]
    topics = sample["topics"].head(8)
    other = LexlensRetriever(path, query_encoder=splade, gate_k=2, top=5)
    explained = (other >> LexlensExplain(path, query_encoder=splade, words=3)).transform(topics)
    hits = other.transform(topics)
    assert list(explained["docno"]) == list(hits["docno"])  # rows and order unchanged
    assert {"splade_tiny_words", "splade_tiny_score"} <= set(explained.columns)
    full = {
        (r.qid, r.docno): r.score
        for r in LexlensRetriever(path, query_encoder=splade, top=1000)
        .transform(topics)
        .itertuples()
    }
    from lexlens.analysis.retrieval.queries import QuerySpec

    spec = QuerySpec(splade)
    for row in explained.itertuples():
        words = row.splade_tiny_words
        assert 1 <= len(words) <= 3
        values = [v for _, v in words]
        assert values == sorted(values, reverse=True)
        q = spec.vector(row.query)
        cols, vals = sample["ix"].row(_row(sample, row.docno))
        terms = q[cols].astype(np.float64) * vals.astype(np.float64)
        assert row.splade_tiny_score == close_to(float(terms.sum()), terms=terms)
        # the full system's score is float32 (as run.trec writes it): a relative 2⁻²⁴
        assert full[(row.qid, row.docno)] == pytest.approx(row.splade_tiny_score, rel=2.0**-23)


def _row(sample, docno: str) -> int:
    return [str(i) for i in sample["ix"].column("id")].index(str(docno))


def test_explain_names_an_item_the_collection_lacks(sample, splade):
    import pandas as pd

    hits = pd.DataFrame(
        {"qid": ["q00", "q00"], "query": ["small fish", "small fish"], "docno": ["nosuch", "c0"]}
    )
    out = LexlensExplain(sample["path"], query_encoder=splade, prefix="splade").transform(hits)
    assert out.loc[0, "splade_words"] == [] and np.isnan(out.loc[0, "splade_score"])
    assert out.loc[1, "splade_score"] > 0


def test_results_frame_is_read_as_a_run(sample, splade):
    """The retriever's frame, read as another system's run, evaluates as Lexlens's own
    ranking; a frame in a comparison is a system named as given."""
    path = sample["path"]
    frame = LexlensRetriever(path, query_encoder=splade, gate_k=2).transform(sample["topics"])
    own = evaluate_benchmark(path, query_encoder=splade, gate_k=2)
    as_run = evaluate_benchmark(
        path, query_encoder=splade, gate_k=2, run=frame.sample(frac=1, random_state=0)
    )
    assert as_run.metrics["aggregate"] == own.metrics["aggregate"]
    assert as_run.settings["run"] is True
    compared = evaluate_systems(
        SystemsSpec([path], runs=[frame], names=["pt-gate2"], with_exact=True),
        evaluation=None,
    ).section("comparison")
    assert [s.name for s in compared.systems] == ["ix", "pt-gate2"]
    per_query = {q["id"]: q["values"]["pt-gate2"] for q in compared.per_query}
    assert per_query == {q["id"]: {m: q[m] for m in MEASURES} for q in own.metrics["per_query"]}
    for m in MEASURES:  # numpy's mean of the same values
        assert compared.means["pt-gate2"][m] == pytest.approx(
            own.metrics["aggregate"][m], rel=0, abs=MEAN_TOLERANCE
        )


def test_traceback_frame_without_a_column_is_one_line(sample, splade):
    import pandas as pd

    with pytest.raises(InputError, match="lacks docno"):
        evaluate_benchmark(sample["path"], run=pd.DataFrame({"qid": ["q00"], "score": [1.0]}))
    with pytest.raises(InputError, match="lacks the column query"):
        LexlensRetriever(sample["path"], query_encoder=splade).transform(
            pd.DataFrame({"qid": ["q"]})
        )


def test_import_lexlens_pyterrier_without_the_extra_says_how_to_install(tmp_path):
    code = "import sys; sys.modules['pyterrier'] = None; import lexlens.pyterrier"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        'ImportError: lexlens.pyterrier needs PyTerrier: pip install "lexlens[pyterrier]"'
    )


def test_silent_wrong_import_pyterrier_from_the_checkout_is_pyterrier():
    """Python run from the checkout's root (``python -m bench.run``) finds PyTerrier itself
    under ``import pyterrier``, not Lexlens's ``pyterrier.py`` of that folder."""
    code = "import pyterrier, lexlens.pyterrier as lp; print(pyterrier.Transformer.__module__, lp.LexlensRetriever.__mro__[1].__module__)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["pyterrier.transformer", "pyterrier.transformer"]
