"""The words to blame against their base rate among the successful queries, and the failure
rate in slices of the queries by length, expansion share and mean IDF, each slice against the
rest.

References: every rate counted here from the per-query table (success from the measures'
first relevant rank), Fisher's p from scipy on the tables built here, Benjamini–Hochberg by
hand; the features recomputed here: the length by a regular expression, the IDF from the
stored vectors read as one scipy matrix, the expansion share from the query vector and the
stored row with the query's own tokens read from the tokenizer's ids; tertiles by numpy."""

from __future__ import annotations

import csv
import io
import json
import math
import random
import re

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import index_collection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.evaluation.causes import QueryCauses, blame_rates
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.analysis.evaluation.result import BLAME_COLUMNS
from lexlens.analysis.evaluation.slices import FEATURES, SLICE_COLUMNS, feature_slices
from lexlens.analysis.retrieval.queries import QuerySpec
from tests.datasets.files import beir_of_tables

WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "paper",
    "violin",
    "rocket",
    "garden",
    "winter",
    "copper",
    "glass",
    "honey",
    "bridge",
    "candle",
    "desert",
    "forest",
    "harbor",
    "island",
    "jacket",
    "kettle",
    "ladder",
    "meadow",
    "needle",
    "orange",
    "pencil",
    "quilt",
    "saddle",
    "tunnel",
    "umbrella",
    "valley",
    "wagon",
    "yogurt",
    "zipper",
    "anchor",
    "basket",
    "castle",
    "dragon",
    "engine",
    "feather",
    "guitar",
    "hammer",
    "jungle",
    "lantern",
    "mirror",
    "noodle",
    "oyster",
    "parrot",
]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, splade):
    """60 queries of one to five words, each with a relevant item that spells most of them
    and a distractor sharing the first, among 40 items of random words; evaluated with
    splade-tiny: failures and successes both."""
    rng = random.Random(5)
    folder = tmp_path_factory.mktemp("blame-slices")
    corpus = {f"d{i}": " ".join(rng.sample(WORDS, 3)) for i in range(40)}
    queries, qrels = {}, {}
    for n in range(60):
        words = rng.sample(WORDS, 1 + n % 5)
        queries[f"q{n}"] = " ".join(words)
        kept = words[1:] if n % 3 == 0 and len(words) > 1 else words
        corpus[f"r{n}"] = " ".join(kept + rng.sample(WORDS, 3))
        corpus[f"x{n}"] = " ".join([words[0], *rng.sample(WORDS, 2)])
        qrels[f"q{n}"] = {f"r{n}": 1, f"x{n}": 0}
    beir_of_tables(folder / "beir", corpus, queries, qrels)
    index_collection(splade, folder / "beir", folder / "ix")
    index = open_index(folder / "ix")
    result = evaluate_benchmark(index, query_encoder=splade)
    return result, index, queries


def _bh(ps: list[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p values, by hand."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    adjusted = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, ps[i] * m / rank)
        adjusted[i] = running
    return adjusted


def _sides(result) -> tuple[dict[str, dict], list[str], list[str]]:
    """The per-query table by id, the failing and the successful queries (success: the first
    relevant rank of the measures' table is 1)."""
    judged = [q for q in result.metrics["per_query"] if q["relevant"] > 0]
    success = {q["id"]: q["first_relevant_rank"] == 1 for q in judged}
    tested = {row["id"]: row for row in result.cause_rates["per_query"]}
    assert set(tested) == set(success)
    failures = [q for q, ok in success.items() if not ok]
    successes = [q for q, ok in success.items() if ok]
    assert len(failures) >= 10 and len(successes) >= 10  # both sides are measured
    return tested, failures, successes


def test_silent_wrong_blame_base_rates_recount_from_the_per_query_table(evaluated):
    from scipy.stats import fisher_exact

    result, _, _ = evaluated
    tested, failures, successes = _sides(result)
    decisive = {f.query_id: [d["word"] for d in f.decisive] for f in result.failures}
    for q in failures:
        assert tested[q]["blame_words"] == decisive[q]
    rows = [b for b in result.blame if b["pushed"]]
    assert len(rows) >= 5 and all(b["p"] is not None for b in rows)
    ps = []
    for row in rows:
        a = sum(row["word"] in tested[q]["blame_words"] for q in failures)
        b = sum(row["word"] in tested[q]["blame_words"] for q in successes)
        assert a == row["pushed"] and b == row["successes_with"]
        assert row["failure_rate"] == a / len(failures)
        assert row["success_rate"] == b / len(successes)
        lift = (a / len(failures)) / (b / len(successes)) if b else None
        assert row["lift"] == (pytest.approx(lift, rel=1e-12) if b else None)
        _, p = fisher_exact([[a, len(failures) - a], [b, len(successes) - b]])
        assert row["p"] == pytest.approx(p, rel=1e-12)
        ps.append(p)
    for row, p_bh in zip(rows, _bh(ps), strict=True):
        assert row["p_bh"] == pytest.approx(p_bh, rel=1e-9)
    # a word only missing from relevant items decides nothing: not tested, not in BH's family
    for row in result.blame:
        if not row["pushed"]:
            assert row["p"] is None and row["lift"] is None
    # successes are measured: some word favours a success's wrong item
    assert any(b["successes_with"] for b in rows)


def test_silent_wrong_a_success_has_the_words_that_favour_its_wrong_item(evaluated, splade):
    """A success's blame words: every word whose q·n − q·r is above 0 (n its highest-ranked
    non-relevant item, r its first), here by hand on the single-token words of the texts."""
    result, index, queries = evaluated
    tested, _, successes = _sides(result)
    vocab = index.vocab
    position = {t: i for i, t in enumerate(vocab)}
    single = [w for w in WORDS if w in position]
    assert len(single) >= 20
    spec = QuerySpec(splade, result.settings["query_mode"], result.settings["gate_k"])
    rows = {d: r for r, d in enumerate(str(i) for i in index.column("id"))}
    dense = index.rows(0, len(index)).toarray()
    checked = 0
    for q in successes:
        ranking = [d for d, _ in result.run[q]]
        rival = next((d for d in ranking if d != f"r{q[1:]}"), None)  # r{n}: q{n}'s one relevant
        if rival is None:
            continue
        vector = spec.vectors([queries[q]])[0]
        delta = vector * (dense[rows[rival]] - dense[rows[ranking[0]]])
        for w in single:
            if any(other != w and other.startswith(w) for other in WORDS):
                continue  # a prefix of another word may be joined with its pieces
            assert (w in tested[q]["blame_words"]) == (delta[position[w]] > 0), (q, w)
            checked += 1
    assert checked >= 100


def test_a_word_successes_share_as_often_has_lift_1_and_p_1():
    """A word deciding half the failures and favouring the wrong item in half the successes:
    lift 1, p 1; a word deciding every failure and no success: lift unbounded, p tiny."""
    queries = [
        QueryCauses(f"f{i}", False, blame_words=["common", "bad"] if i % 2 else ["bad"])
        for i in range(100)
    ] + [QueryCauses(f"s{i}", True, blame_words=["common"] if i % 2 else []) for i in range(60)]
    blamed = [
        {"word": w, "pushed": n, "amount": 1.0, "mismatch": 0}
        for w, n in (("common", 50), ("bad", 100))
    ]
    rows = {r["word"]: r for r in blame_rates(blamed, queries)}
    common = rows["common"]
    assert common["failure_rate"] == common["success_rate"] == 0.5
    assert common["lift"] == 1.0 and common["p"] == pytest.approx(1.0)
    assert rows["bad"]["lift"] is None and rows["bad"]["p"] < 1e-30


def test_a_slice_that_fails_as_often_as_the_rest_has_lift_1_and_p_1():
    """Query lengths 1, 2, 3 spread alike over 90 failures and 60 successes: every slice
    fails at the base rate, lift 1, p 1; a feature only failures have high: p tiny."""
    queries = [
        QueryCauses(f"f{i}", False, query_length=1 + i % 3, mean_idf=5.0 + i) for i in range(90)
    ] + [QueryCauses(f"s{i}", True, query_length=1 + i % 3, mean_idf=-float(i)) for i in range(60)]
    rows = feature_slices(queries)
    length = [r for r in rows if r["feature"] == "query_length"]
    assert [r["slice"] for r in length] == ["1 word", "2 words", "3 words"]
    for row in length:
        assert row["queries"] == 50 and row["failures"] == 30
        assert row["failure_rate"] == row["rest_failure_rate"] == row["base_failure_rate"] == 0.6
        assert row["lift"] == 1.0 and row["p"] == pytest.approx(1.0)
    idf = [r for r in rows if r["feature"] == "mean_idf"]
    assert idf[-1]["failure_rate"] == 1.0 and idf[-1]["p"] < 1e-10
    assert not any(r["feature"] == "expansion_share" for r in rows)  # no query has it


def _features_by_hand(result, index, queries, splade) -> dict[str, dict[str, float | None]]:
    """Each judged query's length, mean IDF and expansion share, recomputed here."""
    matrix = index.rows(0, len(index))
    dense = matrix.toarray()
    n = dense.shape[0]
    df = (dense != 0).sum(axis=0).astype(np.float64)
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    rows = {d: r for r, d in enumerate(str(i) for i in index.column("id"))}
    spec = QuerySpec(splade, result.settings["query_mode"], result.settings["gate_k"])
    vocab = index.vocab
    out = {}
    for q in result.cause_rates["per_query"]:
        text = queries[q["id"]]
        ids = splade.encode_texts([text], "query")[0].input_ids
        own = {vocab[i] for i in ids} - {"[CLS]", "[SEP]"}
        own_cols = sorted({vocab.index(t) for t in own})
        vector = spec.vectors([text])[0]
        top = dense[rows[result.run[q["id"]][0][0]]]
        parts = vector.astype(np.float64) * top.astype(np.float64)
        mask = np.ones(len(vocab), bool)
        mask[own_cols] = False
        out[q["id"]] = {
            "query_length": len(re.findall(r"[A-Za-z0-9]+", text)),
            "mean_idf": float(np.mean(idf[own_cols])),
            "expansion_share": float(parts[mask].sum() / parts.sum()) if parts.sum() > 0 else None,
        }
    return out


def test_silent_wrong_features_recomputed_and_slices_recounted(evaluated, splade):
    from scipy.stats import fisher_exact

    result, index, queries = evaluated
    tested, failures, successes = _sides(result)
    by_hand = _features_by_hand(result, index, queries, splade)
    for q, row in tested.items():
        assert row["query_length"] == by_hand[q]["query_length"], q
        # IDFs ≈ 4 summed over ≤ 5 terms: float64 rounding far below 1e-9
        assert row["mean_idf"] == pytest.approx(by_hand[q]["mean_idf"], abs=1e-9), q
        # shares of sums of ≤ a few hundred products of float32 weights
        assert row["expansion_share"] == pytest.approx(by_hand[q]["expansion_share"], abs=1e-5), q
    slices = result.slices["slices"]
    assert {r["feature"] for r in slices} == set(FEATURES)
    ps = []
    for row in slices:
        values = {q: tested[q][row["feature"]] for q in tested}
        low, high = np.quantile(list(values.values()), [1 / 3, 2 / 3])
        edges = [-math.inf, low, *([high] if high != low else []), math.inf]
        bins = list(zip(edges, edges[1:], strict=False))
        inside = [q for q, v in values.items() if row["low"] <= v <= row["high"]]
        assert any(all(lo < values[q] <= hi for q in inside) for lo, hi in bins)
        a = sum(q in failures for q in inside)
        b = len(inside) - a
        assert (row["queries"], row["failures"]) == (len(inside), a)
        assert row["failure_rate"] == a / len(inside)
        rest = len(tested) - len(inside)
        assert row["rest_failure_rate"] == pytest.approx((len(failures) - a) / rest, rel=1e-12)
        assert row["base_failure_rate"] == len(failures) / len(tested)
        _, p = fisher_exact([[a, b], [len(failures) - a, len(successes) - b]])
        assert row["p"] == pytest.approx(p, rel=1e-12)
        ps.append(p)
    for row, p_bh in zip(slices, _bh(ps), strict=True):
        assert row["p_bh"] == pytest.approx(p_bh, rel=1e-9)
    for feature in FEATURES:  # the slices of a feature partition its queries
        assert sum(r["queries"] for r in slices if r["feature"] == feature) == len(tested)


def test_blame_and_slices_are_in_the_json_the_csv_the_text_and_the_report(evaluated):
    from lexlens.app.cli.evaluate_view import render

    result, _, _ = evaluated
    files = result.files()
    document = json.loads(files["evaluation.json"])
    assert document["slices"]["slices"] == result.slices["slices"]
    assert document["blame"][0]["p_bh"] == result.blame[0]["p_bh"]
    blame = list(csv.DictReader(io.StringIO(files["blame.csv"].decode())))
    assert list(blame[0]) == list(BLAME_COLUMNS)
    table = list(csv.reader(io.StringIO(files["slices.csv"].decode())))
    assert table[0] == list(SLICE_COLUMNS) and len(table) == 1 + len(result.slices["slices"])
    text = render(result)
    assert "words to blame against the base rate" in text
    assert "failure rate by query feature" in text
    page = files["evaluation.html"].decode()
    for anchor in ('id="blame-rates"', 'id="slices"'):
        assert anchor in page
    slices = page[page.index('id="slices"') :].split("</table>")[0]
    assert slices.count("<tr><td>") == len(result.slices["slices"])


def test_degenerate_slices_and_blame_without_successes():
    """Every query of one length: one slice, no rest, p 1; no query at all: no slice; no
    success: a word's lift and success rate undefined, p 1."""
    same = [QueryCauses(f"q{i}", i % 2 == 0, query_length=4) for i in range(10)]
    (row,) = feature_slices(same)
    assert (row["slice"], row["queries"], row["failures"]) == ("4 words", 10, 5)
    assert row["rest_failure_rate"] is None and row["p"] == 1.0 and row["lift"] == 1.0
    assert feature_slices([]) == []
    failed = [QueryCauses(f"f{i}", False, blame_words=["w"]) for i in range(3)]
    (word,) = blame_rates([{"word": "w", "pushed": 3, "amount": 1.0, "mismatch": 0}], failed)
    assert word["failure_rate"] == 1.0 and word["success_rate"] is None
    assert word["lift"] is None and word["p"] == 1.0 and word["p_bh"] == 1.0


def test_another_systems_run_has_no_expansion_share(evaluated, splade):
    """A run's scores are not decomposed: no query has an expansion share and the slices say
    so; the length and the mean IDF (the collection's) are still sliced."""
    result, index, queries = evaluated
    qrels = {q: {f"r{q[1:]}": 1, f"x{q[1:]}": 0} for q in queries}
    other = evaluate_benchmark(
        index, queries=queries, qrels=qrels, run=result.run, query_encoder=splade
    )
    assert all(row["expansion_share"] is None for row in other.cause_rates["per_query"])
    assert other.slices["lacking"]["expansion_share"] == len(queries)
    assert any("expansion_share" in n for n in other.slices["notes"])
    features = {r["feature"] for r in other.slices["slices"]}
    assert features == {"query_length", "mean_idf"}
