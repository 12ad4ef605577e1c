"""Marked texts: every word to mark is marked (counted here by a regular expression), the
drawing escapes every character of the text, and a preview never cuts a word silently."""

from __future__ import annotations

import html
import json
import random
import re

from lexlens.analysis.core.samples import sample_path
from lexlens.analysis.lexical.highlight import highlight_spans, preview, score_spans
from lexlens.app.views.highlight import highlighted_html


def _corpus() -> list[str]:
    path = sample_path("benchmarks/imagenet_beir/corpus.jsonl")
    return [json.loads(line)["text"] for line in path.read_text().splitlines()]


def _unmarked(drawn: str) -> str:
    """The text a drawing shows: tags dropped, entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", drawn))


def test_security_a_marked_text_is_escaped_and_shown_whole():
    text = (
        'Beak <script>alert("x")</script> & <img src=x onerror=alert(1)> "beak" '
        "<mark>beak</mark>\nnew line"
    )
    spans = highlight_spans(text, ["beak"], {"nonrelevant": ["script", "img", "alert"]})
    drawn = highlighted_html(text, spans)
    assert "<script" not in drawn and "<img" not in drawn
    assert drawn.count("<mark ") == len(spans) and drawn.count("&lt;") == text.count("<")
    inner = drawn[drawn.index(">") + 1 : drawn.rindex("</div>")]
    assert _unmarked(inner) == text  # nothing lost, nothing added
    # A title attribute cannot be broken out of by a marked term either.
    evil = highlight_spans('x"onmouseover="y', [], {"match": ['x"onmouseover="y', "x"]})
    assert 'onmouseover="' not in highlighted_html('x"onmouseover="y', evil)


def test_silent_wrong_every_occurrence_of_a_marked_word_is_marked():
    texts = _corpus()
    words = {"bird": "nonrelevant", "large": "relevant", "dog": "nonrelevant"}
    query = ["small", "with"]
    for text in texts[:200]:
        spans = highlight_spans(
            text,
            query,
            {s: [w for w, x in words.items() if x == s] for s in ("nonrelevant", "relevant")},
        )
        for word in [*words, *query]:
            expected = [
                m.start()
                for m in re.finditer(rf"(?<![^\W_]){word}(?![^\W_])", text, flags=re.IGNORECASE)
            ]
            marked = [s.start for s in spans if text[s.start : s.end].lower() == word]
            assert marked == expected, (word, text)
        for s in spans:
            word = text[s.start : s.end].lower()
            assert s.query == (word in query)
            assert s.side == words.get(word, "")


def test_silent_wrong_a_word_is_marked_by_its_pieces_only_with_the_vocabulary():
    text = "A colourful bill and a colour chart"
    without = highlight_spans(text, [], {"relevant": ["##ful"]})
    assert without == []
    with_vocab = highlight_spans(text, [], {"relevant": ["##ful"]}, ["colour", "##ful", "bill"])
    assert [text[s.start : s.end] for s in with_vocab] == ["colourful"]
    rows = [{"token": "bill", "contribution": 0.5}, {"token": "chart", "contribution": 0.0}]
    assert [text[s.start : s.end] for s in score_spans(text, "the bill", rows)] == ["bill"]


def test_silent_wrong_a_preview_never_cuts_a_word_and_says_it_cut():
    rng = random.Random(7)
    texts = _corpus() + ["x" * 500, "word " * 100, "short"]
    for text in texts:
        for limit in (1, 5, 40, rng.randint(10, 400), 300):
            shown, cut = preview(text, limit)
            if len(text) <= limit:
                assert (shown, cut) == (text, False)
                continue
            assert cut and shown.endswith("…")
            kept = shown[:-1]
            assert text.startswith(kept) and len(kept) <= limit
            rest = text[len(kept) :]
            single_word = re.fullmatch(r"[^\s]+", text[: limit + 1]) is not None
            if kept and not single_word:  # the cut falls between words
                assert rest[:1].isspace() or not re.match(r"[^\W_]", rest[:1])
                assert not (kept[-1:].isalnum() and rest[:1].isalnum())
