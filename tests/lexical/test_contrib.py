"""Query ⊙ document contributions sum to the score; gating follows VDR's gate; either side
may be an image (the default pair); the CLI and the page give the same JSON."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexlens.analysis.core.gating import bag_of_words, bow_query, gate
from lexlens.analysis.lexical.contrib import contrib, contributions
from lexlens.models import InputError, ModalityError
from tests.helpers import app_page, skimage_path


def small(name: str):
    """A 224-px copy of a photo (a PIL image): what the encoder needs, encoded fast."""
    from PIL import Image

    image = Image.open(skimage_path(name)).convert("RGB")
    image.thumbnail((224, 224))
    return image


def test_contributions_sum_to_the_score(splade):
    q, d = splade.encode_texts(["cat on a book", "a kitten sleeping on an old novel"])
    qv, dv = gate(q, splade.vocab, 768), gate(d, splade.vocab, 768)
    score, rows = contributions(qv, dv, splade.vocab)
    reference = float(np.dot(qv.astype(np.float64), dv.astype(np.float64)))
    assert score == pytest.approx(reference, rel=1e-12)
    assert sum(r.contribution for r in rows) == pytest.approx(score, rel=1e-12)
    assert rows[0].contribution >= rows[-1].contribution
    assert {"book", "cat"} <= {r.token for r in rows}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-5, 5, allow_nan=False, width=32), min_size=6, max_size=6),
    st.lists(st.floats(0, 5, allow_nan=False, width=32), min_size=6, max_size=6),
)
def test_contributions_always_sum_to_the_score(q, d):
    vocab = list("abcdef")
    score, rows = contributions(np.array(q, np.float32), np.array(d, np.float32), vocab)
    assert sum(r.contribution for r in rows) == pytest.approx(score, rel=1e-9, abs=1e-12)
    exact = float(np.dot(np.array(q, np.float32).astype(np.float64), np.array(d, np.float64)))
    assert score == pytest.approx(exact, rel=1e-9, abs=1e-9)


def test_gate_keeps_top_k_and_own_tokens_but_no_special_tokens(splade):
    enc = splade.encode_texts(["the zebra"])[0]
    bow = bag_of_words(enc, splade.vocab)
    assert bow[splade.vocab.index("zebra")] == 1 and bow[splade.vocab.index("the")] == 1
    assert bow[splade.vocab.index("[CLS]")] == 0 and bow[splade.vocab.index("[SEP]")] == 0
    assert int(bow.sum()) == 2
    only_bow = gate(enc, splade.vocab, 0)
    assert set(np.flatnonzero(only_bow)) <= set(np.flatnonzero(bow))
    top2 = gate(enc, splade.vocab, 2)
    kept = set(np.flatnonzero(top2))
    best_two = set(np.argsort(-enc.weights)[:2])
    assert best_two <= kept and kept <= best_two | set(np.flatnonzero(bow))
    assert np.array_equal(gate(enc, splade.vocab, -1), enc.weights)


def test_bow_query_is_binary_or_normalised_as_the_checkpoint_says(splade):
    enc = splade.encode_texts(["a cat and a cat on a mat"])[0]
    binary = bow_query(enc, splade.vocab, normalize=False)
    assert set(np.unique(binary)) == {0.0, 1.0} and int(binary.sum()) == 5  # a cat and on mat
    unit = bow_query(enc, splade.vocab, normalize=True)
    assert np.linalg.norm(unit) == pytest.approx(1.0) and np.allclose(unit, binary / np.sqrt(5))


def test_mismatched_vocabularies_are_a_clear_error():
    with pytest.raises(InputError, match="same"):
        contributions(np.ones(3), np.ones(4), ["a", "b", "c"])


def test_text_query_against_an_image_document(splade, effnet):
    result = contrib(
        splade, effnet, query="a tabby cat", doc_image=("chelsea.png", small("chelsea.png"))
    )
    assert result.document == {"image": "chelsea.png", "encoder": effnet.name}
    assert sum(c.contribution for c in result.contributions) == pytest.approx(result.score)
    assert result.score > 0 and "cat" in {c.token for c in result.contributions[:5]}
    other = contrib(splade, effnet, query="a tabby cat", doc_image=small("coffee.png"))
    assert other.score < result.score


def test_image_query_against_a_text_document(splade, effnet):
    result = contrib(effnet, splade, query_image=small("coffee.png"), doc="a cup of espresso")
    assert result.score > 0
    assert sum(c.contribution for c in result.contributions) == pytest.approx(result.score)
    with pytest.raises(InputError, match="bag-of-words"):
        contrib(effnet, splade, query_image=small("coffee.png"), doc="x", query_mode="bow")
    with pytest.raises(ModalityError, match="efficientnet-lite0-lexical"):
        contrib(splade, splade, query="a cat", doc_image=small("coffee.png"))
    with pytest.raises(InputError, match="empty"):
        contrib(splade, query="  ", doc="a cat")


def test_contrib_cli(cli, tmp_path):
    coffee = tmp_path / "coffee.png"
    small("coffee.png").save(coffee)
    proc = cli(
        "contrib",
        "--encoder",
        "splade-tiny",
        "--query",
        "cat on a book",
        "--doc",
        "a kitten sleeping on an old novel",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    payload = proc.json()
    total = sum(c["contribution"] for c in payload["contributions"])
    assert total == pytest.approx(payload["score"], rel=1e-9)
    for c in payload["contributions"]:
        assert c["contribution"] == pytest.approx(c["query_weight"] * c["doc_weight"], rel=1e-5)
    # A text encoder with an image document: the partner in its vocabulary encodes the image.
    proc = cli(
        "contrib",
        "--encoder",
        "splade-tiny",
        "--query",
        "espresso",
        "--doc-image",
        coffee,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.json()["document"]["encoder"] == "efficientnet-lite0-lexical"
    proc = cli(
        "contrib",
        "--encoder",
        "splade-tiny",
        "--query-image",
        coffee,
        "--doc",
        "x",
        "--query-mode",
        "bow",
    )
    assert proc.returncode == 2 and "bag-of-words" in proc.stderr


def test_page_json_equals_cli_json(cli, downloads):
    at = app_page("app_pages/contrib.py")
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    assert abs(table["contribution"].sum() - float(at.metric[0].value)) < 1e-3
    proc = cli(
        "contrib",
        "--encoder",
        "splade-tiny",
        "--query",
        "cat on a book",
        "--doc",
        "a kitten sleeping on an old novel",
        "--json",
    )
    assert proc.stdout.endswith("}\n")
    assert downloads["contributions.json"].decode("utf-8") == proc.stdout[:-1]
    at.radio(key="contrib_d_kind").set_value("Image")
    at.run()
    assert not at.exception and not at.error
    assert at.session_state["contrib_result"].document["encoder"] == "efficientnet-lite0-lexical"
    assert "chelsea" in at.session_state["contrib_result"].document["image"]
