"""What an approximate engine lost and why: a real Seismic run over 100,000 synthetic
items, every lost item's reason recomputed here with numpy from the source vectors (the
kept query terms' score, the k-th score of the kept terms' ranking, each term's static
cut) and checked against the posting lists the Seismic index really kept."""

from __future__ import annotations

import csv
import io
import json
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

from lexlens.analysis.collections.store import StoredIndex
from lexlens.analysis.export.export import export_index
from lexlens.analysis.systems.engine_loss import (
    POSTINGS,
    QUERY_CUT,
    REASONS,
    UNEXPLAINED,
    EngineOptions,
    engine_losses,
    kept_terms,
)
from lexlens.models.base import InputError
from tests.helpers import app_page, click_and_wait, page_result

ITEMS = 100_000
QUERY_CUT_SETTING = 6
N_POSTINGS = 150
DEPTH = 10
#: The vocabulary ids of the synthetic items' terms, most frequent first.
TERMS = np.random.default_rng(11).permutation(10_000) + 2000


def _synthetic(folder, items: int, queries: list[np.ndarray]) -> sp.csr_matrix:
    """Items of 20–60 terms drawn by a power law over 10,000 whole-word vocabulary ids, lognormal
        weights; then, per query, two planted items that hold its largest terms (twice the query
    cut's count) with long
        posting lists at 0.95 × their :data:`N_POSTINGS`-th largest weight (below the static cut,
        high in the exact ranking). Written as a .npz with its ids file (``lexlens index
        --vectors`` reads it)."""
    rng = np.random.default_rng(7)
    per = rng.integers(20, 60, items)
    indptr = np.concatenate([[0], np.cumsum(per)])
    share = 1.0 / (np.arange(10_000) + 50.0) ** 0.9  # a power law of the term's rank
    ranks = rng.choice(10_000, indptr[-1], p=share / share.sum())
    cols = TERMS[ranks]
    vals = rng.lognormal(-0.5, 0.6, indptr[-1]).astype(np.float32)
    matrix = sp.csr_matrix((vals, cols, indptr), shape=(items, 30_522))
    matrix.sum_duplicates()
    columns = matrix.tocsc()
    lists = np.diff(columns.indptr)
    rows = matrix.tolil()
    planted = 0
    for q in queries:
        top = np.argsort(-q, kind="stable")[: 2 * QUERY_CUT_SETTING]
        long = [t for t in top if lists[t] > 2 * N_POSTINGS]
        for _ in range(2 if len(long) >= 2 else 0):
            rows.rows[planted], rows.data[planted] = [], []
            for t in long:
                weights = columns.data[columns.indptr[t] : columns.indptr[t + 1]]
                rows[planted, t] = 0.95 * np.sort(weights)[-N_POSTINGS]
            planted += 1
    matrix = rows.tocsr()
    matrix.sort_indices()
    sp.save_npz(folder / "v.npz", matrix)
    (folder / "v.ids.txt").write_text("".join(f"d{i}\n" for i in range(items)))
    return matrix


@pytest.fixture(scope="module")
def seismic_case(tmp_path_factory, splade):
    seismic = pytest.importorskip("seismic", reason="pyseismic-lsr is an optional extra")
    from lexlens.app.cli import main  # the CLI in this process: the encoder stays loaded

    folder = tmp_path_factory.mktemp("engine")
    rng = np.random.default_rng(3)
    vocab = list(splade.vocab)
    words = [vocab[i] for i in TERMS[:400] if vocab[i].isalpha()]  # frequent: long lists
    queries = {f"q{i}": " ".join(rng.choice(words, 3)) for i in range(40)}
    encoded = [e.weights for e in splade.encode_texts(list(queries.values()))]
    matrix = _synthetic(folder, ITEMS, encoded)
    # Seismic's global threshold keeps n_postings × |V| postings: more than there are, so
    # its pruning is each list's n_postings largest (max_fraction 1)
    assert matrix.nnz < N_POSTINGS * len(vocab) and matrix[0].nnz < 20  # a planted item
    args = ["index", "--vectors", folder / "v.npz", "--encoder", "splade-tiny"]
    assert main([str(a) for a in [*args, "--out", folder / "ix"]]) == 0
    ix = StoredIndex(folder / "ix")
    (folder / "q.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    export_index(ix, folder / "ex", format="seismic", queries=queries)
    engine = seismic.SeismicIndex.build(
        str(folder / "ex" / "docs.jsonl"),
        n_postings=N_POSTINGS,
        max_fraction=1.0,
        input_token_to_id_map={w: i for i, w in enumerate(ix.vocab)},
    )
    kind = seismic.get_seismic_string()
    lines = [json.loads(line) for line in (folder / "ex" / "queries.jsonl").open()]
    found = engine.batch_search(
        np.array([q["id"] for q in lines], dtype=kind),
        [np.array(list(q["vector"]), dtype=kind) for q in lines],
        [np.array(list(q["vector"].values()), dtype=np.float32) for q in lines],
        k=DEPTH,
        query_cut=QUERY_CUT_SETTING,
        heap_factor=0.9,
    )
    with (folder / "seismic.trec").open("w") as out:
        for hits in found:
            for rank, (q, score, d) in enumerate(hits, 1):
                out.write(f"{q} Q0 {d} {rank} {score} seismic\n")
    vectors = {}
    for q in lines:
        v = np.zeros(len(ix.vocab))
        for term, w in q["vector"].items():
            v[ix.vocab.index(term)] = w
        vectors[q["id"]] = v
    # judged: the brute-force exact top 5 of each query (so lost relevant items exist)
    qrels = []
    for q, v in vectors.items():
        scores = matrix @ v
        for row in np.lexsort((np.arange(ITEMS), -scores))[:5]:
            if scores[row] > 0:
                qrels.append(f"{q} 0 d{row} 1\n")
    (folder / "qrels.txt").write_text("".join(qrels))
    return folder, matrix, vectors, engine


def _run(path):
    out = {}
    for line in path.read_text().splitlines():
        q, _, d, rank, score, _ = line.split()
        out.setdefault(q, []).append(d)
    return out


@pytest.mark.slow
def test_every_lost_item_of_a_real_seismic_run_has_its_reason_recomputed(seismic_case, cli):
    folder, matrix, vectors, engine = seismic_case
    run = cli(
        "evaluate",
        "--index",
        folder / "ix",
        "--queries",
        folder / "q.tsv",
        "--qrels",
        folder / "qrels.txt",
        "--run",
        folder / "seismic.trec",
        "--with-exact",
        "--engine",
        "seismic",
        "--query-cut",
        str(QUERY_CUT_SETTING),
        "--n-postings",
        str(N_POSTINGS),
        "--out",
        folder / "out",
    )
    assert run.returncode == 0, run.stderr
    # the run is named after its file, the engine once: not "seismic (seismic)"
    assert "\nseismic against ix: accuracy@10" in run.stdout
    document = json.loads((folder / "out" / "comparison.json").read_text())
    (entry,) = document["engine"]
    losses = entry["losses"]
    served = _run(folder / "seismic.trec")
    columns = matrix.tocsc()
    reasons = {r: 0 for r in REASONS}
    relevant_lost = 0
    for row in losses["per_query"]:
        q = row["query_id"]
        v = vectors[q]
        exact = matrix @ v
        top = [f"d{r}" for r in np.lexsort((np.arange(ITEMS), -exact))[:DEPTH] if exact[r] > 0]
        mine = served.get(q, [])[:DEPTH]
        assert row["accuracy"] == pytest.approx(len(set(top) & set(mine)) / len(top))
        assert [e["item"] for e in row["lost"]] == [d for d in top if d not in mine]
        assert row["gained"] == [d for d in mine if d not in top]
        terms = np.flatnonzero(v)
        kept = terms[np.argsort(-v[terms], kind="stable")[:QUERY_CUT_SETTING]]
        q_kept = np.zeros_like(v)
        q_kept[kept] = v[kept]
        kept_scores = matrix @ q_kept
        kept_kth = np.sort(kept_scores)[-DEPTH]
        for e in row["lost"]:
            item = int(e["item"][1:])
            reasons[e["reason"]] += 1
            relevant_lost += e["relevant"]
            # float64 sums of ≤ 60 float32 products of magnitude ≤ ~50: 1e-9 relative
            assert e["kept_score"] == pytest.approx(kept_scores[item], rel=1e-9)
            assert e["kept_kth_score"] == pytest.approx(kept_kth, rel=1e-9)
            below = kept_scores[item] <= 0 or kept_scores[item] < kept_kth
            assert (e["reason"] == QUERY_CUT) == below
            if e["reason"] == QUERY_CUT:
                continue
            pruned = []
            for t in kept:
                weights = columns.data[columns.indptr[t] : columns.indptr[t + 1]]
                held = matrix[item, t]
                if held > 0:
                    cut = np.sort(weights)[-N_POSTINGS] if weights.size > N_POSTINGS else None
                    pruned.append(cut is not None and held < cut)
                    in_list = item in set(engine.get_doc_ids_in_postings(int(t)))
                    assert in_list == (not pruned[-1])  # the real index kept exactly these
            assert (e["reason"] == POSTINGS) == (bool(pruned) and all(pruned))
            assert e["reason"] in (POSTINGS, UNEXPLAINED)
    # the case is one where both pruning steps lose items (the test is not vacuous)
    assert reasons[QUERY_CUT] > 0 and reasons[POSTINGS] > 0, reasons
    summary = {s["reason"]: s for s in losses["reasons"]}
    assert {r: summary[r]["items"] for r in REASONS} == reasons
    assert losses["lost_relevant"] == relevant_lost > 0
    assert sum(s["share_of_lost_relevant"] for s in summary.values()) == pytest.approx(1.0)
    rows = list(csv.DictReader(io.StringIO((folder / "out" / "engine_losses.csv").read_text())))
    assert len(rows) == losses["lost"] == sum(reasons.values())
    html = (folder / "out" / "comparison.html").read_text()
    assert "Replaying seismic" in html
    row = summary[POSTINGS]
    cells = f'<td>{POSTINGS}</td><td class="num">{row["queries"]}</td><td class="num">{row["items"]}</td>'
    assert cells in html


def test_a_parameter_of_another_engine_or_without_one_is_refused():
    with pytest.raises(InputError, match="--prune-ratio is threshold's parameter, not seismic's"):
        engine_losses(
            None, {}, {}, {}, {}, {}, EngineOptions(engine="seismic", prune_ratio=0.1), []
        )
    with pytest.raises(InputError, match="--query-cut applies with --engine"):
        engine_losses(None, {}, {}, {}, {}, {}, EngineOptions(query_cut=3), [])
    with pytest.raises(InputError, match="--engine pisa needs --scale"):
        engine_losses(None, {}, {}, {}, {}, {}, EngineOptions(engine="pisa"), [])
    with pytest.raises(InputError, match="query_cut"):
        EngineOptions.of(query_cut=0)


def test_the_threshold_engine_keeps_terms_at_its_share_of_the_largest_weight():
    v = np.zeros(8)
    v[[1, 3, 5]] = [1.0, 0.29, 0.3]
    assert kept_terms(v, EngineOptions(engine="threshold", prune_ratio=0.3)).tolist() == [1, 5]
    v[7] = 1.0  # a tie at the query cut: the lower vocabulary id is kept
    assert kept_terms(v, EngineOptions(engine="seismic", query_cut=1)).tolist() == [1]


@pytest.fixture(scope="module")
def small_case(tmp_path_factory, splade):
    """3,000 synthetic items imported, 20 text queries and their vectors as the evaluation
    encodes them (the export's query vectors)."""
    from lexlens.app.cli import main  # the CLI in this process: the encoder stays loaded

    folder = tmp_path_factory.mktemp("engine-small")
    vocab = list(splade.vocab)
    rng = np.random.default_rng(5)
    words = [vocab[i] for i in TERMS[:400] if vocab[i].isalpha()]
    queries = {f"q{i}": " ".join(rng.choice(words, 3)) for i in range(20)}
    matrix = _synthetic(folder, 3000, [])
    args = ["index", "--vectors", folder / "v.npz", "--encoder", "splade-tiny"]
    assert main([str(a) for a in [*args, "--out", folder / "ix"]]) == 0
    ix = StoredIndex(folder / "ix")
    (folder / "q.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    export_index(ix, folder / "ex", format="seismic", queries=queries)
    vectors = {}
    for line in (folder / "ex" / "queries.jsonl").open():
        q = json.loads(line)
        v = np.zeros(len(vocab))
        for term, w in q["vector"].items():
            v[vocab.index(term)] = w
        vectors[q["id"]] = v
    (folder / "qrels.txt").write_text("".join(f"{q} 0 d{i} 1\n" for i, q in enumerate(queries)))
    return folder, matrix, vectors


def _top(scores: np.ndarray, k: int = DEPTH) -> list[int]:
    """The rows of the k best positive scores, ties by row."""
    return [r for r in np.lexsort((np.arange(scores.size), -scores))[:k] if scores[r] > 0]


def _write_run(path, runs: dict[str, list[int]]) -> None:
    with path.open("w") as out:
        for q, rows in runs.items():
            for rank, row in enumerate(rows, 1):
                out.write(f"{q} Q0 d{row} {rank} {100 - rank} engine\n")


def _losses(cli, folder, run, *flags):
    out = folder / ("out-" + flags[1])
    done = cli(
        "evaluate",
        "--index",
        folder / "ix",
        "--queries",
        folder / "q.tsv",
        "--qrels",
        folder / "qrels.txt",
        "--run",
        run,
        "--with-exact",
        "--engine",
        *flags,
        "--out",
        out,
    )
    assert done.returncode == 0, done.stderr
    return json.loads((out / "comparison.json").read_text())["engine"][0]["losses"]


def test_a_quantised_runs_lost_items_are_those_below_the_integer_kth(small_case, tmp_path, cli):
    folder, matrix, vectors = small_case
    scale = 2.0  # coarse: many ties and reorderings
    impacts = matrix.copy()
    impacts.data = np.rint(impacts.data * scale)
    runs = {q: _top(impacts @ np.rint(v * scale)) for q, v in vectors.items()}
    _write_run(tmp_path / "pisa.trec", runs)
    losses = _losses(cli, folder, tmp_path / "pisa.trec", "pisa", "--scale", str(scale))
    seen = 0
    for row in losses["per_query"]:
        v = vectors[row["query_id"]]
        integer = impacts @ np.rint(v * scale)
        kth = np.sort(integer)[-DEPTH]
        assert [e["item"] for e in row["lost"]] == [
            f"d{r}" for r in _top(matrix @ v) if r not in runs[row["query_id"]]
        ]
        for e in row["lost"]:
            item = int(e["item"][1:])
            seen += 1
            assert e["impact_score"] == integer[item] and e["impact_kth_score"] == kth
            assert (e["reason"] == "quantised") == (integer[item] < kth or integer[item] <= 0)
    assert seen and losses["reasons"][REASONS.index("quantised")]["items"] > 0


def test_a_threshold_runs_lost_items_are_cut_by_the_prune_ratio(small_case, tmp_path, cli):
    folder, matrix, vectors = small_case
    ratio = 0.6
    runs = {}
    for q, v in vectors.items():
        pruned = np.where(v >= ratio * v.max(), v, 0.0)
        runs[q] = _top(matrix @ pruned)
    _write_run(tmp_path / "os.trec", runs)
    losses = _losses(cli, folder, tmp_path / "os.trec", "threshold", "--prune-ratio", str(ratio))
    assert losses["lost"] > 0
    for row in losses["per_query"]:
        v = vectors[row["query_id"]]
        pruned = np.where(v >= ratio * v.max(), v, 0.0)
        kept = matrix @ pruned
        kth = np.sort(kept)[-DEPTH]
        for e in row["lost"]:
            item = int(e["item"][1:])
            assert e["kept_score"] == pytest.approx(kept[item], rel=1e-9)
            # the run is the pruned query's exact top 10: every loss is the cut's (a tie at
            # the k-th score may still be broken by row: not decomposed)
            assert e["reason"] == (
                QUERY_CUT if kept[item] < kth or kept[item] <= 0 else UNEXPLAINED
            )


def test_an_engine_without_a_run_beside_its_exact_ranking_is_refused(small_case, cli):
    folder, _, _ = small_case
    done = cli("evaluate", "--index", folder / "ix", "--engine", "seismic", "--query-cut", "3")
    assert done.returncode == 2 and "give the run with --with-exact" in done.stderr
    done = cli("evaluate", "--index", folder / "ix", "--query-cut", "3")
    assert done.returncode == 2 and "--query-cut applies with --engine" in done.stderr


def test_silent_wrong_the_page_gives_the_commands_reasons(small_case, tmp_path, monkeypatch, cli):
    folder, matrix, vectors = small_case
    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    (home / "collections").mkdir(parents=True)
    shutil.copytree(folder / "ix", home / "collections" / "ix")
    runs = {}
    for q, v in vectors.items():
        runs[q] = _top(matrix @ np.where(v >= 0.6 * v.max(), v, 0.0))
    _write_run(tmp_path / "os.trec", runs)
    queries = (folder / "q.tsv").read_bytes()
    qrels = (folder / "qrels.txt").read_bytes()
    expected = _losses(cli, folder, tmp_path / "os.trec", "threshold", "--prune-ratio", "0.6")
    at = app_page("app_pages/evaluation.py")
    at.radio(key="eval_systems_mode").set_value("Several systems").run()
    at.file_uploader(key="sys_runs").set_value(
        ("os.trec", (tmp_path / "os.trec").read_bytes(), "text/plain")
    )
    at.file_uploader(key="sys_queries").set_value(("q.tsv", queries, "text/plain"))
    at.file_uploader(key="sys_qrels").set_value(("qrels.txt", qrels, "text/plain"))
    at.run()
    at.toggle(key="sys_with_exact").set_value(True).run()
    at.number_input(key="sys_resamples").set_value(500).run()
    at.selectbox(key="sys_engine").set_value("threshold").run()
    at.number_input(key="sys_prune_ratio").set_value(0.6).run()
    click_and_wait(at, next(b for b in at.button if b.label == "Compare").click)
    assert not at.exception and not at.error
    (entry,) = page_result(at).engine
    assert entry["losses"] == expected and expected["lost"] > 0
    assert any("lost, and why" in h.value for h in at.subheader)
