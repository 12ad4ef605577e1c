"""Text and Images pages render the use-case results: their downloads equal the CLI's JSON,
inputs survive page switches, messages name the user's input."""

from __future__ import annotations

import csv
import io

from streamlit.testing.v1 import AppTest

from tests.helpers import app_page, skimage_path

IMAGES = "app_pages/images.py"
TEXT = "app_pages/text.py"


def _submit_text(at: AppTest, text: str) -> None:
    at.text_area(key="text_input").input(text)
    next(b for b in at.button if b.proto.is_form_submitter).click()
    at.run()


def test_text_page_json_is_the_cli_document(cli, downloads):
    text = "=HYPERLINK(cat) a giraffe sleeping on a book"
    at = app_page()
    _submit_text(at, text)
    assert not at.exception and not at.error
    run = cli("terms", "--encoder", "splade-tiny", "--text", text, "--json")
    assert run.returncode == 0, run.stderr
    assert downloads["terms.json"].decode("utf-8") == run.stdout.rstrip("\n")
    document = run.json()
    assert "giraffe" in [r["token"] for r in document["merged_terms"]]
    assert "giraffe" not in [r["token"] for r in document["terms"]]  # raw pieces kept
    # the CSV is formula-safe: no cell starts with = + - @
    cells = [c for row in csv.reader(io.StringIO(downloads["terms.csv"].decode())) for c in row]
    assert cells and not [c for c in cells if c[:1] in ("=", "+", "-", "@")]
    assert "giraffe" in at.dataframe[0].value["term"].tolist()  # merged by default


def test_images_page_json_per_image_and_group_is_the_cli_document(cli, downloads, monkeypatch):
    at = app_page(IMAGES)
    at.multiselect(key="image_samples").set_value(["coffee (scikit-image)"]).run()
    assert not at.exception and not at.error
    monkeypatch.chdir(skimage_path("coffee.png").parent)
    whole = cli(
        "terms", "--encoder", "efficientnet-lite0-lexical", "--image", "coffee.png", "--json"
    )
    group_b = cli(
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        "coffee.png",
        "--box",
        "0.5,0,1,1",
        "--json",
    )
    assert whole.returncode == 0 and group_b.returncode == 0, whole.stderr + group_b.stderr
    assert downloads["coffee_terms.json"].decode() == whole.stdout.rstrip("\n")
    assert downloads["coffee_groupB.json"].decode() == group_b.stdout.rstrip("\n")
    cells = group_b.json()["input"]["cells"]
    assert cells and all(c.startswith("r") for c in cells)
    assert " ".join(cells) in " ".join(m.value for m in at.markdown)  # listed in the UI


def test_heatmap_offers_the_merged_word(downloads):
    at = app_page(IMAGES)
    at.multiselect(key="image_samples").set_value(["coffee (scikit-image)"]).run()
    pick = next(s for s in at.selectbox if s.key.endswith("_term"))
    assert "espresso" in pick.options
    pick.select("espresso").run()
    assert not at.exception
    assert not [w.value for w in at.warning if "not a token" in w.value]
    captions = [img.caption for el in at.get("image") for img in el.proto.imgs]
    heat = next(c for c in captions if "per patch" in c)
    assert heat.startswith("'espresso (es ##press ##o)' per patch (max over its pieces)")


def test_inputs_survive_page_switches():
    at = app_page()
    _submit_text(at, "a red bicycle near the river")
    at.switch_page(IMAGES).run()
    at.multiselect(key="image_samples").set_value([]).run()
    photo = skimage_path("chelsea.png").read_bytes()
    at.file_uploader(key="image_uploads").set_value([("my cat.png", photo, "image/png")]).run()
    at.toggle(key="image_merge").set_value(False).run()
    assert not at.exception and not at.error
    at.switch_page(TEXT).run()
    assert at.text_area(key="text_input").value == "a red bicycle near the river"
    assert "bicycle" in at.dataframe[0].value["term"].tolist()
    at.switch_page(IMAGES).run()
    assert not at.exception
    assert at.multiselect(key="image_samples").value == []
    assert at.toggle(key="image_merge").value is False
    assert any("my cat.png" in c.value for c in at.caption)  # the earlier upload is used
    assert any(h.value == "my cat.png" for h in at.subheader)


def test_empty_text_says_so_before_any_encoding():
    at = app_page()
    _submit_text(at, "   ")
    assert not at.exception
    errors = [e.value for e in at.error]
    assert errors == ["the text is empty: type some words to encode"]
    assert len(at.dataframe) >= 1  # the earlier result stays on the page
