"""Search shows a piece of a word ("dr", "##ome" of "dromedary", "##yen" of "hyena") marked,
never as a word: SR's dimension sets and each hit's words; and SR's terms name the factor
they hold (1/‖d‖, no query weight). References: the texts' own words by a regular expression,
the tokenizer's pieces of each, the items' stored vectors."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from lexlens.analysis.collections.memory import encode_collection
from lexlens.analysis.search.hits import hit_summary
from lexlens.analysis.search.search import search

TEXTS = {
    "a1": "a dromedary walking through the desert sand",
    "a2": "a bactrian camel with two humps resting",
    "a3": "a spotted hyena laughing at night",
    "a4": "a small terrier digging in the garden",
    "a5": "a horse grazing in a green field",
    "a6": "a dromedary and a horse side by side",
    "a7": "a striped hyena near a dead zebra",
    "a8": "a wire-haired terrier chasing a ball",
}


@pytest.fixture(scope="module")
def animals(splade):
    return encode_collection(splade, list(TEXTS.values()), ids=list(TEXTS), name="animals")


@pytest.fixture(scope="module")
def excluded(animals, splade):
    return search(animals, splade, "dromedary", exclude="horse", method="sr")


def _words(texts) -> set[str]:
    return set(re.findall(r"[^\W_]+", " ".join(texts).casefold()))


def _piece_of(entry: str, texts, tokenizer) -> tuple[bool, set[str]]:
    """Whether ``entry`` is a piece of the texts' words, and the words it is a piece of."""
    words = _words(texts)
    if entry in words:
        return False, set()
    owners = set()
    for w in words:
        pieces = tokenizer.tokenize(w)
        if len(pieces) > 1 and entry in (pieces[1:] if entry.startswith("##") else pieces[:1]):
            owners.add(w)
    return entry.startswith("##") or bool(owners), owners


def test_silent_wrong_dimension_sets_mark_their_pieces(excluded, splade):
    d = excluded.dimensions
    texts = [*TEXTS.values(), "dromedary horse"]  # the items behind the sets hold them all
    marked = 0
    for kind in ("include", "exclude", "kept"):
        pieces = d[f"{kind}_pieces"]
        for entry in d[f"{kind}_words"]:
            piece, owners = _piece_of(entry, texts, splade.tokenizer)
            assert (entry in pieces) is piece, (kind, entry)
            if piece:
                marked += 1
                assert pieces[entry] == (owners.pop() if len(owners) == 1 else None), entry
    assert d["kept_pieces"].get("dr") == "dromedary", d["kept_pieces"]
    assert d["exclude_pieces"].get("##yen") == "hyena", d["exclude_pieces"]
    assert marked >= 4


def test_silent_wrong_a_hits_words_mark_the_pieces_of_its_text(excluded, splade):
    marked = 0
    for hit in excluded.results:
        texts = [hit.text, "dromedary horse"]
        for row in hit.top_words:
            piece, owners = _piece_of(row["word"], texts, splade.tokenizer)
            assert row["piece"] is piece, (hit.id, row)
            if piece:
                marked += 1
                assert row.get("piece_of") == (owners.pop() if len(owners) == 1 else None)
                assert f"{row['word']} (piece" in hit_summary(hit)
    assert marked >= 2
    first = excluded.results[0]
    assert "dr (piece of dromedary)" in hit_summary(first), hit_summary(first)


def test_silent_wrong_sr_terms_hold_one_over_the_item_norm_not_a_query_weight(excluded, animals):
    for hit in excluded.results:
        _, vals = animals.row(hit.row)
        norm = math.sqrt(float(np.sum(vals.astype(np.float64) ** 2)))
        for row in hit.top_contributions:
            assert "query_weight" not in row, row
            # the collection keeps each norm in float32: equal to its rounding (2^-23)
            assert row["doc_norm_inverse"] == pytest.approx(1.0 / norm, rel=2**-23)
            # float64 sums of float32 weights: exact to the float64 rounding of one product
            assert row["contribution"] == pytest.approx(
                row["doc_weight"] * row["doc_norm_inverse"], rel=1e-12
            )


def test_a_plain_searchs_terms_hold_the_query_weight(animals, splade):
    from lexlens.analysis.core.gating import DEFAULT_GATE_K, gate

    result = search(animals, splade, "hyena")
    q = gate(splade.encode_texts(["hyena"], side="query")[0], splade.vocab, DEFAULT_GATE_K)
    for hit in result.results:
        for row in hit.top_contributions:
            assert row["query_weight"] == float(q[row["index"]])
            assert row["contribution"] == pytest.approx(
                row["query_weight"] * row["doc_weight"], rel=1e-12
            )


def _page(result, tmp_path):
    """The Search page's drawing of ``result`` (headless), as after a reload."""
    import json

    from streamlit.testing.v1 import AppTest

    state = tmp_path / "search.json"
    state.write_text(json.dumps(result.to_state()))

    def view(path):
        import json
        from pathlib import Path

        from lexlens.analysis.search.search import SearchResult
        from lexlens.app.views.search import show_result

        show_result(SearchResult.from_state(json.loads(Path(path).read_text())), None)

    at = AppTest.from_function(view, args=(str(state),)).run()
    assert not at.exception
    return at


def test_silent_wrong_the_search_page_shows_pieces_marked(excluded, tmp_path):
    at = _page(excluded, tmp_path)
    sets = next(m.value for m in at.markdown if m.value.startswith("**D1**"))
    assert "dr (piece of dromedary)" in sets and "##yen (piece of hyena)" in sets, sets
    assert ", dr," not in sets and ", ##yen," not in sets
    tables = [t.value for t in at.dataframe if "word (or piece)" in t.value.columns]
    shown = [w for t in tables for w in t["word (or piece)"]]
    assert "dr (piece of dromedary)" in shown and "dr" not in shown, shown
    assert not any(w.startswith("##") and "(piece" not in w for w in shown), shown


def test_silent_wrong_one_relevant_item_is_counted_in_the_singular(splade, tmp_path):
    from lexlens.analysis.core.counts import counted

    labels = [
        frozenset({"zebra"}) if "zebra" in t else frozenset({"animal"}) for t in TEXTS.values()
    ]
    labelled = encode_collection(splade, list(TEXTS.values()), ids=list(TEXTS), labels=labels)
    result = search(labelled, splade, "zebra")
    assert result.relevant_count == 1
    at = _page(result, tmp_path)
    metrics = next(m.value for m in at.markdown if m.value.startswith("**Metrics**"))
    assert "(1 relevant item: labelled A and not B)" in metrics, metrics
    assert counted(1, "relevant item") == "1 relevant item"
    assert counted(2, "relevant item") == "2 relevant items"
    assert counted(1, "query") == "1 query" and counted(3, "query") == "3 queries"
    assert counted(12345, "item", grouped=True) == "12,345 items"
    assert counted(0, "failure") == "0 failures"
