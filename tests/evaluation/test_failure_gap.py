"""A failure's score gap on both sides and its causes, against references computed here
independently: each item's score as the dense float64 dot product of its stored vector with
the gated query vector, the query's own tokens from the encoder's tokenizer, content words
from the stop-word file read directly, and the texts' words by a regular expression."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import index_collection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.gating import DEFAULT_GATE_K, gate
from lexlens.analysis.core.words import entry_label
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from tests.datasets.files import beir_of_tables

CORPUS = {
    "d-toucan": "toucan, a tropical bird with a large colourful bill",
    "d-eagle": "bald eagle: a huge bird of prey with a hooked beak and huge wings",
    "d-bread": "fresh bread in a bakery window",
    "d-rocket": "a rocket launching into the night sky",
    "d-chess": "chess opening gambit played by grandmasters",
    "d-violin": "violin concerto in d minor, played by an orchestra",
    "d-coffee": "espresso poured into a small white cup",
    "d-mug": "a mug of hot coffee on a wooden table",
    "d-spider": "garden spider weaving an orb web between two branches",
    "d-dipper": "a small round river bird with long legs",
    "d-snake": "rattlesnake: a venomous snake that shakes the rattle on its tail",
    "d-cobra": "king cobra, the longest venomous snake, raises its hood",
}
QUERIES = {
    "q1": "tropical bird with a huge beak",
    "q2": "zebra stripes",
    "q3": "rocket in space",
    "q4": "a cup of coffee",
    "q5": "eight legged creature spinning a round web",
    "q6": "venomous snake",
    "q7": "violin music",
}
QRELS = {
    "q1": {"d-toucan": 1},
    "q2": {"d-bread": 1},  # shares no term with "zebra stripes": not retrieved
    "q3": {"d-rocket": 1},
    "q4": {"d-coffee": 1},
    "q5": {"d-spider": 1},
    "q6": {"d-snake": 1},
    "q7": {"ghost": 1},  # no relevant item in the collection
}


@pytest.fixture(scope="module")
def index(tmp_path_factory, splade):
    folder = tmp_path_factory.mktemp("gap")
    beir = folder / "beir"
    beir_of_tables(beir, CORPUS, QUERIES, QRELS)
    index_collection(splade, beir, folder / "ix")
    return open_index(folder / "ix")


@pytest.fixture(scope="module")
def result(index, splade):
    return evaluate_benchmark(index, top=10, query_encoder=splade)


@pytest.fixture(scope="module")
def by_hand(index, splade):
    """Per query: the gated query vector and every item's dense float64 score."""
    ids = [str(i) for i in index.column("id")]
    dense = np.stack([index.vector(r) for r in range(len(index))]).astype(np.float64)
    out = {}
    encodings = splade.encode_texts(list(QUERIES.values()), side="query")  # one batch, as run
    for (q, _), enc in zip(QUERIES.items(), encodings, strict=True):
        vector = gate(enc, splade.vocab, DEFAULT_GATE_K).astype(np.float64)
        out[q] = {
            "vector": vector,
            "scores": dict(zip(ids, dense @ vector, strict=True)),
            "dense": dict(zip(ids, dense, strict=True)),
        }
    return out


def _stop_words() -> set[str]:
    import lexlens.models

    path = Path(lexlens.models.__file__).parent / "data" / "stop_words.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    return {w for line in lines if (w := line.split("#", 1)[0].strip())}


def test_silent_wrong_the_gap_has_both_sides_and_they_sum_to_the_score_difference(result, by_hand):
    failures = [f for f in result.failures if f.nonrelevant and f.relevant]
    assert len(failures) >= 3
    for f in failures:
        scores = by_hand[f.query_id]["scores"]
        gap = scores[f.nonrelevant.id] - scores[f.relevant.id]  # computed here, not read
        n, r = f.favour_nonrelevant, f.favour_relevant
        assert n.total + r.total == pytest.approx(gap, abs=1e-9)
        assert f.query_delta + f.expansion_delta == pytest.approx(gap, abs=1e-9)
        for side, sign in ((n, 1), (r, -1)):
            assert all(sign * w["delta"] > 0 for w in side.words)
            listed = sum(w["delta"] for w in side.words)
            assert listed + side.other_delta == pytest.approx(side.total, abs=1e-12)
            for w in side.words:
                assert w["delta"] == pytest.approx(w["nonrelevant"] - w["relevant"], abs=1e-12)
    # The relevant item is not silent: some failure has words favouring it.
    assert any(f.favour_relevant.words for f in failures)
    # Decisive words are what blame counts: the fewest largest δ reaching the gap.
    for f in failures:
        deltas = [d["delta"] for d in f.decisive]
        if f.gap > 0:
            assert sum(deltas) >= f.gap - 1e-12 and sum(deltas[:-1]) < f.gap


def test_silent_wrong_the_failure_view_shows_both_sides_and_the_net_gap(result, by_hand, tmp_path):
    """The page's words: the gap computed here, each side's sum, the net; the words favouring
    the relevant item in their own table."""
    from streamlit.testing.v1 import AppTest

    f = next(f for f in result.failures if f.favour_relevant and f.favour_relevant.words)
    scores = by_hand[f.query_id]["scores"]
    gap = scores[f.nonrelevant.id] - scores[f.relevant.id]
    state = tmp_path / "failure.json"
    state.write_text(json.dumps(f.to_state()))

    def view(path):
        import json
        from pathlib import Path

        from lexlens.analysis.evaluation.explain import Failure
        from lexlens.app.views.evaluation import show_failure

        show_failure(Failure.from_state(json.loads(Path(path).read_text())), None)

    at = AppTest.from_function(view, args=(str(state),)).run()
    assert not at.exception
    gap_line = next(m.value for m in at.markdown if m.value.startswith("**Score gap**"))
    n_total = sum(w["delta"] for w in f.favour_nonrelevant.words) + f.favour_nonrelevant.other_delta
    r_total = sum(w["delta"] for w in f.favour_relevant.words) + f.favour_relevant.other_delta
    assert f"= {gap:.4f} = {n_total:+.4f} (words favouring the wrong item) {r_total:+.4f}" in (
        gap_line
    )
    assert f"net of both sides {gap:+.6f}" in " ".join(c.value for c in at.caption)
    tables = [t.value for t in at.dataframe]
    relevant_side = next(t for t in tables if "δ" in t.columns and (t["δ"] < 0).all())
    assert list(relevant_side["word (or piece)"]) == [
        entry_label(w) for w in f.favour_relevant.words
    ]


def test_silent_wrong_failure_causes_follow_their_definitions(result, by_hand, splade):
    stop = _stop_words()
    expected: dict[str, list[str]] = {}
    for f in result.failures:
        q = f.query_id
        held = [d for d in QRELS[q] if d in CORPUS]
        if not held:
            expected[q] = ["not in the collection"]
            continue
        causes = []
        query_words = set(re.findall(r"[^\W_]+", QUERIES[q].lower())) - stop
        item = set(re.findall(r"[^\W_]+", CORPUS[f.relevant.id].lower()))
        if query_words - item:
            causes.append("lexical mismatch")
        own = {splade.vocab.index(t) for t in splade.tokenizer.tokenize(QUERIES[q])}
        vec, dense = by_hand[q]["vector"], by_hand[q]["dense"]
        diff = vec * (dense[f.nonrelevant.id] - dense[f.relevant.id])
        gap = float(diff.sum())
        if gap > 0 and float(diff[sorted(own)].sum()) <= 0:
            causes.append("won on expansion terms")
        if by_hand[q]["scores"][f.relevant.id] <= 0:
            causes.append("not retrieved")
        expected[q] = causes or ["other"]
        assert sorted(f.missing_words) == sorted(query_words - item)
        assert f.query_length == len(QUERIES[q].split())
    assert {f.query_id: f.causes for f in result.failures} == expected
    assert "not retrieved" in expected["q2"] and "lexical mismatch" in expected["q2"]
    assert result.causes == {
        c: sum(c in v for v in expected.values())
        for c in (
            "lexical mismatch",
            "won on expansion terms",
            "not retrieved",
            "not in the collection",
            "other",
        )
    }
    rows = list(csv.DictReader(io.StringIO(result.files()["failures.csv"].decode())))
    assert {r["query_id"]: r["causes"].split("; ") for r in rows} == expected
    assert Counter(c for v in expected.values() for c in v)["not in the collection"] == 1


def test_silent_wrong_the_kept_counts_are_the_files_lines(index, result):
    kept = index.kept_benchmark()
    assert kept["queries"] == len(QUERIES)
    assert kept["judgements"] == sum(len(v) for v in QRELS.values())
    assert result.settings["judgements"] == sum(len(v) for v in QRELS.values())
    assert result.settings["queries"] == len(QUERIES)


def test_silent_wrong_failures_are_filtered_by_cause_and_query_length(result):
    from lexlens.analysis.evaluation.result import select_failures

    everything = select_failures(result.failures)
    assert everything == list(result.failures)
    for cause in result.causes:
        chosen = select_failures(result.failures, [cause])
        assert [f.query_id for f in chosen] == [
            f.query_id for f in result.failures if cause in f.causes
        ]
        assert len(chosen) == result.causes[cause]
    lengths = {f.query_id: len(QUERIES[f.query_id].split()) for f in result.failures}
    short = select_failures(result.failures, None, (1, 2))
    assert [f.query_id for f in short] == [q for q, n in lengths.items() if n <= 2]
    assert select_failures(result.failures, [], None) == []
