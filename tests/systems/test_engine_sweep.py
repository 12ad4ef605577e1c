"""What if: a real Seismic sweep over a small imported collection, each setting's
accuracy@10 recomputed here as the overlap of the ids Seismic returned with a numpy
brute-force exact top 10, its nDCG@10 by ir-measures called on the run directly, and the
report's chart checked point by point."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

from lexlens.analysis.collections.store import StoredIndex
from lexlens.analysis.export.export import export_index
from lexlens.analysis.systems.engine_sweep import (
    EXACT,
    EngineSweep,
    SweepOptions,
    engine_sweep,
)
from lexlens.models.base import InputError
from tests.helpers import app_page, click_and_wait, page_result, reopened

ITEMS = 6_000
QUERIES = 24
N_POSTINGS = 120
CUTS = (1, 2, 4, 8)
DEPTH = 10
#: The vocabulary ids of the synthetic items' terms, most frequent first.
TERMS = np.random.default_rng(11).permutation(8_000) + 2000


def _items(folder, items: int) -> sp.csr_matrix:
    """Items of 20–60 terms drawn by a power law over 8,000 vocabulary ids, lognormal
    weights, written as a .npz with its ids file (what ``lexlens index --vectors`` reads)."""
    rng = np.random.default_rng(7)
    per = rng.integers(20, 60, items)
    indptr = np.concatenate([[0], np.cumsum(per)])
    share = 1.0 / (np.arange(TERMS.size) + 50.0) ** 0.9
    cols = TERMS[rng.choice(TERMS.size, indptr[-1], p=share / share.sum())]
    vals = rng.lognormal(-0.5, 0.6, indptr[-1]).astype(np.float32)
    matrix = sp.csr_matrix((vals, cols, indptr), shape=(items, 30_522))
    matrix.sum_duplicates()
    matrix.sort_indices()
    sp.save_npz(folder / "v.npz", matrix)
    (folder / "v.ids.txt").write_text("".join(f"d{i}\n" for i in range(items)))
    return matrix


def _exact_top(matrix: sp.csr_matrix, v: np.ndarray) -> list[int]:
    """The rows of the 10 best positive scores, ties by row (numpy brute force)."""
    scores = matrix @ v
    return [r for r in np.lexsort((np.arange(scores.size), -scores))[:DEPTH] if scores[r] > 0]


@pytest.fixture(scope="module")
def case(tmp_path_factory, splade):
    pytest.importorskip("seismic", reason="pyseismic-lsr is an optional extra")
    from lexlens.app.cli import main  # the CLI in this process: the encoder stays loaded

    folder = tmp_path_factory.mktemp("sweep")
    vocab = list(splade.vocab)
    rng = np.random.default_rng(3)
    words = [vocab[i] for i in TERMS[:300] if vocab[i].isalpha()]  # frequent: long lists
    queries = {f"q{i}": " ".join(rng.choice(words, 3)) for i in range(QUERIES)}
    matrix = _items(folder, ITEMS)
    args = ["index", "--vectors", folder / "v.npz", "--encoder", "splade-tiny"]
    assert main([str(a) for a in [*args, "--out", folder / "ix"]]) == 0
    ix = StoredIndex(folder / "ix")
    (folder / "q.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    # the queries' vectors as the evaluation encodes them: the export's query vectors
    export_index(ix, folder / "ex", format="seismic", queries=queries)
    vectors = {}
    for line in (folder / "ex" / "queries.jsonl").open():
        q = json.loads(line)
        v = np.zeros(len(vocab))
        for term, w in q["vector"].items():
            v[vocab.index(term)] = w
        vectors[q["id"]] = v
    # judged: the brute-force exact ranks 2 and 7 (grades 2 and 1) and the 15th (1), so a
    # setting that loses items loses nDCG too
    qrels = {}
    for q, v in vectors.items():
        scores = matrix @ v
        order = np.lexsort((np.arange(ITEMS), -scores))
        qrels[q] = {f"d{order[1]}": 2, f"d{order[6]}": 1, f"d{order[14]}": 1}
    (folder / "qrels.txt").write_text(
        "".join(f"{q} 0 {d} {r}\n" for q, judged in qrels.items() for d, r in judged.items())
    )
    with (folder / "exact.trec").open("w") as out:  # a run beside the exact ranking
        for q, v in vectors.items():
            for rank, row in enumerate(_exact_top(matrix, v), 1):
                out.write(f"{q} Q0 d{row} {rank} {100 - rank} engine\n")
    return folder, matrix, vectors, qrels


def _ndcg(run: dict, qrels: dict) -> float:
    """nDCG@10 by ir-measures on ``run`` ({query: [(item, score), …]} best first), ranks
    handed as strictly decreasing scores."""
    import ir_measures

    ranked = {
        q: {d: float(DEPTH + 1 - i) for i, (d, _) in enumerate(hits)} for q, hits in run.items()
    }
    return ir_measures.calc_aggregate([ir_measures.parse_measure("nDCG@10")], qrels, ranked)[
        ir_measures.parse_measure("nDCG@10")
    ]


@pytest.mark.slow
def test_a_real_seismic_sweep_measures_each_setting_as_recomputed_here(case):
    folder, matrix, vectors, qrels = case
    ix = StoredIndex(folder / "ix")
    options = SweepOptions.of(sweep="seismic", sweep_query_cuts=CUTS, sweep_n_postings=N_POSTINGS)
    sweep = engine_sweep(ix, vectors, qrels, options)
    assert [p.query_cut for p in sweep.settings] == list(CUTS)
    assert sweep.items == ITEMS and sweep.queries == QUERIES and sweep.build_seconds > 0
    exact_top = {q: [f"d{r}" for r in _exact_top(matrix, v)] for q, v in vectors.items()}
    accuracies = []
    for p in sweep.settings:
        run = sweep.runs[p.name]
        assert set(run) == set(vectors)
        overlap = [
            len(set(exact_top[q]) & {d for d, _ in run[q][:DEPTH]}) / len(exact_top[q])
            for q in vectors
        ]
        # a mean of ≤ 24 shares of tenths: exact up to float rounding
        assert p.accuracy == pytest.approx(np.mean(overlap), abs=1e-12)
        assert p.ndcg == pytest.approx(_ndcg(run, qrels), abs=1e-9)
        assert p.latency_us > 0
        assert p.lost == sum(
            len(exact_top[q]) - round(o * len(exact_top[q]))
            for q, o in zip(vectors, overlap, strict=True)
        )
        assert sum(s["items"] for s in p.reasons) == p.lost
        accuracies.append(p.accuracy)
    # the sweep is not vacuous: the smallest cut loses items, the largest keeps more
    assert accuracies[0] < 1.0 and accuracies[-1] > accuracies[0]
    exact = sweep.exact
    assert exact.engine == EXACT and exact.accuracy == 1.0 and exact.lost == 0
    assert exact.latency_us > 0
    brute = {q: [(d, 0.0) for d in ids] for q, ids in exact_top.items()}
    assert exact.ndcg == pytest.approx(_ndcg(brute, qrels), abs=1e-9)
    # kept by the app as data and rebuilt the same (a page reload shows it again)
    assert EngineSweep.from_state(json.loads(json.dumps(sweep.to_state()))) == sweep
    rows = list(csv.DictReader(io.StringIO(sweep.csv().decode())))
    assert [r["name"] for r in rows] == [*(f"query_cut {c}" for c in CUTS), EXACT]
    assert float(rows[0]["accuracy@10"]) == pytest.approx(accuracies[0])


@pytest.mark.slow
def test_without_judgements_the_sweep_says_why_ndcg_is_absent(case):
    folder, _, vectors, _ = case
    options = SweepOptions.of(sweep="seismic", sweep_query_cuts=(2,), sweep_n_postings=N_POSTINGS)
    sweep = engine_sweep(StoredIndex(folder / "ix"), vectors, None, options)
    assert all(p.ndcg is None for p in sweep.points)
    assert "needs qrels" in sweep.ndcg_note


@pytest.mark.slow
def test_the_command_writes_the_sweep_and_comparison_html_draws_each_point(case, cli):
    folder, _, _, qrels = case
    out = folder / "out"
    done = cli(
        "evaluate",
        "--index",
        folder / "ix",
        "--queries",
        folder / "q.tsv",
        "--qrels",
        folder / "qrels.txt",
        "--run",
        folder / "exact.trec",
        "--with-exact",
        "--sweep",
        "seismic",
        "--sweep-query-cuts",
        ",".join(map(str, CUTS)),
        "--sweep-n-postings",
        str(N_POSTINGS),
        "--resamples",
        "200",
        "--out",
        out,
    )
    assert done.returncode == 0, done.stderr
    assert "what if seismic (n_postings 120" in done.stdout
    document = json.loads((out / "comparison.json").read_text())
    sweep = document["sweep"]
    assert [p["query_cut"] for p in sweep["points"]] == [*CUTS, None]
    # the exact scorer's nDCG@10 in the sweep is the comparison's own for that system
    exact_system = next(s["name"] for s in document["systems"] if s["kind"] == "lexlens")
    assert sweep["points"][-1]["ndcg"] == pytest.approx(
        document["means"][exact_system]["nDCG@10"], abs=1e-12
    )
    rows = list(csv.DictReader(io.StringIO((out / "engine_sweep.csv").read_text())))
    assert len(rows) == len(CUTS) + 1
    html = (out / "comparison.html").read_text()
    assert "<script" not in html
    section = html[html.index('<section id="engine-sweep">') :]
    charts = re.findall(r'<svg class="chart".*?</svg>', section, re.S)
    labels = [re.search(r'aria-label="([^"]+)"', c).group(1) for c in charts]
    assert labels == ["accuracy@10 against latency", "nDCG@10 against latency"]
    for chart in charts:
        names = re.findall(r"<text [^>]*>(cut \d+|exact)</text>", chart)
        assert names == [*(f"cut {c}" for c in CUTS), "exact"]
        assert chart.count("<circle") == len(CUTS) and chart.count("<rect") == 1
        exact_tip = re.search(r"<rect [^>]*><title>exact: ([^<]+)</title>", chart).group(1)
        assert f"{sweep['points'][-1]['latency_us']!r}" in exact_tip


def test_bad_sweep_values_exit_2_with_one_line(case, cli):
    folder = case[0]
    base = ("evaluate", "--index", folder / "ix", "--queries", folder / "q.tsv")
    for flags, said in (
        (("--sweep", "seismic", "--sweep-query-cuts", "0,3"), "--sweep-query-cuts must be"),
        (("--sweep", "seismic", "--sweep-query-cuts", "3,x"), "--sweep-query-cuts must be"),
        (("--sweep", "seismic", "--sweep-query-cuts", "3,3"), "--sweep-query-cuts must be"),
        (("--sweep-query-cuts", "3"), "--sweep-query-cuts applies with --sweep seismic"),
        (("--sweep", "pisa"), "--sweep must be one of seismic"),
        (("--sweep", "seismic", "--sweep-heap-factor", "2"), "--sweep-heap-factor must be"),
    ):
        done = cli(*base, "--qrels", folder / "qrels.txt", *flags)
        assert done.returncode == 2, (flags, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and said in done.stderr, done.stderr


def test_a_sweep_needs_a_collection_lexlens_ranks():
    with pytest.raises(InputError, match="applies with --sweep seismic"):
        engine_sweep(None, {}, None, SweepOptions(sweep_n_postings=10))
    with pytest.raises(InputError, match="no queries"):
        engine_sweep(None, {}, None, SweepOptions(sweep="seismic"))


@pytest.mark.slow
def test_the_page_runs_the_sweep_as_a_job_and_shows_the_commands_figures(
    case, tmp_path, monkeypatch
):
    folder, _, vectors, qrels = case
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    (home / "collections").mkdir(parents=True)
    shutil.copytree(folder / "ix", home / "collections" / "ix")
    at = app_page("app_pages/evaluation.py")
    at.radio(key="eval_systems_mode").set_value("Several systems").run()
    at.file_uploader(key="sys_runs").set_value(
        ("exact.trec", (folder / "exact.trec").read_bytes(), "text/plain")
    )
    at.file_uploader(key="sys_queries").set_value(
        ("q.tsv", (folder / "q.tsv").read_bytes(), "text/plain")
    )
    at.file_uploader(key="sys_qrels").set_value(
        ("qrels.txt", (folder / "qrels.txt").read_bytes(), "text/plain")
    )
    at.run()
    at.toggle(key="sys_with_exact").set_value(True).run()
    at.number_input(key="sys_resamples").set_value(200).run()
    at.selectbox(key="sys_sweep").set_value("seismic").run()
    at.text_input(key="sys_sweep_query_cuts").set_value("4, 1").run()
    at.number_input(key="sys_sweep_n_postings").set_value(N_POSTINGS).run()
    click_and_wait(at, next(b for b in at.button if b.label == "Compare").click)
    assert not at.exception and not at.error
    shown = page_result(at).sweep
    options = SweepOptions.of(sweep="seismic", sweep_query_cuts=(1, 4), sweep_n_postings=N_POSTINGS)
    direct = engine_sweep(StoredIndex(folder / "ix"), vectors, qrels, options)
    # the same settings measured the same (latency aside: it is timed again)
    assert [(p.name, p.accuracy, p.ndcg, p.lost) for p in shown.points] == [
        (p.name, p.accuracy, p.ndcg, p.lost) for p in direct.points
    ]
    assert any(h.value == "What if: seismic at 2 settings" for h in at.subheader)
    (table,) = [d.value for d in at.dataframe if "setting" in d.value.columns]
    assert list(table.columns[:4]) == ["setting", "accuracy@10", "nDCG@10", "latency (µs)"]
    assert table["setting"].tolist() == ["query_cut 1", "query_cut 4", EXACT]
    again = reopened(at, "app_pages/evaluation.py")  # a reload shows the stored sweep
    assert any(h.value == "What if: seismic at 2 settings" for h in again.subheader)


@pytest.mark.slow
def test_one_systems_evaluation_carries_the_sweep_as_its_section(case, cli):
    folder = case[0]
    out = folder / "one"
    base = ("evaluate", "--index", folder / "ix", "--queries", folder / "q.tsv")
    done = cli(
        *base,
        "--qrels",
        folder / "qrels.txt",
        "--sweep",
        "seismic",
        "--sweep-query-cuts",
        "2",
        "--sweep-n-postings",
        str(N_POSTINGS),
        "--out",
        out,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads((out / "evaluation.json").read_text())
    points = document["engine_sweep"]["points"]
    assert [p["name"] for p in points] == ["query_cut 2", EXACT]
    # the exact scorer's nDCG@10 is the evaluation's own
    assert points[-1]["ndcg"] == pytest.approx(
        document["metrics"]["aggregate"]["nDCG@10"], abs=1e-12
    )
    assert (out / "engine_sweep.csv").exists()
    assert '<section id="engine-sweep">' in (out / "evaluation.html").read_text()
    # a run alone is no collection Lexlens ranks
    done = cli(
        *base,
        "--qrels",
        folder / "qrels.txt",
        "--run",
        folder / "exact.trec",
        "--sweep",
        "seismic",
    )
    assert done.returncode == 2 and "runs over a collection Lexlens ranks" in done.stderr
