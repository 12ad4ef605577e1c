"""Shared Streamlit state: encoder and device pickers, cached model loading.

Pages stay thin: they pick an encoder here and call ``analysis`` functions.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run app/main.py` from a plain checkout
    sys.path.insert(0, str(ROOT))

from models import Encoder, LexlensError, available_encoders, load_encoder  # noqa: E402

CUSTOM = "local checkpoint directory…"


@st.cache_resource(show_spinner="Loading encoder…", max_entries=8)
def get_encoder(spec: str, device: str) -> Encoder:
    """Load once per (spec, device) and share across sessions (encoders are read-only)."""
    return load_encoder(spec, device=None if device == "auto" else device)


def device_picker() -> str:
    """Sidebar choice of device; ``auto`` = CUDA when available, else CPU."""
    import torch

    options = ["auto", "cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    return st.sidebar.selectbox(
        "Device", options, key="device", help="auto picks the GPU if there is one"
    )


def encoder_picker(
    label: str, modality: str, key: str, default: str | None = None
) -> Encoder | None:
    """Sidebar picker among registry encoders whose modality starts with ``modality``.

    ``modality`` is "text", "image" or "dense"; a local directory can always be typed in.
    Shows a clear error and returns ``None`` when loading fails.
    """
    names = [e["name"] for e in available_encoders() if _matches(e["modality"], modality)]
    options = names + [CUSTOM]
    index = options.index(default) if default in options else 0
    choice = st.sidebar.selectbox(label, options, index=index, key=key)
    if choice == CUSTOM:
        choice = st.sidebar.text_input("Checkpoint directory", key=f"{key}_dir").strip()
        if not choice:
            st.info("Type the path of a local checkpoint directory in the sidebar.")
            return None
    try:
        return get_encoder(choice, st.session_state.get("device", "auto"))
    except LexlensError as exc:
        st.error(str(exc))
        return None


def _matches(modality: str, wanted: str) -> bool:
    if wanted == "dense":
        return "dense" in modality
    return modality.startswith(wanted) and "lexical" in modality


def content_key(*parts: bytes | str) -> str:
    """A short hash of inputs, for cache keys and widget keys."""
    digest = hashlib.sha1()
    for part in parts:
        digest.update(part.encode("utf-8") if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:16]
