"""The Text page, run headless with Streamlit's AppTest (real encoder, no browser)."""

from __future__ import annotations

from tests.helpers import app_page


def _run(text: str | None = None):
    at = app_page()
    if text is not None:
        at.text_area(key="text_input").input(text)
        at.button[0].click()  # the form's submit button
        at.run()
    return at


def test_text_page_shows_cloud_terms_and_provenance():
    at = _run("a cat sleeping on a book")
    assert not at.exception
    assert not at.error
    terms = at.dataframe[0].value
    top = list(terms["term"][:10])
    assert {"cat", "sleeping", "book"} <= set(top)
    assert set(terms["kind"]) == {"bag of words", "expansion"}
    row = terms[terms["term"] == "cats"].iloc[0]
    assert row["from input word"] == "cat" and row["kind"] == "expansion"
    assert len(at.get("image")) == 1  # the word cloud


def test_text_page_empty_and_long_text():
    at = _run("   ")
    assert not at.exception
    assert any("empty" in e.value for e in at.error)
    at = _run("sparse " * 20_000)
    assert not at.exception
    assert any("truncated to the encoder's limit" in w.value for w in at.warning)
    assert len(at.dataframe) >= 1


def test_text_page_names_whole_words_and_says_when_only_special_tokens_speak():
    at = _run("a giraffe eating leaves")
    assert not at.exception and not at.error
    terms = at.dataframe[0].value
    row = terms[terms["term"] == "giraffe"].iloc[0]
    assert row["from input word"] == "giraffe" and row["pieces"] == "gi ##raf ##fe"
    produces = at.dataframe[1].value
    assert "giraffe" in list(produces["input word"]) and "gi" not in list(produces["input word"])
    at = _run("🙂🙂 [CLS] [MASK]")
    assert not at.exception and not at.error
    assert any("no token of the encoder's vocabulary" in w.value for w in at.warning)


def test_contrib_page_contributions_sum_to_score():
    at = app_page("app_pages/contrib.py")
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    score = float(at.metric[0].value)
    assert abs(table["contribution"].sum() - score) < 1e-3
    assert "cat" in set(table["word"])
    # Word pieces join into the words the texts spell, in the chart and the table.
    at.text_input(key="contrib_q_text").set_value("a giraffe")
    at.text_area(key="contrib_d_text").set_value("a giraffe eating leaves in the savanna")
    at.run()
    assert not at.exception and not at.error
    words = at.dataframe[0].value
    assert "giraffe" in set(words["word"]) and not any(w.startswith("##") for w in words["word"])
    assert abs(words["contribution"].sum() - float(at.metric[0].value)) < 1e-3
    assert "giraffe" in at.get("plotly_chart")[0].proto.spec


def test_search_page_on_sample_collection():
    at = app_page("app_pages/search.py")
    assert not at.exception and not at.error
    assert len(at.dataframe[0].value) == 10
    at.selectbox(key="search_method").select("avg")
    at.run()
    assert not at.exception
    assert "beach" not in at.dataframe[0].value["text"].iloc[0]


def test_deviation_page_on_sample_captions():
    at = app_page("app_pages/deviation.py")
    assert not at.exception and not at.error
    assert len(at.dataframe[0].value) == 10
    assert at.metric[0].label == "Exact@20"
