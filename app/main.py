"""Lexlens app entry point: ``streamlit run app/main.py``."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

try:
    from lexlens.app.state import device_picker, restore_kept
except ModuleNotFoundError:  # a plain checkout that was never installed
    st.error("Lexlens is not installed in this Python: run `make run` (or `pip install -e .`).")
    st.stop()

st.set_page_config(page_title="Lexlens", page_icon=":material/search_insights:", layout="wide")

HERE = Path(__file__).resolve().parent
PAGES = [  # (file, title, icon, url path)
    ("app_pages/text.py", "Text", ":material/notes:", "text"),
    ("app_pages/images.py", "Images", ":material/image:", "images"),
    ("app_pages/contrib.py", "Query ⊙ Document", ":material/compare_arrows:", "contrib"),
    ("app_pages/search.py", "Search & exclusion", ":material/search:", "search"),
    ("app_pages/attribution.py", "Attribution", ":material/insights:", "attribution"),
    ("app_pages/deviation.py", "Semantic deviation", ":material/straighten:", "deviation"),
]

restore_kept()
st.sidebar.title("Lexlens")
st.sidebar.caption("Why does a retrieval encoder represent and match inputs as it does?")
device_picker()
pages = [
    st.Page(str(HERE / path), title=title, icon=icon, url_path=url, default=(i == 0))
    for i, (path, title, icon, url) in enumerate(PAGES)
    if (HERE / path).exists()
]
st.navigation(pages).run()
