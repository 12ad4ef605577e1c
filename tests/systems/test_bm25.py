"""BM25 as a system Lexlens computes itself, on the packaged BEIR sample indexed with
splade-tiny: its scores equal bm25s's own (a separate ``bm25s.BM25`` built in the test), each
query token's contribution follows the published formula and the contributions sum to the
score; the why of a BM25-vs-SPLADE win shows BM25's terms on BM25's side; ``lexlens evaluate
--bm25`` end to end, and its bad cases refused in one line."""

from __future__ import annotations

import json
import math
from collections import Counter

import bm25s
import ir_measures
import numpy as np
import pytest
from PIL import Image

from lexlens.analysis.collections.indexing import build_index, index_collection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.samples import sample_benchmark
from lexlens.analysis.datasets.trec import read_qrels, read_queries
from lexlens.analysis.systems.bm25 import METHODS, Bm25Options, bm25_index
from lexlens.analysis.systems.comparison import evaluate_systems, why_of
from lexlens.analysis.systems.systems import SystemsSpec
from tests.helpers import (
    app_page,
    click_and_wait,
    one_line_error,
    page_result,
    refused,
)
from tests.systems.test_systems_page import bench_index, without_wall_times

#: Double precision: a score of n ≤ 20 terms, each ≤ 30 in size, summed in two orders
#: differs by at most 2 · n · 2⁻⁵³ · Σ|terms| ≤ 2 · 20 · 1.1e-16 · 600 ≈ 3e-12.
FLOAT64 = 1e-11


@pytest.fixture(scope="module")
def sample(tmp_path_factory, splade):
    """The packaged imagenet_beir sample indexed with splade-tiny, its queries and judgements."""
    folder = tmp_path_factory.mktemp("bm25")
    index_collection(splade, sample_benchmark("imagenet_beir"), folder / "ix")
    ix = open_index(folder / "ix")
    queries_file, qrels_file = ix.benchmark_files
    return {
        "path": folder / "ix",
        "ix": ix,
        "queries": read_queries(queries_file),
        "qrels": read_qrels(qrels_file),
        "texts": [str(t) for t in ix.column("text")],
    }


def reference(texts: list[str], options: Bm25Options, dtype: str = "float64"):
    """bm25s's own retriever over ``texts``, built as its README shows."""
    retriever = bm25s.BM25(
        k1=options.bm25_k1, b=options.bm25_b, method=options.bm25_method, dtype=dtype
    )
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    return retriever


@pytest.mark.parametrize("method", METHODS)
def test_scores_equal_bm25s_and_contributions_sum_to_them(sample, method):
    options = Bm25Options(bm25_k1=1.2, bm25_b=0.6, bm25_method=method)
    index = bm25_index(sample["ix"], options)
    ref = reference(sample["texts"], options)
    n = len(sample["texts"])
    worst = 0.0
    for text in sample["queries"].values():
        tokens = bm25s.tokenize([text], stopwords="en", show_progress=False)
        # bm25s's retrieve over every item: (rows, scores) best first
        rows, scores = ref.retrieve(tokens, k=n, show_progress=False)
        expected = np.zeros(n)
        expected[rows[0]] = scores[0]
        for row in range(n):
            terms = index.terms(text, row)
            summed = math.fsum(t["contribution"] for t in terms)
            assert summed == pytest.approx(expected[row], rel=0, abs=FLOAT64), (text, row)
            worst = max(worst, abs(summed - expected[row]))
            for t in terms:
                assert t["contribution"] == pytest.approx(t["count"] * t["term_score"], abs=0)
        # the ranking lists only items holding a query token, with bm25s's scores
        for item, score in index.ranking(text, 100):
            row = index.ids.index(item)
            assert score == pytest.approx(expected[row], rel=0, abs=FLOAT64)
    assert worst <= 1e-5


def test_scores_equal_bm25s_defaults_in_single_precision(sample):
    """Against bm25s as a user runs it (float32): each term score is rounded once and each
    addition once, so a score of n terms differs by at most 2 · n · 2⁻²⁴ · Σ|terms|."""
    options = Bm25Options()
    index = bm25_index(sample["ix"], options)
    ref = reference(sample["texts"], options, dtype="float32")
    worst = 0.0
    for text in sample["queries"].values():
        tokens = bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)[0]
        if not tokens:
            continue
        expected = ref.get_scores(tokens)
        for row in range(len(sample["texts"])):
            terms = index.terms(text, row)
            magnitude = math.fsum(abs(t["contribution"]) for t in terms)
            bound = 2 * max(1, len(tokens)) * 2.0**-24 * magnitude
            diff = abs(math.fsum(t["contribution"] for t in terms) - float(expected[row]))
            assert diff <= bound, (text, row, diff, bound)
            worst = max(worst, diff)
    assert worst <= 1e-5


def test_contributions_follow_the_published_formula(sample):
    """Lucene's BM25 (Kamphuis et al. 2020) written out in the test: idf = ln(1 + (N − df +
    0.5)/(df + 0.5)), tf / (tf + k1 · (1 − b + b · |d| / avg|d|)), per query token."""
    k1, b = 0.9, 0.4
    index = bm25_index(sample["ix"], Bm25Options(bm25_k1=k1, bm25_b=b))
    docs = bm25s.tokenize(sample["texts"], stopwords="en", return_ids=False, show_progress=False)
    counts = [Counter(d) for d in docs]
    n, avg = len(docs), sum(len(d) for d in docs) / len(docs)
    df = Counter(t for c in counts for t in c)
    checked = 0
    for text in list(sample["queries"].values())[:20]:
        query = Counter(bm25s.tokenize([text], stopwords="en", return_ids=False)[0])
        for row in range(n):
            expected = {}
            for token, times in query.items():
                tf = counts[row].get(token, 0)
                if tf:
                    idf = math.log(1 + (n - df[token] + 0.5) / (df[token] + 0.5))
                    norm = tf / (tf + k1 * (1 - b + b * len(docs[row]) / avg))
                    expected[token] = times * idf * norm
            got = {t["word"]: t["contribution"] for t in index.terms(text, row)}
            assert set(got) == set(expected), (text, row)
            for token, value in expected.items():
                assert got[token] == pytest.approx(value, rel=1e-12), (text, row, token)
                checked += 1
    assert checked > 100


def test_the_why_of_a_bm25_win_shows_bm25s_terms(sample):
    result = evaluate_systems(SystemsSpec(indexes=[sample["path"]], bm25=Bm25Options()))
    comparison = result.section("comparison")
    name = Bm25Options().name
    assert [s.name for s in comparison.systems] == ["ix", name]
    ref = reference(sample["texts"], Bm25Options())
    ids = [str(i) for i in sample["ix"].column("id")]
    wins = [w for w in comparison.why if w.system_b == name and w.value_b > w.value_a]
    assert wins, "BM25 wins no query of the sample"
    for why in wins:
        assert "no decomposition" not in why.note
        tokens = bm25s.tokenize([why.query], stopwords="en", return_ids=False)[0]
        expected = ref.get_scores(tokens)
        for item in (why.relevant, why.rival):
            if item is None:
                continue
            words_b = item.words_b
            # BM25's side: bm25s's query tokens, summing to bm25s's score of the item
            assert {w["word"] for w in words_b} <= set(tokens)
            total = math.fsum(w["contribution"] for w in words_b)
            assert total == pytest.approx(expected[ids.index(item.id)], abs=FLOAT64)
            assert item.score_b == pytest.approx(total, abs=FLOAT64)
            # SPLADE's side: its own q ⊙ d, never BM25's terms
            assert all("term_score" not in w for w in item.words_a)
        for d in why.decisive_b:
            assert d["word"] in tokens
        if why.rival is not None and why.decisive_b:
            gap = abs(why.relevant.score_b - why.rival.score_b)
            assert math.fsum(d["delta"] for d in why.decisive_b) >= gap - FLOAT64
    # the blame shift does not put the collection's failure words under BM25's name
    shift = comparison.blame_shift[0]
    assert shift["a_not_b"] == shift["b_not_a"] == []
    assert "BM25" in shift["note"]  # said, not an empty table
    # nor its costs: BM25 is not ranked by the stored index, whose FLOPs and bytes are SPLADE's
    assert set(comparison.efficiency[name].values()) == {None}
    assert comparison.efficiency["ix"]["flops"] > 0
    # nor the causes of BM25's new failures: BM25 has no expansion terms to win on
    fixes = comparison.fixes[0]
    assert "won on expansion terms" not in {c["cause"] for c in fixes["broken_causes"]}
    counts = {c["cause"]: c["failures_b"] for c in fixes["causes"]}
    assert counts.get("won on expansion terms", 0) == 0
    # a comparison kept as a run and read back (a page reload) explains BM25 the same way
    restored = type(comparison).from_state(comparison.to_state())
    again = why_of(restored, wins[0].query_id, (wins[0].system_a, wins[0].system_b))
    assert again.relevant.words_b == wins[0].relevant.words_b
    assert again.decisive_b == wins[0].decisive_b


def test_cli_evaluate_bm25_end_to_end(sample, cli, tmp_path):
    run = cli(
        "evaluate",
        "--index",
        sample["path"],
        "--bm25",
        "--bm25-k1",
        "1.2",
        "--bm25-b",
        "0.6",
        "--out",
        tmp_path / "out",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    doc = run.json()
    name = "bm25 (bm25s k1=1.2 b=0.6 method=lucene)"
    bm25 = next(s for s in doc["systems"] if s["kind"] == "bm25")
    assert bm25["name"] == name
    assert (bm25["bm25"]["k1"], bm25["bm25"]["b"], bm25["bm25"]["method"]) == (1.2, 0.6, "lucene")
    assert "stop words" in bm25["bm25"]["tokenizer"]
    # its measures are ir-measures' on BM25's ranking computed here with bm25s
    ref = reference(sample["texts"], Bm25Options(bm25_k1=1.2, bm25_b=0.6))
    ids = [str(i) for i in sample["ix"].column("id")]
    judged = [q for q in sample["queries"] if q in sample["qrels"]]
    docs = bm25s.tokenize(sample["texts"], stopwords="en", return_ids=False, show_progress=False)
    run_rows = []
    for q in judged:
        tokens = bm25s.tokenize([sample["queries"][q]], stopwords="en", return_ids=False)[0]
        scores = ref.get_scores(tokens) if tokens else np.zeros(len(ids))
        held = [r for r, t in enumerate(docs) if set(t) & set(tokens)]
        run_rows += [ir_measures.ScoredDoc(q, ids[r], float(scores[r])) for r in held]
    qrels = [ir_measures.Qrel(q, d, r) for q in judged for d, r in sample["qrels"][q].items()]
    expected = ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, run_rows)
    assert doc["means"][name]["nDCG@10"] == pytest.approx(
        expected[ir_measures.nDCG @ 10], abs=60 * 2.0**-52
    )
    assert (
        json.loads((tmp_path / "out" / "comparison.json").read_text())["systems"][1]["name"] == name
    )
    page = (tmp_path / "out" / "comparison.html").read_text()
    assert "BM25 term score" in page and f"words under {name}" in page


def test_cli_bm25_bad_cases_are_one_line(sample, cli, effnet, tmp_path):
    one_line_error(
        cli("evaluate", "--index", sample["path"], "--bm25-k1", "2"), "--bm25-k1", "--bm25"
    )
    one_line_error(
        cli("evaluate", "--index", sample["path"], "--bm25", "--bm25-method", "okapi"),
        "--bm25-method",
    )
    one_line_error(
        cli("evaluate", "--index", sample["path"], "--bm25", "--bm25-b", "1.5"), "--bm25-b"
    )
    photos = tmp_path / "photos"
    photos.mkdir()
    for i, colour in enumerate(("red", "blue")):
        Image.new("RGB", (32, 32), colour).save(photos / f"p{i}.png")
    build_index(effnet, photos, tmp_path / "images")
    line = one_line_error(cli("evaluate", "--index", tmp_path / "images", "--bm25"), "images")
    assert "not texts" in line
    # a collection of texts holding stop words only
    (tmp_path / "items.csv").write_text("id,text\nd1,the of and\nd2,a an it\n")
    splade_ix = tmp_path / "stop"
    assert (
        cli(
            "index",
            "--encoder",
            "splade-tiny",
            "--source",
            tmp_path / "items.csv",
            "--out",
            splade_ix,
        ).returncode
        == 0
    )
    (tmp_path / "q.tsv").write_text("q1\tthe dog\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\n")
    line = one_line_error(
        cli(
            "evaluate",
            "--index",
            splade_ix,
            "--bm25",
            "--queries",
            tmp_path / "q.tsv",
            "--qrels",
            tmp_path / "qrels.txt",
        ),
        "stop",
    )
    assert "BM25" in line
    spec = SystemsSpec(indexes=[sample["path"]], bm25="lucene")
    refused(lambda: evaluate_systems(spec), "bm25 must be Bm25Options")


def test_the_page_adds_bm25_as_the_command_does(tmp_path, monkeypatch, cli, downloads):
    ix = bench_index(tmp_path, monkeypatch, cli)
    at = app_page("app_pages/evaluation.py")
    at.radio(key="eval_systems_mode").set_value("Several systems").run()
    at.toggle(key="sys_bm25").set_value(True).run()
    at.number_input(key="sys_bm25_k1").set_value(0.9).run()
    at.number_input(key="sys_resamples").set_value(500).run()
    click_and_wait(at, next(b for b in at.button if b.label == "Compare").click)
    assert not at.exception and not at.error
    name = "bm25 (bm25s k1=0.9 b=0.75 method=lucene)"
    assert [s.name for s in page_result(at).systems] == ["bench", name]
    run = cli(
        "evaluate", "--index", ix, "--bm25", "--bm25-k1", "0.9", "--resamples", "500", "--json"
    )
    assert run.returncode == 0, run.stderr
    page, command = json.loads(downloads["comparison.json"]), json.loads(run.stdout)
    assert without_wall_times(page) == without_wall_times(command)
