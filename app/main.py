"""Lexlens app entry point, served by ``streamlit run app/main.py``: ``lexlens app`` (which
``make run`` runs) starts that command with the token and data roots it checked.

This file plays two parts. ``streamlit run`` first reads it and finds ``app``, an ``st.App``:
the server it starts answers every page URL with Streamlit's page, told where the server
is (:mod:`lexlens.app.runtime.serving`), so a page opened or reloaded at its own URL asks nothing
that is not there. For each browser session Streamlit then runs this file as its script
(``__name__ == "__main__"``): the sidebar, the navigation and the chosen page.

Every page has its own URL (``/text``, ``/images``, …). Streamlit serves its *default* page
at the root URL only (``/text`` would answer "Page not found" if Text were the default), so
the default page is a hidden one at ``/`` that forwards to Text. Nothing here reaches beyond
this machine: the favicon is drawn locally (a Material-icon favicon is fetched from a font
CDN), ``app/.streamlit/config.toml`` turns usage statistics off, and Streamlit's lookups of
this machine's addresses answer without asking (``serving.no_address_lookups``).
"""

from __future__ import annotations

import functools
import io
from pathlib import Path

import streamlit as st
from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parent
PAGES = [  # (file, title, icon, url path); the first one is what the root URL shows
    ("app_pages/text.py", "Text", ":material/notes:", "text"),
    ("app_pages/images.py", "Images", ":material/image:", "images"),
    ("app_pages/contrib.py", "Query ⊙ Document", ":material/compare_arrows:", "contrib"),
    ("app_pages/search.py", "Search & exclusion", ":material/search:", "search"),
    ("app_pages/collections.py", "Collections", ":material/database:", "collections"),
    ("app_pages/attribution.py", "Attribution", ":material/insights:", "attribution"),
    ("app_pages/deviation.py", "Semantic deviation", ":material/straighten:", "deviation"),
    ("app_pages/compare.py", "Compare", ":material/difference:", "compare"),
    ("app_pages/evaluation.py", "Evaluation", ":material/fact_check:", "evaluation"),
    ("app_pages/history.py", "History", ":material/history:", "history"),
]
#: The hidden default page at the root URL, which forwards to the first page.
HOME_URL = "home"


@functools.cache
def favicon() -> bytes:
    """A small lens drawn here (PNG bytes), served by the app itself."""

    img = Image.new("RGBA", (64, 64), (0, 0, 0, 0))
    draw = ImageDraw.Draw(img)
    draw.line((38, 38, 58, 58), fill=(49, 51, 63, 255), width=9)
    draw.ellipse((4, 4, 44, 44), fill=(255, 255, 255, 255), outline=(255, 75, 75, 255), width=7)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def run_app() -> None:
    """One run of the app for a browser session: sidebar, navigation and the chosen page."""
    try:
        from lexlens.app.runtime.access import token_accepted  # inside the try: see the except
        from lexlens.app.runtime.jobs import jobs_sidebar  # inside the try: see the except
        from lexlens.app.runtime.state import (  # inside the try: see the except
            device_picker,
            remember_drawn,
            restore_kept,
        )
    except ModuleNotFoundError:  # a plain checkout that was never installed
        st.error("Lexlens is not installed in this Python: run `make run` (or `pip install -e .`).")
        st.stop()

    st.set_page_config(page_title="Lexlens", page_icon=favicon(), layout="wide")
    if not token_accepted():  # the server's TokenGate refuses first; this is the second lock
        st.error("A token is needed: open the URL `lexlens app` printed (…/?token=…).")
        st.stop()
    restore_kept()
    st.sidebar.title("Lexlens")
    st.sidebar.caption("Why does a retrieval encoder represent and match inputs as it does?")
    device_picker()
    pages = [
        st.Page(str(HERE / path), title=title, icon=icon, url_path=url)
        for path, title, icon, url in PAGES
        if (HERE / path).exists()
    ]
    home = st.Page(
        lambda: st.switch_page(pages[0]),
        title="Lexlens",
        url_path=HOME_URL,
        default=True,
        visibility="hidden",
    )
    navigation = st.navigation([home, *pages])
    jobs_sidebar()  # after the navigation: its links name registered pages
    try:
        navigation.run()
    finally:  # also when the page stopped early (st.stop) or asked for a rerun
        remember_drawn()


if __name__ == "__main__":  # Streamlit runs this file for a session
    run_app()
else:  # `streamlit run app/main.py` imports this file to serve it
    from starlette.middleware import Middleware

    from lexlens.app.runtime.access import TokenGate
    from lexlens.app.runtime.serving import no_address_lookups, page_routes

    no_address_lookups()  # the server asks no outside service about this machine
    app = st.App(
        __file__,
        routes=page_routes([HOME_URL, *(url for *_, url in PAGES)]),
        middleware=[Middleware(TokenGate)],
    )
