"""Headless Chromium against the served app and a generated HTML report.

Skipped (with the reason) when /usr/bin/chromium is missing: `make browser` installs it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from browser import chromium_page, require_chromium, served_app

pytestmark = pytest.mark.browser

TEXT = "a cat sleeping on a book"


def _save(page, tmp_path: Path, name: str, public: str) -> Path:
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000  # a real rendering, not a blank page
    shutil.copyfile(shot, public)
    return shot


def _wait_idle(page, timeout: float = 120_000) -> None:
    """Wait until Streamlit's "Running…" status widget is gone (the script run finished)."""
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout
    )


def test_text_page_shows_word_cloud_and_terms(tmp_path: Path) -> None:
    require_chromium()
    # A tall viewport: Streamlit scrolls inside its own container, so a "full page"
    # screenshot only shows what fits in the viewport.
    with served_app() as url, chromium_page(1280, 2000) as page:
        # Text is the default page, so Streamlit serves it at the root URL ("/text" answers
        # "Page not found" for a default page).
        page.goto(url, wait_until="domcontentloaded")
        area = page.get_by_role("textbox", name="Text", exact=True)
        area.wait_for(timeout=120_000)  # the first run loads the encoder
        area.fill(TEXT)
        page.get_by_role("button", name="Encode").click()
        _wait_idle(page)

        cloud = page.locator('[data-testid="stImage"] img').first
        cloud.wait_for(state="visible", timeout=120_000)
        assert cloud.is_visible()
        box = cloud.bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 100
        # The image really decoded (a broken <img> has naturalWidth 0).
        assert cloud.evaluate("img => img.complete && img.naturalWidth") > 200

        table = page.locator('[data-testid="stDataFrame"]').first
        table.scroll_into_view_if_needed(timeout=30_000)
        # Glide's canvas grid mirrors its cells in an accessible table for screen readers.
        first_cell = table.locator('[role="gridcell"]').first
        first_cell.wait_for(state="attached", timeout=30_000)
        terms = {c.strip() for c in table.locator('[role="gridcell"]').all_text_contents()}
        assert {"cat", "sleeping", "book"} <= terms, sorted(terms)[:40]
        page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)  # the bar chart drew
        page.evaluate("() => window.scrollTo(0, 0)")
        _save(page, tmp_path, "text_page.png", "/tmp/lexlens_text_page.png")


def test_html_report_heatmap_and_escaping(tmp_path: Path) -> None:
    require_chromium()
    import numpy as np

    from lexlens.analysis.attribution import SubvectorAttribution
    from lexlens.analysis.report import write_attribution_report

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
    paths = write_attribution_report(
        tmp_path, [item], encoder_name=f"minilm-pq {evil}", meta={"corpus": f"{evil}.txt"}
    )
    dialogs: list[str] = []
    with chromium_page(1400, 1400) as page:
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
        _save(page, tmp_path, "report.png", "/tmp/lexlens_report.png")
