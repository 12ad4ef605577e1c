"""A failure's words that are no whole word of the query's or the items' texts (a piece
"dr" of "dromedaries", "##ome") are marked pieces in the JSON and shown marked in the CSV
and the HTML report, never as words; the reference is the texts' own words (a regular
expression) and the tokenizer's pieces of each."""

from __future__ import annotations

import csv
import io
import re

import pytest

from lexlens.analysis.collections.indexing import index_collection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from tests.datasets.files import beir_of_tables

CORPUS = {
    "d-drom": "a dromedary walking through the desert sand",
    "d-bact": "a bactrian camel with two humps resting",
    "d-terrier": "a small terrier digging in the garden",
}
QUERIES = {"q1": "dromedaries in the sand"}
QRELS = {"q1": {"d-bact": 1}}


@pytest.fixture(scope="module")
def result(tmp_path_factory, splade):
    folder = tmp_path_factory.mktemp("pieces")
    beir_of_tables(folder / "beir", CORPUS, QUERIES, QRELS)
    index_collection(splade, folder / "beir", folder / "ix")
    return evaluate_benchmark(open_index(folder / "ix"), top=10, query_encoder=splade)


def _is_piece(entry: str, texts: list[str], tokenizer) -> bool:
    """A continuation, or a token that begins a longer word of the texts without being one."""
    words = set(re.findall(r"[^\W_]+", " ".join(texts).casefold()))
    if entry in words:
        return False
    firsts = {tokenizer.tokenize(w)[0] for w in words if len(tokenizer.tokenize(w)) > 1}
    return entry.startswith("##") or entry in firsts


def test_silent_wrong_decisive_words_mark_the_pieces_they_hold(result, splade):
    (failure,) = result.failures
    texts = [failure.query, CORPUS[failure.nonrelevant.id], CORPUS[failure.relevant.id]]
    decisive = failure.decisive
    entries = [d["word"] for d in decisive]
    assert {"dr", "##ome"} <= set(entries), entries  # the walk's fragments, here for real
    for d in decisive:
        assert d["piece"] is _is_piece(d["word"], texts, splade.tokenizer), d
    for side in (failure.favour_nonrelevant, failure.favour_relevant):
        for w in side.words:
            assert w["piece"] is _is_piece(w["word"], texts, splade.tokenizer), w
    item_texts = [failure.query, CORPUS[failure.nonrelevant.id]]
    for c in failure.nonrelevant.contributions:
        assert c["piece"] is _is_piece(c["token"], item_texts, splade.tokenizer), c
    # shown marked wherever the failure is shown: failures.csv, the report, the blame table
    files = result.files()
    row = next(csv.DictReader(io.StringIO(files["failures.csv"].decode())))
    assert "dr (piece)" in row["decisive_words"].split(", "), row["decisive_words"]
    assert "##ome (piece)" in row["decisive_words"].split(", ")
    html = files["evaluation.html"].decode()
    assert "<td>dr (piece)</td>" in html and "<td>dr</td>" not in html
    blame = {b["word"]: b for b in result.to_dict()["blame"]}
    assert blame["dr"]["piece"] and blame["##ome"]["piece"] and not blame["sand"]["piece"]
    table = list(csv.DictReader(io.StringIO(files["blame.csv"].decode())))
    assert {"dr (piece)", "##ome (piece)", "sand"} <= {r["word"] for r in table}
