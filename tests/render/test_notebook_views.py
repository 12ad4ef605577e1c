"""A patch group, an attribution and a semantic deviation display themselves in a notebook:
the patch group as the image with its grid and the group tinted beside the group's cloud,
the attribution as the report's heat table of sub-vectors × words (each value written),
the deviation as each set's metrics with the page's plotly scatter (its script inline,
nothing fetched); each holds the numbers of the result's JSON, caps what it lists, and
``to_frame()`` holds every row of the CSV file."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest
from PIL import Image

import lexlens
from lexlens.analysis.attribution.attribution import AttributionResult
from lexlens.analysis.attribution.report_html import NOTEBOOK_WORDS
from lexlens.analysis.attribution.subvector import SubvectorAttribution
from lexlens.analysis.core.samples import sample_path
from lexlens.analysis.lexical.terms import TermsResult
from lexlens.analysis.render.html import NOTEBOOK_ROWS, num
from lexlens.analysis.render.notebook import DEVIATION_ITEMS_SHOWN
from tests.lexical.test_notebook_display import parsed

IMAGE = sample_path("images", "maze_and_crossword.png")


def _pictures(html: str) -> list[Image.Image]:
    """The inline PNGs a fragment shows, decoded."""
    found = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    return [Image.open(io.BytesIO(base64.b64decode(b))).convert("RGB") for b in found]


def _blueness(picture: np.ndarray) -> float:
    """The mean of blue minus red: the group's tint (31, 119, 180) raises it, grey does not."""
    return float(np.mean(picture[..., 2].astype(float) - picture[..., 0].astype(float)))


def test_a_patch_group_shows_the_image_with_its_grid_and_the_groups_cloud(effnet):
    result = lexlens.terms(effnet, image=IMAGE, box=(0.0, 0.0, 0.5, 1.0), top=10)
    doc = result.to_dict()
    assert "picture" not in doc  # the display copy stays out of the JSON
    html = result._repr_html_()
    fragment = parsed(html)
    text = " ".join(fragment.text)
    assert "Patch group" in text and f"{len(doc['input']['cells'])} cells" in text
    for row, term in zip(fragment.rows, doc["merged_terms"], strict=True):
        assert row[1:3] == [term["token"], num(term["weight"])]
    picture, cloud = _pictures(html)
    assert cloud.size != picture.size
    drawn = np.asarray(picture)
    half = drawn.shape[1] // 2
    # the box's cells (the left half) are tinted blue, the others not
    original = np.asarray(Image.open(IMAGE).convert("RGB"))
    assert abs(_blueness(original[:, : original.shape[1] // 2])) < 5
    assert _blueness(drawn[:, :half]) > 30
    assert abs(_blueness(drawn[:, half + 2 :])) < 5
    kept = TermsResult.from_state(result.to_state())  # a stored run draws it again
    assert np.array_equal(kept.picture, result.picture)
    assert len(_pictures(kept._repr_html_())) == 2


def test_a_whole_image_shows_its_grid_and_a_text_shows_no_picture(effnet, splade):
    whole = lexlens.terms(effnet, image=IMAGE, top=5)
    html = whole._repr_html_()
    parsed(html)
    assert len(_pictures(html)) == 2 and "Top terms" in html
    text = lexlens.terms(splade, text="a cat on a mat", top=5)
    assert len(_pictures(text._repr_html_())) == 1  # the cloud alone


@pytest.fixture(scope="module")
def minilm():
    from lexlens.models import load_encoder

    return load_encoder("minilm-pq", device="cpu")


def test_an_attribution_shows_each_sub_vectors_word_values(minilm):
    result = lexlens.attribute(minilm, ["a tabby cat on old <b>books</b>"], steps=8)
    doc = result.to_dict()
    html = result._repr_html_()
    fragment = parsed(html)
    assert "b" not in fragment.tags and "&lt;b&gt;books&lt;/b&gt;" in html
    (text,) = doc["texts"]
    values = np.asarray(text["attributions"])
    assert len(fragment.rows) == len(text["subvectors"]) + 1  # and GlobalT
    for r, row in enumerate(fragment.rows[:-1]):
        assert row[4:] == [num(v) for v in values[r]]
        assert row[0] == str(int(np.asarray(text["codes"])[text["subvectors"][r]]))
    assert fragment.rows[-1][4:] == [num(v) for v in text["global_attributions"]]
    frame = result.to_frame()
    words = len(text["words"])
    assert len(frame) == (len(text["subvectors"]) + 1) * words
    per = frame[frame["subvector"] != "global"]
    assert np.array_equal(per["attribution"].to_numpy().reshape(values.shape), values)


def test_an_attribution_caps_its_words_sub_vectors_and_texts():
    m, words = NOTEBOOK_ROWS + 4, NOTEBOOK_WORDS + 7
    rng = np.random.default_rng(0)

    def one(text: str) -> SubvectorAttribution:
        values = rng.normal(size=(m, words))
        return SubvectorAttribution(
            text=text,
            tokens=["[CLS]", *(f"w{i}" for i in range(words)), "[SEP]"],
            words=[f"w{i}" for i in range(words)],
            subvectors=list(range(m)),
            codes=np.arange(m),
            token_attributions=np.pad(values, ((0, 0), (1, 1))),
            attributions=values,
            delta=np.zeros(m),
            global_attributions=values.sum(0),
            global_delta=0.0,
            steps=8,
            truncated=False,
        )

    result = AttributionResult(
        encoder="made", m=m, k=4, settings={}, texts=[one(f"text {i}") for i in range(7)]
    )
    fragment = parsed(result._repr_html_())
    text = " ".join(fragment.text)
    assert "… 4 more sub-vectors" in text and "… 7 more words" in text
    assert "… 2 more texts" in text
    assert len(fragment.rows) == 5 * (NOTEBOOK_ROWS + 1)
    assert all(len(row) == 4 + NOTEBOOK_WORDS for row in fragment.rows)
    assert len(result.to_frame()) == 7 * (m + 1) * words


def _array(data) -> list:
    """A plotly array: a JSON list, or typed array data (``{"dtype", "bdata"}``: base64)."""
    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).tolist()
    return list(data)


class Scripts(HTMLParser):
    """The scripts a fragment holds (their addresses and text) and every address it names."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []
        self.urls: list[str] = []
        self.code: list[str] = []
        self.tags: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        self.urls += [attrs[a] or "" for a in ("src", "href") if a in attrs]
        if tag == "script":
            self._in_script = True
            self.sources.append(attrs.get("src") or "")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.code.append(data)


def test_a_deviation_shows_its_metrics_and_the_pages_scatter_inline(splade):
    captions = [f"a <i>cat</i> number {i} sleeping on a book" for i in range(3)]
    captions.append("a dog </script><b>barking</b> at a cat")  # inside plotly's data too
    captions += [line for line in sample_path("captions.txt").read_text().splitlines() if line]
    captions *= 2
    result = lexlens.deviation(splade, captions)
    doc = result.to_dict()
    html = result._repr_html_()
    page = Scripts()
    page.feed(html)
    assert page.sources and all(s == "" for s in page.sources)  # inline: plotly's script too
    assert "link" not in page.tags and "iframe" not in page.tags
    assert all(u.startswith("data:") for u in page.urls)
    assert "Plotly.newPlot" in "".join(page.code)
    assert "cdn.plot.ly/plotly" not in html  # no script fetched from plotly's CDN
    outside = re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.S)  # scripts left out
    parsed(outside)
    assert "&lt;i&gt;cat&lt;/i&gt;" in outside and "<i>" not in outside and "<b>" not in outside
    part = doc["captions"]
    for values in part["by_denominator"].values():
        assert f"{num(values['exact_at_k'])}" in outside
        assert f"{num(values['semantic_at_k'])}" in outside
    assert num(part["flops"]) in outside and num(part["flops_with_self_pairs"]) in outside
    rows = part["rows"]
    assert len(rows) > DEVIATION_ITEMS_SHOWN
    assert f"… {len(rows) - DEVIATION_ITEMS_SHOWN} more rows" in outside
    # the scatter's points are every item's (Exact@k, Semantic@k): its traces, the first
    # argument after the element's id in Plotly.newPlot
    code = "".join(page.code)
    start = code.index("[", code.index("Plotly.newPlot("))
    traces, _ = json.JSONDecoder().raw_decode(code, start)
    points = [
        (float(x), float(y))
        for t in traces
        for x, y in zip(_array(t["x"]), _array(t["y"]), strict=True)
    ]
    expected = sorted((r["exact_at_k"], r["semantic_at_k"]) for r in rows)
    assert len(points) == len(expected)
    # JSON writes a float's shortest round-trip form: the same numbers, exactly
    assert sorted(points) == expected
    frame = result.to_frame()
    written = list(csv.DictReader(io.StringIO(result.files()["captions.csv"].decode())))
    assert list(frame.columns) == list(written[0])
    assert [str(v) for v in frame["top_terms"]] == [r["top_terms"] for r in written]
    assert list(frame["semantic_at_k"]) == [float(r["semantic_at_k"]) for r in written]
    assert list(result.to_frame("captions")["id"]) == [r["id"] for r in written]
