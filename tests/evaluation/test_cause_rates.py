"""Each cause of failure against its base rate among the successful queries: both rates, lift,
Fisher's exact test and Benjamini–Hochberg; a word variant ("terminate" / "terminates") is
not a missing word.

References: the rates counted here from the per-query table (success from the measures'
first relevant rank, causes from each failure and the per-query causes), Fisher's p from
scipy on the table built here, Benjamini–Hochberg by hand, missing words by hand with the
Snowball stemmer and the stop-word list read here."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

import pytest

from lexlens.analysis.collections.indexing import index_collection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.evaluation.causes import (
    CAUSE_COLUMNS,
    QueryCauses,
    base_rates,
    cause_lines,
)
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.analysis.evaluation.failures import CAUSES, LEXICAL_MISMATCH
from tests.datasets.files import beir_of_tables

#: Nouns, and words with a variant of the same Snowball stem (terminate, terminates).
_NOUNS = (
    "apple river stone cloud paper violin rocket garden winter copper glass honey "
    "terminate terminates running runs painted painting library libraries bridge candle "
    "desert forest harbor island jacket kettle ladder meadow needle orange pencil quilt "
    "saddle tunnel umbrella valley wagon yogurt zipper anchor basket castle dragon engine "
    "feather guitar hammer igloo jungle koala lantern mirror noodle oyster parrot"
)
WORDS = _NOUNS.split()


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, splade):
    """50 queries of two or three words, each with a relevant item that spells them (one
    word dropped for some) and a distractor sharing one of them, among 40 items of random
    words; evaluated with splade-tiny: failures and successes both."""
    rng = random.Random(3)
    folder = tmp_path_factory.mktemp("causes")
    corpus = {f"d{i}": " ".join(rng.sample(WORDS, 3)) for i in range(40)}
    queries, qrels = {}, {}
    for n in range(50):
        words = rng.sample(WORDS, rng.choice((2, 3)))
        queries[f"q{n}"] = " ".join(words)
        kept = words[1:] if n % 3 == 0 else words
        corpus[f"r{n}"] = " ".join(kept + rng.sample(WORDS, 3))
        corpus[f"x{n}"] = " ".join([words[0], *rng.sample(WORDS, 2)])
        qrels[f"q{n}"] = {f"r{n}": rng.randint(1, 2), f"x{n}": 0}
    corpus["d-term"] = "the contract terminates at noon"
    queries["q-term"] = "terminate contract"
    qrels["q-term"] = {"d-term": 1}
    beir_of_tables(folder / "beir", corpus, queries, qrels)
    index_collection(splade, folder / "beir", folder / "ix")
    result = evaluate_benchmark(open_index(folder / "ix"), query_encoder=splade)
    return result, corpus, queries, qrels


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


def test_silent_wrong_base_rates_recount_from_the_per_query_table(evaluated):
    from scipy.stats import fisher_exact

    result, _, _, _ = evaluated
    rates = result.cause_rates
    judged = [q for q in result.metrics["per_query"] if q["relevant"] > 0]
    success = {q["id"]: q["first_relevant_rank"] == 1 for q in judged}
    tested = {row["id"]: row for row in rates["per_query"]}
    assert set(tested) == set(success)
    own = {f.query_id: f.causes for f in result.failures}
    assert set(own) == {q for q, ok in success.items() if not ok}
    failures = [q for q, ok in success.items() if not ok]
    successes = [q for q, ok in success.items() if ok]
    assert len(failures) >= 10 and len(successes) >= 10  # both sides are measured
    for q in failures:
        assert tested[q]["causes"] == own[q] and not tested[q]["success"]
    rows = {r["cause"]: r for r in rates["causes"]}
    assert list(rows) == list(CAUSES)
    ps = []
    for cause in CAUSES:
        a = sum(cause in own[q] for q in failures)
        b = sum(cause in tested[q]["causes"] for q in successes)
        row = rows[cause]
        assert (row["failures_with"], row["successes_with"]) == (a, b)
        assert row["failure_rate"] == a / len(failures)
        assert row["success_rate"] == b / len(successes)
        assert row["lift"] == (
            pytest.approx((a / len(failures)) / (b / len(successes)), rel=1e-12) if b else None
        )
        _, p = fisher_exact([[a, len(failures) - a], [b, len(successes) - b]])
        assert row["p"] == pytest.approx(p, rel=1e-12)
        ps.append(p)
    for cause, p_bh in zip(CAUSES, _bh(ps), strict=True):
        assert rows[cause]["p_bh"] == pytest.approx(p_bh, rel=1e-9)
    # A success is never "not retrieved" nor "not in the collection": its relevant item is first.
    assert rows["not retrieved"]["successes_with"] == 0


def test_silent_wrong_missing_words_are_checked_by_hand_with_snowball(evaluated):
    """Every query's missing words: its content words its relevant item spells in no form of
    the same Snowball stem (the item explained: a failure's best relevant, a success's first)."""
    import re

    import snowballstemmer

    from lexlens.models import __file__ as models_file

    result, corpus, queries, _ = evaluated
    stop = set(Path(models_file).with_name("data").joinpath("stop_words.txt").read_text().split())
    stemmer = snowballstemmer.stemmer("english")
    item_of = {f.query_id: f.relevant.id for f in result.failures if f.relevant}
    for q in result.metrics["per_query"]:
        if q["relevant"] and q["first_relevant_rank"] == 1:
            item_of[q["id"]] = result.run[q["id"]][0][0]
    tested = {row["id"]: row for row in result.cause_rates["per_query"]}
    for qid, item in item_of.items():
        words = set(re.findall(r"[^\W_]+", queries[qid].casefold())) - stop
        spelled = set(re.findall(r"[^\W_]+", corpus[item].casefold()))
        stems = {stemmer.stemWord(w) for w in spelled}
        missing = sorted(w for w in words - spelled if stemmer.stemWord(w) not in stems)
        assert tested[qid]["missing_words"] == missing, qid
        assert (LEXICAL_MISMATCH in tested[qid]["causes"]) == bool(missing)


def test_silent_wrong_a_word_variant_is_not_missing(evaluated):
    result, _, _, _ = evaluated
    row = next(r for r in result.cause_rates["per_query"] if r["id"] == "q-term")
    assert "terminate" not in row["missing_words"]
    assert row["variants"] == ["terminate ≈ terminates"]
    failure = next((f for f in result.failures if f.query_id == "q-term"), None)
    if failure is not None:
        assert "terminate" not in failure.missing_words


def test_a_cause_successes_share_as_often_has_lift_1_and_p_1():
    """Half the failures and half the successes lack a word: lift 1, p 1; every failure
    and no success not retrieved: lift unbounded, p tiny."""
    queries = [
        QueryCauses(
            f"f{i}",
            False,
            [LEXICAL_MISMATCH, "not retrieved"] if i % 2 else ["not retrieved"],
        )
        for i in range(100)
    ] + [QueryCauses(f"s{i}", True, [LEXICAL_MISMATCH] if i % 2 else ["other"]) for i in range(60)]
    rows = {r["cause"]: r for r in base_rates(queries)}
    mismatch = rows[LEXICAL_MISMATCH]
    assert mismatch["failure_rate"] == mismatch["success_rate"] == 0.5
    assert mismatch["lift"] == 1.0 and mismatch["p"] == pytest.approx(1.0)
    assert mismatch["p_bh"] == pytest.approx(1.0)
    retrieved = rows["not retrieved"]
    assert retrieved["lift"] is None and retrieved["p"] < 1e-30
    lines = cause_lines({"failures": 100, "successes": 60, "causes": list(rows.values())})
    assert any(line.startswith("  not retrieved: 100 % of failures (100)") for line in lines)
    assert any("lift ∞" in line for line in lines)


def test_cause_rates_are_in_the_json_the_csv_and_the_text(evaluated):
    from lexlens.app.cli.evaluate_view import render

    result, _, _, _ = evaluated
    files = result.files()
    document = json.loads(files["evaluation.json"])
    assert "cause_rates" in document
    assert document["cause_rates"]["causes"] == result.cause_rates["causes"]
    table = list(csv.reader(io.StringIO(files["causes.csv"].decode())))
    assert table[0] == list(CAUSE_COLUMNS) and [r[0] for r in table[1:]] == list(CAUSES)
    assert "causes against the base rate" in render(result)
    page = files["evaluation.html"].decode()
    assert 'id="cause-rates"' in page and "Fisher" in page
    table = page[page.index('id="cause-rates"') :].split("</table>")[0]
    assert table.count("<tr><td>") == len(CAUSES)


def test_silent_wrong_judged_at_10_and_rival_unjudged_by_hand(evaluated):
    """Judged@10: the share of each ranking's first 10 that the judgements name (by hand,
    as ir-measures defines it); a failure whose first item is unjudged is marked and counted
    apart per cause."""
    result, _, _, qrels = evaluated
    table = {q["id"]: q for q in result.metrics["per_query"]}
    for q, row in table.items():
        top = [d for d, _ in result.run[q][:10]]
        share = sum(d in qrels[q] for d in top) / len(top) if top else 0.0
        assert row["Judged@10"] == pytest.approx(share, abs=1e-12)
    mean = sum(row["Judged@10"] for row in table.values()) / len(table)
    assert result.metrics["aggregate"]["Judged@10"] == pytest.approx(mean, abs=1e-12)
    assert 0 < mean < 1
    tested = {row["id"]: row for row in result.cause_rates["per_query"]}
    unjudged = {
        f.query_id for f in result.failures if result.run[f.query_id][0][0] not in qrels[f.query_id]
    }
    assert unjudged and unjudged != {f.query_id for f in result.failures}
    assert {q for q, row in tested.items() if row["rival_unjudged"]} == unjudged
    assert result.cause_rates["rival_unjudged"] == len(unjudged)
    for row in result.cause_rates["causes"]:
        by_hand = sum(row["cause"] in tested[q]["causes"] for q in unjudged)
        assert row["failures_rival_unjudged"] == by_hand
    header = result.files()["per_query.csv"].decode().splitlines()[0]
    assert header.endswith(",Judged@10")


def test_silent_wrong_a_variant_is_not_a_missing_word_of_a_failure():
    from lexlens.analysis.evaluation.failures import missing_words, word_variants

    item = {"text": "The contract terminates; the libraries close."}
    query = "terminate library contract deadline"
    assert missing_words(query, item) == ["deadline"]
    assert word_variants(query, item) == ["library ≈ libraries", "terminate ≈ terminates"]
