"""The Search page shows every hit whole: the table's previews end on a word with "…", and
each hit's whole text (with its marked words) and all its words are one click away."""

from __future__ import annotations

import html
import re

from tests.helpers import app_page

FILLER = " ".join(f"filler{n} words about nothing" for n in range(60))
TEXTS = {
    "long-1": f"A story of a lighthouse keeper. {FILLER} In the end the giraffe came home.",
    "long-2": f"{FILLER} A giraffe, at last, at the very end.",
    "short": "a cup of hot coffee",
}


def test_silent_wrong_search_hits_are_shown_whole_with_their_words_marked(tmp_path):
    at = app_page("app_pages/search.py")
    at.radio(key="search_source").set_value("Upload a small text file").run()
    data = "id,text\n" + "".join(f'{i},"{t}"\n' for i, t in TEXTS.items())
    at.file_uploader(key="search_upload").set_value(("items.csv", data.encode(), "text/csv"))
    at.run()
    at.text_input(key="search_query").set_value("giraffe").run()
    at.text_input(key="search_exclude").set_value("").run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    for _, row in table.iterrows():
        whole = TEXTS[row["id"]]
        if len(whole) > 120:
            assert row["text"].endswith("…") and whole.startswith(row["text"][:-1])
            assert whole[len(row["text"]) - 1] == " "  # the cut falls between two words
        else:
            assert row["text"] == whole
    drawn = [html.unescape(re.sub(r"<[^>]+>", "", h.proto.body)) for h in at.get("html")]
    for item in ("long-1", "long-2"):
        assert TEXTS[item] in drawn  # the whole text, nothing cut
    marked = [h.proto.body for h in at.get("html") if "came home" in h.proto.body]
    assert re.search(r"<mark [^>]*>giraffe</mark> came home", marked[0])
    expanders = [e.label for e in at.expander]
    assert any(label.startswith("1. ") and "score" in label for label in expanders)
