"""Thumbnails of a stored collection's images, cached on the file's path and modification
time (the Collections and Search pages show them)."""

from __future__ import annotations

import io

import streamlit as st

from lexlens.models import LexlensError
from lexlens.models.images import load_image


@st.cache_data(show_spinner=False, max_entries=512)
def _thumbnail(path: str, mtime_ns: int, side: int) -> bytes | None:

    try:
        image = load_image(path)
    except LexlensError:
        return None
    image.thumbnail((side, side))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def item_thumbnail(index, meta: dict, side: int = 220) -> bytes | None:
    """A small PNG of a stored item's image; ``None`` for a text item or a missing or
    unreadable file."""
    path = index.image_path(meta)
    if path is None or not path.is_file():
        return None
    return _thumbnail(str(path), path.stat().st_mtime_ns, side)
