"""The Images page, run headless with Streamlit's AppTest (real encoder, real uploads)."""

from __future__ import annotations

import io

import pytest
from PIL import Image
from streamlit.testing.v1 import AppTest

from tests.helpers import app_page, skimage_path

PAGE = "app_pages/images.py"


def _table_tokens(frame) -> list[str]:
    return list(frame["term"])


@pytest.fixture(scope="module")
def cat_page() -> AppTest:
    at = app_page(PAGE)
    at.multiselect(key="image_samples").set_value(["chelsea (scikit-image)"]).run()
    return at


def test_sample_cat_shows_cloud_grid_and_terms(cat_page):
    at = cat_page
    assert not at.exception and not at.error
    whole = at.dataframe[0].value
    assert "cat" in _table_tokens(whole)[:5]
    captions = _captions(at)
    assert "7×11 patch grid" in captions and any(c.startswith("'") for c in captions)
    assert sum("Word cloud" in c or "max over its patches" in c for c in captions) == 3
    assert {"Word cloud (PNG)", "Terms (CSV)", "Terms (JSON)"} <= {
        b.label for b in at.get("download_button")
    }
    # A merged word lists its whole spelling, also the pieces that lend it no weight.
    pieces = dict(zip(whole["term"], whole["pieces"], strict=True))
    assert pieces["catamount"] == "cat ##amo ##unt" and pieces["tabby"] == "tab ##by"


def test_cells_group_and_typed_heatmap(cat_page):
    at = cat_page
    key = next(r.key for r in at.radio if r.key.endswith("_modeA"))
    at.radio(key=key).set_value("cells").run()
    cells = at.multiselect(key=key.replace("_modeA", "_cellsA"))
    cells.set_value(["r3c4", "r4c4"]).run()
    assert not at.exception
    group_a = at.dataframe[1].value  # whole, group A, group B, comparison…
    assert "cat" in _table_tokens(group_a)[:5]
    typed = next(t for t in at.text_input if t.key.endswith("_typed"))
    typed.input("Dog").run()
    assert not at.exception
    assert any("'dog' per patch" in c for c in _captions(at))
    typed.input("☃☃").run()
    assert any("cannot be spelled" in w.value for w in at.warning)


def _captions(at) -> list[str]:
    return [img.caption for el in at.get("image") for img in el.proto.imgs]


def test_uploads_bad_file_does_not_hide_the_good_one():
    at = app_page(PAGE)
    at.multiselect(key="image_samples").set_value([]).run()
    buf = io.BytesIO()
    Image.open(skimage_path("coffee.png")).convert("RGB").save(buf, "JPEG")
    good = buf.getvalue()
    at.file_uploader(key="image_uploads").set_value(
        [
            ("notes.png", b"this is a text file", "image/png"),
            ("cut.jpg", good[: len(good) // 2], "image/jpeg"),
            ("coffee.jpg", good, "image/jpeg"),
        ]
    ).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("notes.png" in e and "not an image" in e for e in errors)
    assert any("cut.jpg" in e and "truncated" in e for e in errors)
    assert len(at.dataframe) >= 1
    assert {"coffee", "es"} & set(_table_tokens(at.dataframe[0].value)[:5])


def test_drawn_sample_groups_differ():
    """The shipped sample (a maze left, a crossword right): default groups = the two halves."""
    at = app_page(PAGE)
    at.multiselect(key="image_samples").set_value(["maze_and_crossword (drawn sample)"]).run()
    assert not at.exception and not at.error
    group_a = _table_tokens(at.dataframe[1].value)[:5]
    group_b = _table_tokens(at.dataframe[2].value)[:5]
    assert "maze" in group_a and "maze" not in group_b, (group_a, group_b)
    assert "puzzle" in group_b


def test_an_image_given_twice_is_shown_once():
    """An upload equal to the selected sample is shown as the upload, without a note; the
    same file uploaded twice is shown once, with a note naming both."""
    at = app_page(PAGE)
    data = skimage_path("chelsea.png").read_bytes()
    at.multiselect(key="image_samples").set_value(["chelsea (scikit-image)"])
    at.file_uploader(key="image_uploads").set_value([("my-cat.png", data, "image/png")]).run()
    assert not at.exception and not at.error
    assert [h.value for h in at.subheader] == ["my-cat.png"]
    assert not [c.value for c in at.caption if "same image" in c.value]
    at.file_uploader(key="image_uploads").set_value(
        [("my-cat.png", data, "image/png"), ("copy.png", data, "image/png")]
    ).run()
    assert [h.value for h in at.subheader] == ["my-cat.png"]
    assert "copy.png: the same image as my-cat.png, shown once." in [c.value for c in at.caption]
