"""Search and exclusion (the exclusion-queries paper of Prachi et al.) against hand-computed references; metrics by
ir-measures; stored indexes (text→image with the default pair, image→text); the CLI and the
page give the same JSON."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.memory import MemoryCollection
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.metrics import measure_rankings
from lexlens.analysis.search.exclusion import covering_dimensions
from lexlens.analysis.search.search import search
from lexlens.analysis.search.table_evaluation import MEASURES, evaluate
from lexlens.models import InputError
from lexlens.models.base import Capability, Encoder, LexicalEncoding
from lexlens.models.wordpiece import wordpiece_split
from tests.helpers import app_page, skimage_path

VOCAB = ["dog", "beach", "park", "cat", "snow", "without", "images", "of"]


class ToyEncoder(Encoder):
    """A lexical text encoder with an analytic output: each word of VOCAB counts 1."""

    name = "toy"
    capabilities = frozenset({Capability.TEXT_LEXICAL})

    def __init__(self, vocab: list[str] = VOCAB) -> None:
        self.vocab = list(vocab)

    def encode_texts(self, texts, side="query", *, keep_units=True):
        out = []
        for text in texts:
            words = text.lower().split()
            weights = np.array([float(words.count(t)) for t in self.vocab], np.float32)
            out.append(LexicalEncoding(weights, None, words, input_ids=[0] * len(words)))
        return out


def toy_collection() -> MemoryCollection:
    vectors = np.array(
        [
            [3, 2, 0, 0, 0, 0, 0, 0],  # a: dog on beach
            [3, 0, 2, 0, 0, 0, 0, 0],  # b: dog in park
            [0, 3, 0, 2, 0, 0, 0, 0],  # c: cat on beach
            [2, 0, 0, 0, 1, 0, 0, 0],  # d: dog in snow
        ],
        dtype=np.float32,
    )
    labels = [{"dog", "beach"}, {"dog", "park"}, {"cat", "beach"}, {"dog", "snow"}]
    texts = ["dog beach", "dog park", "cat beach", "dog snow"]
    return MemoryCollection(["a", "b", "c", "d"], texts, vectors, VOCAB, labels, "toy", "toy")


def sums_to_score(hit) -> bool:
    shown = sum(c["contribution"] for c in hit.top_contributions)
    return abs(shown + hit.other_contribution - hit.score) <= 1e-12 * max(1.0, abs(hit.score))


def test_covering_dimensions_is_the_smallest_covering_set():
    mass = np.array([4, 3, 2, 1, 0], dtype=np.float64)  # total 10
    assert list(covering_dimensions(mass, 0.4)) == [0]  # 4/10
    assert list(covering_dimensions(mass, 0.5)) == [0, 1]  # 7/10
    assert list(covering_dimensions(mass, 1.0)) == [0, 1, 2, 3]
    with pytest.raises(InputError):
        covering_dimensions(mass, 0)


def test_plain_search_is_the_inner_product_explained_by_its_terms():
    result = search(toy_collection(), ToyEncoder(), query="dog beach", explain=1)
    # scores: a 3+2 = 5, b 3, c 3, d 2; ties (b, c) in collection order; d is matched too.
    assert [(h.id, h.score) for h in result.results] == [("a", 5), ("b", 3), ("c", 3), ("d", 2)]
    assert result.results[0].top_contributions[0]["token"] == "dog"
    assert result.results[0].other_terms == 1 and result.results[0].other_contribution == 2
    assert all(sums_to_score(h) for h in result.results)
    assert result.method == "search" and result.metrics is None  # "dog beach" is no label


def test_sr_sets_and_magnitudes_by_hand():
    col = toy_collection()
    result = search(col, ToyEncoder(), query="dog", exclude="beach", k_items=1, coverage=0.5)
    # Top-1 for "dog": a (score 3, first in order); its normalised mass: dog 3/√13, beach
    # 2/√13 → D1 = {dog}. Top-1 for "beach": c → D2 = {beach}. D = {dog}.
    d = result.dimensions
    assert (d["include_terms"], d["exclude_terms"], d["kept_terms"]) == (
        ["dog"],
        ["beach"],
        ["dog"],
    )
    norms = np.linalg.norm(col.matrix().toarray(), axis=1)
    expected = {i: col.matrix().toarray()[n, 0] / norms[n] for n, i in enumerate(col.ids)}
    # d 2/√5 = 0.894; a and b tie at 3/√13 (collection order); c has no weight on D.
    assert [h.id for h in result.results] == ["d", "a", "b"]
    for h in result.results:
        assert h.score == pytest.approx(expected[h.id], rel=1e-6) and sums_to_score(h)
    # Without normalisation the magnitude is the raw weight on D: a and b tie, then d.
    raw = search(
        col, ToyEncoder(), query="dog", exclude="beach", k_items=1, coverage=0.5, normalize=False
    )
    assert [(h.id, h.score) for h in raw.results] == [("a", 3), ("b", 3), ("d", 2)]
    # l2: the top-1 for "snow" is d, so D1 = {dog, snow} at coverage 1.0; D2 = {beach, cat}
    # from c. An item scores s = ‖w_D‖ / ‖w‖.
    l2 = search(
        col, ToyEncoder(), query="snow", exclude="beach", k_items=1, coverage=1.0, magnitude="l2"
    )
    assert l2.dimensions["kept_terms"] == ["dog", "snow"]
    dense = col.matrix().toarray()
    for h in l2.results:
        n = col.ids.index(h.id)
        assert h.score == pytest.approx(np.linalg.norm(dense[n, [0, 4]]) / norms[n], rel=1e-6)
        assert sums_to_score(h)
    assert l2.results[0].id == "d"


def test_a_equals_b_returns_nothing_with_a_message():
    result = search(toy_collection(), ToyEncoder(), query="dog", exclude="dog")
    assert result.results == [] and result.dimensions["kept_terms"] == []
    assert any("D = D1 \\ D2 is empty" in m and "same query" in m for m in result.notes)
    assert result.metrics["sr"] == {"RR@1": 0.0, "RR@10": 0.0, "nDCG@10": 0.0, "AP@10": 0.0}


def test_b_holding_a_own_terms_is_said(splade):
    col = MemoryCollection(
        ["x", "y", "z"],
        ["a dog on the beach", "dogs at the beach", "a dog in a park"],
        np.stack(
            [
                splade.encode_texts([t], side="document")[0].weights
                for t in ["a dog on the beach", "dogs at the beach", "a dog in a park"]
            ]
        ),
        splade.vocab,
    )
    result = search(col, splade, query="dog", exclude="beach", k_items=2)
    removed = result.dimensions["removed_query_terms"]
    assert "dog" in removed
    assert any("'dog'" in m and "removed from D" in m for m in result.notes)


def test_silent_wrong_the_sr_note_marks_the_query_pieces_it_names(splade):
    """The note naming A's own terms that D2 removes marks a piece of a word as a piece
    (``'##ome' (piece of dromedary)``): it named the bare pieces as if they were words."""
    texts = ["a dromedary in the desert", "a dromedary walking on sand", "a desert at night"]
    vectors = [splade.encode_texts([t], side="document")[0].weights for t in texts]
    col = MemoryCollection(["a", "b", "c"], texts, np.stack(vectors), splade.vocab)
    result = search(col, splade, query="dromedary", exclude="desert dromedary", k_items=2)
    removed = result.dimensions["removed_query_terms"]
    pieces = [t for t in removed if t.startswith("##")]
    assert pieces  # dromedary is dr ##ome ##dar ##y in splade-tiny's vocabulary
    note = next(m for m in result.notes if "D2 (from the top items" in m)
    for piece in pieces:
        assert f"{piece!r} (piece of dromedary)" in note, note


def test_baselines_avg_and_single_line():
    col = toy_collection()
    avg = search(col, ToyEncoder(), query="dog", exclude="beach", method="avg")
    # E(dog) − E(beach) = (1, −1, 0…): a 3−2 = 1, b 3, c −3, d 2.
    assert [(h.id, h.score) for h in avg.results] == [("b", 3), ("d", 2), ("a", 1), ("c", -3)]
    assert all(sums_to_score(h) for h in avg.results)
    text = search(col, ToyEncoder(), query="dog", exclude="beach", method="text")
    # "dog without beach" (a text collection): dog + beach + without → a 5, b 3, c 3, d 2.
    assert text.settings["slq_template"] == "{a} without {b}"
    assert [h.id for h in text.results] == ["a", "b", "c", "d"]


def test_metrics_for_every_method_when_a_and_b_are_labels():
    result = search(
        toy_collection(), ToyEncoder(), query="dog", exclude="beach", k_items=1, coverage=0.5
    )
    assert result.relevant_count == 2  # b, d: dog and not beach
    assert set(result.metrics) == {"sr", "avg", "text"}
    # SR ranks d, a, b (a and b tie): relevant at ranks 1 and 3.
    sr = result.metrics["sr"]
    assert sr["RR@1"] == 1.0 and sr["RR@10"] == 1.0
    assert sr["AP@10"] == pytest.approx((1 + 2 / 3) / 2)
    assert sr["nDCG@10"] == pytest.approx((1 + 1 / np.log2(4)) / (1 + 1 / np.log2(3)))
    # avg ranks b, d, a, c: perfect; text ranks a, b, c, d: first relevant at 2.
    assert result.metrics["avg"]["AP@10"] == 1.0
    assert result.metrics["text"]["RR@1"] == 0 and result.metrics["text"]["RR@10"] == 0.5
    assert [h.relevant for h in result.results] == [True, False, True]


def test_options_are_checked_not_clamped():
    col, spec = toy_collection(), ToyEncoder()
    for bad in (0, -1):
        with pytest.raises(InputError, match="k_items must be an integer from 1 to"):
            search(col, spec, query="dog", exclude="beach", k_items=bad)
    with pytest.raises(InputError, match="applies to the sr exclusion method only"):
        search(col, spec, query="dog", exclude="beach", method="avg", k_items=5)
    with pytest.raises(InputError, match="applies to the sr exclusion method only"):
        search(col, spec, query="dog", coverage=0.3)
    with pytest.raises(InputError, match="coverage"):
        search(col, spec, query="dog", exclude="beach", coverage=1.5)
    with pytest.raises(InputError, match="top must be an integer from 1 to"):
        search(col, spec, query="dog", top=0)
    with pytest.raises(InputError, match="empty"):
        search(col, spec, query="   ")


def _means(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    return measure_rankings({"q": ranked}, {"q": relevant}, MEASURES)[0]


def test_ir_measures_definitions_by_hand():
    # Relevant at ranks 2 and 4 of a 4-item ranking, R = 2.
    m = _means(["x", "r1", "y", "r2"], {"r1", "r2"})
    assert m["RR@1"] == 0 and m["RR@10"] == 0.5
    assert m["AP@10"] == pytest.approx((1 / 2 + 2 / 4) / 2)
    ideal = 1 + 1 / np.log2(3)
    assert m["nDCG@10"] == pytest.approx((1 / np.log2(3) + 1 / np.log2(5)) / ideal)
    # AP@10 divides by every relevant item (trec_eval), not by min(R, 10): 12 relevant at
    # ranks 1..12 → 10/12.
    ranked = [f"d{i}" for i in range(12)]
    assert _means(ranked, set(ranked))["AP@10"] == pytest.approx(10 / 12)
    # The order given is the order measured (no backend re-sorts ties by id); an id listed
    # twice counts at its first place.
    assert _means(["b", "a"], {"b"})["RR@1"] == 1.0
    assert _means(["z", "a"], {"a"})["AP@10"] == 0.5
    assert _means(["z", "a", "z"], {"z"})["RR@1"] == 1.0


def test_evaluate_pairs_table():
    col = toy_collection()
    rows = [{"a": "dog", "b": "beach"}, {"a": "beach", "b": "dog"}, {"a": "cat", "b": "beach"}]
    result = evaluate(col, ToyEncoder(), rows, k_items=1, coverage=0.5)
    aggregate, table = result.metrics["aggregate"], result.metrics["per_query"]
    assert result.kind == "pairs" and set(aggregate) == {"sr", "avg", "text"}
    assert [r["a"] for r in table] == ["dog", "beach"]
    assert result.skipped[0]["a"] == "cat" and result.skipped[0]["A_not_B"] == 0
    for means in aggregate.values():
        assert set(means) == set(MEASURES)
        assert all(0 <= v <= 1 for v in means.values())
    # The table row of (dog, beach) is what one search with those labels reports: the same
    # measures under the same names.
    single = search(col, ToyEncoder(), query="dog", exclude="beach", k_items=1, coverage=0.5)
    for method in ("sr", "avg", "text"):
        assert table[0][method] == single.metrics[method]


# ------------------------------------------------------------------------- stored indexes
@pytest.fixture(scope="module")
def photo_index(tmp_path_factory):
    """Four real photos (small copies) with captions and labels, the default image encoder."""
    from PIL import Image

    from lexlens.models import load_encoder

    root = tmp_path_factory.mktemp("photos")
    rows = [
        ("chelsea", "chelsea.png", "a tabby cat", "animal|cat"),
        ("coffee", "coffee.png", "a cup of espresso", "drink|food"),
        ("rocket", "rocket.jpg", "a rocket at night", "space|vehicle"),
        ("astronaut", "astronaut.png", "an astronaut", "space|person"),
    ]
    for _, name, _, _ in rows:
        image = Image.open(skimage_path(name)).convert("RGB")
        image.thumbnail((224, 224))
        image.save(root / Path(name).with_suffix(".png").name)
    (root / "items.csv").write_text(
        "id,image,caption,labels\n"
        + "".join(f"{i},{Path(n).stem}.png,{c},{lab}\n" for i, n, c, lab in rows)
    )
    encoder = load_encoder("efficientnet-lite0-lexical", device="cpu")
    build_index(encoder, root / "items.csv", root / "ix")
    return root / "ix"


def test_text_to_image_with_the_default_pair(cli, photo_index):
    proc = cli("search", "--index", photo_index, "--query", "a cat", "--json")
    assert proc.returncode == 0, proc.stderr
    payload = proc.json()
    assert payload["settings"]["query_encoder"] == "splade-tiny"
    assert payload["results"][0]["id"] == "chelsea"
    for hit in payload["results"]:
        total = sum(c["contribution"] for c in hit["top_contributions"]) + hit["other_contribution"]
        assert total == pytest.approx(hit["score"], rel=1e-9)
    proc = cli(
        "search", "--index", photo_index, "--query", "space", "--exclude", "vehicle", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    payload = proc.json()
    assert payload["relevant_count"] == 1 and set(payload["metrics"]) == {"sr", "avg", "text"}
    assert payload["settings"]["k_items"] == 10 and payload["settings"]["magnitude"] == "sum"


def test_search_errors_are_one_line(cli, photo_index, tmp_path):
    for args, message in [
        (("--k-items", "0"), "--k-items must be an integer from 1 to 10,000"),
        (("--k-items", "-1"), "--k-items must be an integer from 1 to 10,000"),
        (("--method", "avg", "--k-items", "5"), "sr exclusion method only"),
    ]:
        proc = cli("search", "--index", photo_index, "--query", "dog", "--exclude", "cat", *args)
        assert proc.returncode == 2 and message in proc.stderr
        assert proc.stderr.count("\n") == 1
    # A query encoder in another vocabulary is refused.
    toy = tmp_path / "toy.txt"
    toy.write_text("dog beach\ncat park\n")
    build_index(ToyEncoder(), toy, tmp_path / "toy-ix")
    proc = cli(
        "search", "--index", tmp_path / "toy-ix", "--query", "dog", "--query-encoder", "splade-tiny"
    )
    assert proc.returncode == 2 and "does not share the vocabulary" in proc.stderr
    proc = cli("search", "--index", photo_index, "--query-image", tmp_path / "nope.png")
    assert proc.returncode == 2 and "not found" in proc.stderr


def test_image_query_over_a_text_index(cli, tmp_path):
    build_index_cli = cli(
        "index",
        "--encoder",
        "splade-tiny",
        "--source",
        "data/collection.csv",
        "--out",
        tmp_path / "texts",
    )
    assert build_index_cli.returncode == 0, build_index_cli.stderr
    photo = skimage_path("chelsea.png")
    proc = cli("search", "--index", tmp_path / "texts", "--query-image", photo, "--json")
    assert proc.returncode == 0, proc.stderr
    payload = proc.json()
    assert payload["settings"]["query_encoder"] == "efficientnet-lite0-lexical"
    assert "cat" in payload["results"][0]["text"]
    proc = cli("search", "--index", tmp_path / "texts", "--eval", "data/photo_pairs.csv")
    # None of these labels is in this collection: every pair is skipped, one clear line.
    assert proc.returncode == 2 and "no usable pair" in proc.stderr


def test_search_collection_file_still_works(cli):
    proc = cli(
        "search",
        "--encoder",
        "splade-tiny",
        "--collection",
        "data/collection.csv",
        "--query",
        "dog",
        "--exclude",
        "beach",
        "--k-items",
        "5",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    payload = proc.json()
    d = payload["dimensions"]
    assert set(d["kept_terms"]) == set(d["include_terms"]) - set(d["exclude_terms"])
    assert set(payload["metrics"]) == {"sr", "avg", "text"}
    proc = cli("search", "--encoder", "splade-tiny", "--collection", "nope.csv", "--query", "x")
    assert proc.returncode == 2 and "not found" in proc.stderr


def test_eval_pairs_cli_on_a_labelled_text_index(cli, tmp_path):
    assert (
        cli(
            "index",
            "--encoder",
            "splade-tiny",
            "--source",
            "data/collection.csv",
            "--out",
            tmp_path / "ix",
        ).returncode
        == 0
    )
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("a,b\ndog,beach\ncat,snow\nhorse,park\n")
    proc = cli("search", "--index", tmp_path / "ix", "--eval", pairs, "--json")
    assert proc.returncode == 0, proc.stderr
    payload = proc.json()
    table = payload["metrics"]["per_query"]
    assert len(table) == 3 and set(payload["metrics"]["aggregate"]) == {"sr", "avg", "text"}
    for row in table:
        assert row["A_not_B"] >= 1 and set(row["sr"]) == {"RR@1", "RR@10", "nDCG@10", "AP@10"}
    assert payload["settings"]["gate_k"] == 768 and payload["kind"] == "pairs"


def test_search_page_on_a_stored_collection_equals_the_cli(
    cli, downloads, photo_index, tmp_path, monkeypatch
):
    import shutil

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path / "home"))
    stored = tmp_path / "home" / "collections" / "photos"
    shutil.copytree(photo_index, stored)
    at = app_page("app_pages/search.py")
    assert not at.exception and not at.error
    # The examples come from the collection's own labels (not "dog but not beach").
    from lexlens.analysis.collections.store import open_index
    from lexlens.analysis.search.examples import example_queries

    a, b = example_queries(open_index(stored))
    assert (at.text_input(key="search_query").value, at.text_input(key="search_exclude").value) == (
        a,
        b,
    )
    labels = {lab for item in open_index(stored).column("labels") for lab in item}
    assert a in labels and (b in labels or b == "")
    at.text_input(key="search_query").set_value("space")
    at.text_input(key="search_exclude").set_value("vehicle")
    at.run()
    at.number_input(key="search_k_items").set_value(1)
    at.run()
    assert not at.exception and not at.error
    result = at.session_state["search_result"]
    assert result.method == "sr" and set(result.metrics) == {"sr", "avg", "text"}
    assert len(at.get("image")) == len(result.results) >= 1  # image hits as thumbnails
    proc = cli(
        "search",
        "--index",
        stored,
        "--query",
        "space",
        "--exclude",
        "vehicle",
        "--k-items",
        "1",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert downloads["photos-search.json"].decode("utf-8") == proc.stdout  # byte for byte
    # K and coverage are disabled for a method that does not use them.
    at.selectbox(key="search_method").set_value("avg")
    at.run()
    assert at.number_input(key="search_k_items").disabled
    assert at.slider(key="search_coverage").disabled
    assert at.session_state["search_result"].method == "avg"
    # A = B: no results and a message, not ten zero-score hits.
    at.selectbox(key="search_method").set_value("sr")
    at.text_input(key="search_exclude").set_value("space")
    at.run()
    assert not at.exception
    assert at.session_state["search_result"].results == []
    assert any("D = D1" in w.value for w in at.warning)


def test_search_page_sample_texts(tmp_path, monkeypatch):
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path / "empty-home"))
    at = app_page("app_pages/search.py")
    assert not at.exception and not at.error
    assert any("No stored collection" in i.value for i in at.info)
    # The sample texts' own labels give the example: the commonest label its texts use, and
    # the label most often with it.
    assert at.text_input(key="search_query").value == "cat"
    assert at.text_input(key="search_exclude").value == "beach"
    at.text_input(key="search_query").set_value("dog").run()
    result = at.session_state["search_result"]
    assert result.collection["name"] == "collection.csv" and len(result.results) == 10
    assert any("'dog'" in w.value for w in at.warning)  # D2 holds dog, dogs
    at.selectbox(key="search_method").set_value("avg")
    at.run()
    assert not at.exception
    assert "beach" not in at.session_state["search_result"].results[0].text


def test_hits_and_dimension_sets_read_in_words(photo_index):
    """Pieces join into the words the items spell or the encoder knows; a word's contribution
    is the sum of its pieces', so the words still make the score; "N more terms" reads as a
    number; a query names a label after lower-casing and dropping its article."""
    from lexlens.analysis.search.examples import example_queries
    from lexlens.analysis.search.hits import hit_summary
    from lexlens.analysis.search.search import search_index

    result = search_index(photo_index, query="a tabby cat", explain=50)
    hit = result.results[0]
    assert hit.id == "chelsea"
    words = {w["word"]: w for w in hit.top_words}
    tokens = {c["token"]: c["contribution"] for c in hit.top_contributions}
    assert words["tabby"]["pieces"] == ["tab", "##by"] and "tab" not in words
    assert words["tabby"]["contribution"] == pytest.approx(tokens["tab"] + tokens["##by"])
    assert sum(w["contribution"] for w in hit.top_words) == pytest.approx(hit.score, rel=1e-9)
    summary = hit_summary(search_index(photo_index, query="a tabby cat", explain=1).results[0])
    assert summary.startswith("tabby ") and " more terms " in summary and "+ +" not in summary
    index = open_index(photo_index)
    result = search_index(index, query="space", exclude="vehicle")
    for kind in ("include", "exclude", "kept"):
        terms, words = result.dimensions[f"{kind}_terms"], result.dimensions[f"{kind}_words"]
        assert len(words) <= len(terms)
        for word in words:  # a token of the set, or a word all of whose pieces are in it
            pieces = wordpiece_split(word, set(index.vocab)) or [word]
            assert word in terms or all(p in terms for p in pieces), (kind, word)
    result = search_index(index, query="An animal")
    assert result.metrics is not None and result.relevant_count == 1
    assert any("animal" in note for note in result.notes)
    a, _ = example_queries(index)
    assert a in {"animal", "cat", "drink", "food", "space", "vehicle", "person"}
