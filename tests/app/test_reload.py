"""A reload, a bookmark or a link opened later (a new session on the same URL) gives the
quick pages back their inputs, uploads included, and so the same result."""

from __future__ import annotations

import pytest

from tests.helpers import app_page, reopened, skimage_path


def _values(elements) -> list:
    return [e.value for e in elements]


def test_text_page_reloads_its_text_and_options(monkeypatch, tmp_path):
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    at = app_page("app_pages/text.py")
    at.text_area(key="text_input").set_value("a giraffe eating leaves")
    at.slider(key="text_k").set_value(12)
    next(b for b in at.button if b.label == "Encode").click().run()
    assert not at.exception and not at.error
    again = reopened(at, "app_pages/text.py")
    assert again.text_area(key="text_input").value == "a giraffe eating leaves"
    assert again.slider(key="text_k").value == 12
    assert again.dataframe[0].value.equals(at.dataframe[0].value)


def test_contrib_and_search_pages_reload(monkeypatch, tmp_path):
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    at = app_page("app_pages/contrib.py")
    at.text_input(key="contrib_q_text").set_value("a red train")
    at.run()
    again = reopened(at, "app_pages/contrib.py")
    assert again.text_input(key="contrib_q_text").value == "a red train"
    assert _values(again.metric) == _values(at.metric)
    at = app_page("app_pages/search.py")
    at.radio(key="search_source").set_value("Sample texts (data/collection.csv)").run()
    at.text_input(key="search_query").set_value("a cat").run()
    assert not at.exception and not at.error
    again = reopened(at, "app_pages/search.py")
    assert again.text_input(key="search_query").value == "a cat"
    assert again.dataframe[0].value.equals(at.dataframe[0].value)


@pytest.mark.parametrize("page", ["deviation", "images"])
def test_an_upload_comes_back_after_a_reload(page, monkeypatch, tmp_path):
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    at = app_page(f"app_pages/{page}.py")
    if page == "deviation":
        at.radio(key="dev_source").set_value("Upload a caption file").run()
        at.file_uploader(key="dev_upload").upload("mine.txt", b"a dog\na red bus\n", "text/plain")
    else:
        at.multiselect(key="image_samples").set_value([]).run()
        data = skimage_path("coffee.png").read_bytes()
        at.file_uploader(key="image_uploads").upload("cup.png", data, "image/png")
    at.run()
    assert not at.exception and not at.error
    again = reopened(at, f"app_pages/{page}.py")
    assert again.dataframe[0].value.equals(at.dataframe[0].value)
    if page == "deviation":
        assert any("mine.txt" in c.value for c in again.subheader)
    else:
        assert any("cup.png" in s.value for s in again.subheader)
