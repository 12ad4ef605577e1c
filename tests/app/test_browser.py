"""Headless Chromium against the served app (offline, every URL, an end-to-end session) and
against a generated HTML report.

Skipped (with the reason) when /usr/bin/chromium is missing: `make browser` installs it.
Screenshots and downloads go to ``.lexlens-cache/test-output/browser/`` (``LEXLENS_TEST_OUTPUT``
moves it). The tests find things by what a user sees (link, button and field labels), so a
page may change its layout without breaking them.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import (
    OUTPUT,
    Watch,
    app_pages,
    chromium,
    exception_boxes,
    require_chromium,
    served_app,
    shot,
    wait_idle,
)
from tests.helpers import skimage_path

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SHOTS = OUTPUT / "browser"
TYPED = "a red bicycle leaning on a brick wall"
QUERY = re.compile(r"^Query( text)?$")
DOCUMENT = re.compile(r"^Document( text)?$")


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    require_chromium()
    with served_app() as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


def _new_page(browser: Any) -> tuple[Any, Any, Watch]:
    # A tall viewport: Streamlit scrolls inside its own container, so a "full page"
    # screenshot only shows what fits in the viewport.
    context = browser.new_context(viewport={"width": 1400, "height": 2200}, accept_downloads=True)
    page = context.new_page()
    return context, page, Watch(page)


def _clean(page: Any, watch: Watch, where: str) -> None:
    """No exception box on the page, nothing sent off this machine, no console error."""
    assert exception_boxes(page) == [], where
    assert watch.outside() == [], where
    assert watch.errors() == [], where


def _stopwatch(laps: dict[str, float]):
    """``lap(name)`` records the seconds since the previous lap (where a slow run went)."""
    last = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        laps[name] = round(now - last[0], 2)
        last[0] = now

    return lap


def _nav(page: Any, title: str) -> None:
    page.get_by_role("link", name=title, exact=True).click()
    wait_idle(page)


def _commit(page: Any, name: re.Pattern, value: str) -> None:
    """Type ``value`` into the text field ``name`` and commit it as a user does: Enter in a
    one-line field, Ctrl+Enter in a text area (both also submit a form)."""
    box = page.get_by_role("textbox", name=name)
    box.fill(value)
    multiline = box.evaluate("e => e.tagName === 'TEXTAREA'")
    box.press("Control+Enter" if multiline else "Enter")
    wait_idle(page)


def _few_ig_steps(page: Any) -> str:
    """Set the Attribution form's "IG steps" to its smallest number (a field or a list)."""
    field = page.get_by_role("spinbutton", name="IG steps")
    if field.count():
        field.fill("4")
        return "4"
    page.get_by_role("combobox", name=re.compile("IG steps")).click()
    options = page.get_by_role("option")
    options.first.wait_for(timeout=10_000)
    pick = min((t.strip() for t in options.all_inner_texts() if t.strip().isdigit()), key=int)
    page.get_by_role("option", name=pick, exact=True).click()
    return pick


def _ig_steps_shown(page: Any) -> str:
    field = page.get_by_role("spinbutton", name="IG steps")
    if field.count():
        return field.input_value()
    return page.get_by_role("combobox", name=re.compile("IG steps")).input_value()


def _slide_to(page: Any, thumb: Any, value: float) -> None:
    """Move a slider thumb with the keyboard (PageUp/PageDown: a tenth of the range) until it
    reads ``value``; a key pressed while the page reruns can be lost, so read after each."""
    for _ in range(20):
        now = float(thumb.get_attribute("aria-valuetext") or thumb.get_attribute("aria-valuenow"))
        if abs(now - value) < 1e-6:
            return
        thumb.focus()
        thumb.press("PageDown" if now > value else "PageUp")
        wait_idle(page)
    raise AssertionError(f"the slider did not reach {value}")


def _open_tab(page: Any, name: str, shows: Any) -> None:
    """Click the tab ``name`` until ``shows`` (a locator inside it) is visible: a script run
    that ends after the click draws the tabs again with the first one open."""
    for _ in range(5):
        page.get_by_role("tab", name=name).first.click()
        try:
            shows.wait_for(state="visible", timeout=5_000)
            return
        except Exception:  # Playwright's TimeoutError: try again once the run is over
            wait_idle(page)
    shot(page, SHOTS, f"failed_tab_{name}")
    shows.wait_for(state="visible", timeout=5_000)


def _grid_cells(page: Any, index: int = 0) -> set[str]:
    """Cell texts of the ``index``-th table (Glide mirrors its canvas in an accessible grid)."""
    table = page.locator('[data-testid="stDataFrame"]').nth(index)
    table.scroll_into_view_if_needed(timeout=30_000)
    table.locator('[role="gridcell"]').first.wait_for(state="attached", timeout=30_000)
    return {c.strip() for c in table.locator('[role="gridcell"]').all_text_contents()}


def test_end_to_end_session(app_url: str, browser: Any) -> None:
    """A researcher's session: type a text, upload a photo and select a region of it, score a
    query against a document, run a small attribution and download its report, then visit
    the pages again: every input is still there."""
    photo = skimage_path("chelsea.png")
    context, page, watch = _new_page(browser)
    laps: dict[str, float] = {}
    lap = _stopwatch(laps)
    try:
        # 1. Text: type and encode.
        page.goto(app_url, wait_until="domcontentloaded")
        wait_idle(page)
        area = page.get_by_role("textbox", name="Text", exact=True)
        area.fill(TYPED)
        # A rerun caused elsewhere keeps what is typed in the form but not yet submitted.
        top = page.get_by_role("slider", name="Top terms")
        if top.count():
            top.focus()
            top.press("ArrowRight")
            wait_idle(page)
            assert area.input_value() == TYPED
        page.get_by_role("button", name="Encode", exact=True).click()
        wait_idle(page)
        cloud = page.locator('[data-testid="stImage"] img').first
        cloud.wait_for(state="visible", timeout=60_000)
        box = cloud.bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 100
        # The image really decoded (a broken <img> has naturalWidth 0).
        assert cloud.evaluate("img => img.complete && img.naturalWidth") > 200
        assert {"bicycle", "wall"} <= _grid_cells(page)
        page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)  # the bar chart drew
        shot(page, SHOTS, "e2e_1_text")
        _clean(page, watch, "text")

        lap("text")
        # 2. Images: upload a real photo, then select the top-left quarter as group A.
        _nav(page, "Images")
        page.locator('[data-testid="stFileUploader"] input[type="file"]').first.set_input_files(
            str(photo)
        )
        wait_idle(page)
        page.get_by_role("heading", name="chelsea.png").first.wait_for(timeout=60_000)
        wait_idle(page)  # the heading shows before the photo is encoded
        thumb = page.get_by_role("slider", name=re.compile(r"Group A: Y range.*\bend\b"))
        _open_tab(page, "Patch groups", thumb)
        _slide_to(page, thumb, 0.5)
        region = page.get_by_text(re.compile(r"Group A \(.*box 0,0,0\.5,0\.5 → \d+ cells"))
        region.first.wait_for(timeout=60_000)
        wait_idle(page)
        shot(page, SHOTS, "e2e_2_images_region")
        _clean(page, watch, "images")

        lap("images")
        # 3. Query ⊙ Document.
        _nav(page, "Query ⊙ Document")
        _commit(page, QUERY, "cat on a book")
        _commit(page, DOCUMENT, "a kitten asleep on a book")
        score_button = page.get_by_role("button", name="Score", exact=True)
        if score_button.count():  # a form: submit it (no form: each field committed above)
            score_button.click()
        wait_idle(page)
        score = page.locator('[data-testid="stMetricValue"]').first.inner_text()
        assert float(score) > 0
        assert "book" in _grid_cells(page)
        shot(page, SHOTS, "e2e_3_contrib")
        _clean(page, watch, "contrib")

        lap("contrib")
        # 4. Attribution: a small run (few IG steps), then download its HTML report.
        _nav(page, "Attribution")
        steps = _few_ig_steps(page)
        page.get_by_role("button", name="Attribute", exact=True).click()
        wait_idle(page)
        page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
        with page.expect_download(timeout=60_000) as download:
            page.get_by_role("button", name="report.html").click()
        report = SHOTS / "e2e_report.html"
        report.parent.mkdir(parents=True, exist_ok=True)
        download.value.save_as(report)
        html = report.read_text(encoding="utf-8")
        assert html.lstrip().lower().startswith("<!doctype html")
        assert "a cat sleeping on a book" in html
        shot(page, SHOTS, "e2e_4_attribution")
        _clean(page, watch, "attribution")

        lap("attribution")
        # 5. Back to every page: the inputs (and the attribution) are still there.
        _nav(page, "Text")
        assert page.get_by_role("textbox", name="Text", exact=True).input_value() == TYPED
        assert "bicycle" in _grid_cells(page)
        _nav(page, "Images")
        page.get_by_role("heading", name="chelsea.png").first.wait_for(timeout=60_000)
        wait_idle(page)
        _open_tab(page, "Patch groups", region.first)
        _nav(page, "Query ⊙ Document")
        assert page.get_by_role("textbox", name=QUERY).input_value() == "cat on a book"
        assert page.get_by_role("textbox", name=DOCUMENT).input_value() == (
            "a kitten asleep on a book"
        )
        _nav(page, "Attribution")
        assert _ig_steps_shown(page) == steps
        page.get_by_role("button", name="report.html").wait_for(timeout=30_000)
        shot(page, SHOTS, "e2e_5_back_on_attribution")
        lap("back on every page")
        _clean(page, watch, "after the round trip")
        assert len(watch.requests) > 50
    except Exception:
        shot(page, SHOTS, "e2e_failed")  # what the page showed when the test stopped
        raise
    finally:
        context.close()
        SHOTS.mkdir(parents=True, exist_ok=True)
        (SHOTS / "e2e_seconds.json").write_text(json.dumps(laps, indent=2) + "\n")


def test_jobs_outlive_page_switches_and_reloads(app_url: str, browser: Any) -> None:
    """Start an attribution and a collection build, leave for another page (the sidebar
    lists both jobs), come back (progress, then the result), reload (the URL's run brings
    the state back) and open the History view."""
    name = f"jobs-{int(time.time())}"
    context, page, watch = _new_page(browser)
    try:
        page.goto(f"{app_url}/attribution", wait_until="domcontentloaded")
        wait_idle(page)
        page.get_by_role("button", name="Attribute", exact=True).click()
        wait_idle(page)
        _nav(page, "Collections")
        build = page.get_by_role("button", name="Build", exact=True)
        # Open the expander only if it is closed: it opens itself when no collection is
        # stored, and a click on an open one (or one still rendering) would close it.
        expander = page.get_by_text("Build a collection").first
        expander.wait_for(timeout=30_000)
        if not expander.evaluate("e => e.closest('details').open"):
            expander.click()
        page.get_by_role("textbox", name="Name", exact=True).fill(name)
        page.get_by_role("textbox", name="Name", exact=True).press("Enter")
        wait_idle(page)
        build.click()
        wait_idle(page)
        shot(page, SHOTS, "jobs_1_build_started")
        _nav(page, "Text")
        sidebar = page.locator('[data-testid="stSidebar"]')
        sidebar.get_by_text("Jobs (one runs at a time").wait_for(timeout=30_000)
        assert sidebar.get_by_text(f"build {name}").count() >= 1
        shot(page, SHOTS, "jobs_2_sidebar_on_another_page")
        _nav(page, "Attribution")
        page.get_by_role("button", name="report.html").wait_for(timeout=300_000)
        shot(page, SHOTS, "jobs_3_attribution_arrived")
        _nav(page, "Collections")
        done = page.get_by_text(re.compile(rf"{name}: 19 items"))
        done.first.wait_for(timeout=300_000)
        assert "run=" in page.url
        page.reload(wait_until="domcontentloaded")  # the run in the URL brings it back
        wait_idle(page)
        done.first.wait_for(timeout=60_000)
        shot(page, SHOTS, "jobs_4_collection_after_reload")
        _nav(page, "Attribution")
        page.reload(wait_until="domcontentloaded")
        wait_idle(page)
        page.get_by_role("button", name="report.html").wait_for(timeout=60_000)
        _nav(page, "History")
        assert "build " + name in page.inner_text("body")
        shot(page, SHOTS, "jobs_5_history")
        _clean(page, watch, "jobs")
    except Exception:
        shot(page, SHOTS, "jobs_failed")
        raise
    finally:
        context.close()
        from lexlens.analysis.collections.workspace import delete_collection

        with contextlib.suppress(Exception):  # the shared test workspace stays as it was
            delete_collection(name)


def test_every_page_has_a_url_and_works_offline(app_url: str, browser: Any) -> None:
    """Each page opened directly by its URL (and the root) in a fresh session, then reloaded:
    it draws, shows no exception, sends no request beyond localhost and logs no console
    error, not even a 404 for a probe of the page's own path. (After the
    end-to-end test, so the server has most encoders loaded already.)"""
    seen: dict[str, int] = {}
    for path in ["", *(url for *_, url in app_pages())]:
        context, page, watch = _new_page(browser)
        try:
            page.goto(f"{app_url}/{path}", wait_until="domcontentloaded")
            wait_idle(page)
            expected = path or app_pages()[0][3]  # the root shows the first page at its URL
            assert page.url.split("?")[0].rstrip("/") == f"{app_url}/{expected}"
            body = page.inner_text("body")
            assert "Page not found" not in body, path
            assert page.get_by_role("heading", level=1).count() + page.locator("h2").count() > 0
            shot(page, SHOTS, f"page_{path or 'root'}")
            _clean(page, watch, f"/{path}")
            page.reload(wait_until="domcontentloaded")  # a reload at the page's own URL
            wait_idle(page)
            assert page.url.split("?")[0].rstrip("/") == f"{app_url}/{expected}"
            assert "Page not found" not in page.inner_text("body"), path
            _clean(page, watch, f"/{path} reloaded")
            # The favicon is served by the app itself.
            icon = page.locator("link[rel*=icon]").first.get_attribute("href") or ""
            assert not icon.startswith("http") or icon.startswith(app_url), icon
            seen[path or "/"] = len(watch.requests)
        finally:
            context.close()
    assert all(n > 10 for n in seen.values()), seen  # the recorder really saw the traffic


def test_html_report_heatmap_and_escaping(tmp_path: Path, browser: Any) -> None:
    import numpy as np

    from lexlens.analysis.attribution.report_html import render_attribution_html
    from lexlens.analysis.attribution.subvector import SubvectorAttribution
    from lexlens.analysis.core.outputs import write_files

    evil = "<script>alert(1)</script>"
    words = ["a", "cat", "<", "script", ">", "alert", "(", "1", ")", "book", evil]
    m = 24
    rng = np.random.default_rng(0)
    attr = rng.normal(size=(m, len(words)))
    gap = attr.sum(1) + rng.normal(scale=1e-3, size=m)
    item = SubvectorAttribution(
        text=f"a cat {evil} book",
        tokens=["[CLS]", *words, "[SEP]"],
        words=words,
        token_attributions=np.pad(attr, ((0, 0), (1, 1))),
        attributions=attr,
        delta=attr.sum(1) - gap,
        codes=rng.integers(0, 256, size=m),
        global_attributions=attr.sum(0),
        global_delta=1e-4,
        steps=50,
        truncated=False,
        subvectors=list(range(m)),
        target_gap=gap,
    )
    html = render_attribution_html(
        [item], encoder_name=f"minilm-pq {evil}", meta={"corpus": f"{evil}.txt"}
    )
    paths = write_files(tmp_path, {"report.html": html.encode("utf-8")})
    dialogs: list[str] = []
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    try:
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(paths["report.html"].resolve().as_uri())
        heat = page.locator("#heatmap-0")
        heat.wait_for(state="visible", timeout=10_000)
        box = heat.bounding_box()
        assert box is not None and box["width"] > 400 and box["height"] > 300
        assert heat.locator("tr.subvector").count() == m
        assert heat.locator("tr.global").count() == 1
        colours = heat.locator("td.cell").evaluate_all(
            "cells => cells.map(c => getComputedStyle(c).backgroundColor)"
        )
        assert len(colours) == (m + 1) * len(words)
        assert len(set(colours)) > 50  # a real diverging colour map, not one flat colour
        # The <script> text is shown as text, never run.
        assert page.locator("script").count() == 0
        assert dialogs == []
        assert page.locator("p.text").inner_text() == f"a cat {evil} book"
        body = page.inner_text("body")
        assert f"minilm-pq {evil}" in body and f"{evil}.txt" in body
        assert heat.locator("th.word").last.inner_text() == evil
        shot(page, SHOTS, "report")
    finally:
        page.close()
