"""Terms and Query ⊙ Document results display themselves in a notebook: ``_repr_html_`` is
one escaped, self-contained fragment (parsed here) holding the numbers of the command's
``--json``, at most ``NOTEBOOK_ROWS`` rows with the rest counted, and ``to_frame()`` is every
row of the table."""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser

import pytest

import lexlens
from lexlens.analysis.core.samples import sample_path
from lexlens.analysis.lexical.terms import TITLE_CHARACTERS
from lexlens.analysis.render.html import NOTEBOOK_ROWS, num
from lexlens.models.base import LexlensError
from tests.helpers import close_to


class Fragment(HTMLParser):
    """The tags, the table's cells row by row, the text and every URL a fragment names."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.rows: list[list[str]] = []
        self.text: list[str] = []
        self.urls: list[str] = []
        self.bars = 0
        self._cell: list[str] | None = None
        self._body = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        self.urls += [attrs[a] for a in ("src", "href") if a in attrs]
        if tag == "tbody":
            self._body = True
        elif tag == "tr" and self._body:
            self.rows.append([])
        elif tag == "td" and self._body:
            self._cell = []
        elif tag == "span" and "bar" in (attrs.get("class") or ""):
            self.bars += 1

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None
        elif tag == "tbody":
            self._body = False

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parsed(html: str) -> Fragment:
    fragment = Fragment()
    fragment.feed(html)
    fragment.close()
    assert "script" not in fragment.tags and "link" not in fragment.tags
    assert all(u.startswith("data:image/png;base64,") for u in fragment.urls)  # nothing fetched
    assert "http://" not in html and "https://" not in html
    return fragment


def test_terms_display_the_cloud_and_the_tables_numbers(splade, cli):
    corpus = sample_path("benchmarks/imagenet_beir/corpus.jsonl").read_text().splitlines()
    body = " ".join(json.loads(line)["text"] for line in corpus[:4])
    text = "a cat <b>sleeping</b> on a book & " + body  # long enough for many terms
    result = lexlens.terms(splade, text=text, top=80)
    document = cli(
        "terms", "--encoder", "splade-tiny", "--text", text, "--top", "80", "--json"
    ).json()
    merged = document["merged_terms"]
    assert len(merged) > NOTEBOOK_ROWS  # the cap is reached
    fragment = parsed(result._repr_html_())
    assert "b" not in fragment.tags  # the text's markup is shown, escaped, never drawn
    assert text[:TITLE_CHARACTERS] + "…" in "".join(fragment.text)  # the title, cut
    assert len(fragment.urls) == 1  # the word cloud, inline
    assert len(fragment.rows) == NOTEBOOK_ROWS
    for row, term in zip(fragment.rows, merged, strict=False):
        assert row[1:3] == [term["token"], num(term["weight"])]
    assert f"… {len(merged) - NOTEBOOK_ROWS} more rows" in "".join(fragment.text)
    frame = result.to_frame()
    assert list(frame["term"]) == [t["token"] for t in merged]
    assert list(frame["weight"]) == [t["weight"] for t in merged]
    assert list(frame["rank"]) == list(range(1, len(merged) + 1))


def test_contrib_displays_bars_summing_to_the_score(splade, cli):
    query, doc = "cat on a book", "a kitten asleep on a novel about cats and books"
    result = lexlens.contrib(splade, query=query, doc=doc)
    document = cli(
        "contrib", "--encoder", "splade-tiny", "--query", query, "--doc", doc, "--json"
    ).json()
    fragment = parsed(result._repr_html_())
    words = document["contributions_words"]
    assert 0 < len(fragment.rows) == len(words) <= NOTEBOOK_ROWS
    assert fragment.bars == len(words)
    for row, word in zip(fragment.rows, words, strict=True):
        assert row[:2] == [word["token"], num(word["contribution"])]
    assert f"score {num(document['score'])}" in "".join(fragment.text)
    frame = result.to_frame()
    products = [c["query_weight"] * c["doc_weight"] for c in document["contributions"]]
    assert math.fsum(frame["contribution"]) == close_to(document["score"], terms=products)
    assert list(frame["word"]) == [w["token"] for w in words]


def test_a_result_without_a_table_says_so_in_one_line():
    from lexlens.analysis.core.results import Result

    with pytest.raises(LexlensError, match="Result has no table: read it with to_dict()"):
        Result().to_frame()
    assert Result()._repr_html_() is None  # the notebook shows its plain repr
