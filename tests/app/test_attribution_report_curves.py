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
