"""The Attribution page's downloaded report.html carries the IG deletion and insertion curves
the page shows, with the very AOPC values of its table (AppTest, minilm-pq)."""

from __future__ import annotations

import re

from tests.helpers import app_page, click_and_wait, reopened

PAGE = "app_pages/attribution.py"


def test_silent_wrong_the_downloaded_report_holds_the_curves_the_page_shows(
    tmp_path, monkeypatch, downloads
):
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    at = app_page(PAGE)
    assert not at.exception and not at.error
    at.selectbox(key="attr_steps").set_value(16)
    click_and_wait(at, next(b for b in at.button if b.label == "Attribute").click)
    assert not at.exception and not at.error
    table = next(d.value for d in at.dataframe if "insertion AOPC" in d.value.columns)
    page = downloads["report.html"].decode("utf-8")
    start = page.index('id="ig-curves-0"')
    section = page[start : page.index("</table>", start)]
    drawn = dict(re.findall(r"<tr><td>(\w+)</td><td class=\"num\" title=\"([^\"]+)\"", section))
    shown = dict(zip(table["ranking"], table["deletion AOPC (mean over sub-vectors)"], strict=True))
    assert set(shown) == {"MoT", "RandT", "GlobalT"}
    assert {name: float(value) for name, value in drawn.items()} == shown
    assert section.count("<polyline") == 6  # deletion and insertion, three rankings each
    assert any("carries the IG curves shown above of text(s) 1" in c.value for c in at.caption)


def test_data_lost_optional_choices_keep_their_none_after_a_run_and_a_reload(tmp_path, monkeypatch):
    """The sub-vectors M and IG steps lists, left at their first choice (the encoder's own,
    auto), still show it after Attribute (the page runs again) and after a reload of the
    run's URL: a restored None selects the first choice, not no choice at all."""
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    at = app_page(PAGE)
    click_and_wait(at, next(b for b in at.button if b.label == "Attribute").click)
    assert not at.exception and not at.error
    again = reopened(at, PAGE)
    for page in (at, again):
        for key in ("attr_m", "attr_steps"):
            shown = page.selectbox(key=key).proto  # what the browser draws
            assert shown.HasField("default") and shown.default == 0, key
            assert not shown.set_value, key
    assert not any("inputs changed" in i.value for i in again.info)


def _plotly_colours(at) -> list[dict[str, str]]:
    """Each plotly chart of the page: its traces' colours by name (markers' or lines')."""
    import json

    charts = []
    for element in at.get("plotly_chart"):
        figure = json.loads(element.proto.spec)
        colours = {}
        for trace in figure["data"]:
            if "name" in trace:
                colours[trace["name"]] = (trace.get("line") or trace.get("marker") or {}).get(
                    "color"
                )
        charts.append(colours)
    return charts


def test_silent_wrong_each_ranking_has_one_colour_in_the_bars_the_curves_and_the_report(
    tmp_path, monkeypatch, downloads
):
    """MoT, RandT and GlobalT each keep one colour: in the page's bars of one sub-vector, in
    its deletion and insertion curves and in report.html's curves (their SVG lines)."""
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    at = app_page(PAGE)
    at.selectbox(key="attr_steps").set_value(16)
    click_and_wait(at, next(b for b in at.button if b.label == "Attribute").click)
    assert not at.exception and not at.error
    rankings = ("MoT", "RandT", "GlobalT")
    seen: dict[str, set[str]] = {}
    charts = [
        {n: c for n, c in colours.items() if n.split(" ", 1)[0] in rankings}
        for colours in _plotly_colours(at)
    ]
    assert sum(1 for c in charts if c) == 3  # the bars, the deletion and the insertion curves
    for colours in charts:
        for name, colour in colours.items():
            seen.setdefault(name.split(" ", 1)[0], set()).add(colour)
    page = downloads["report.html"].decode("utf-8")
    section = page[page.index('id="ig-curves-0"') :]
    section = section[: section.index("</table>")]
    for colour, name in re.findall(
        r'<text [^>]*font-size="11" fill="([^"]+)">(\w+)</text>', section
    ):
        seen.setdefault(name, set()).add(colour)
    assert set(seen) == set(rankings)
    assert all(len(colours) == 1 and None not in colours for colours in seen.values()), seen
    assert len({next(iter(seen[n])) for n in rankings}) == 3
