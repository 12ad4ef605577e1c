"""Shared Streamlit state: encoder and device pickers, cached model loading.

Pages stay thin: they pick an encoder here and call ``analysis`` functions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import streamlit as st

from lexlens.models import Encoder, LexlensError, Needs, available_encoders, load_encoder
from lexlens.models.hub import cached_models

ROOT = Path(__file__).resolve().parent.parent

CUSTOM = "local checkpoint directory…"
T = TypeVar("T")


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


def encoder_choice(label: str, needs: Needs, key: str, default: str | None = None) -> str | None:
    """Sidebar picker among the registry encoders (and cached hub models) an analysis can use
    (``needs``); returns the chosen spec without loading it (``None`` while a local
    checkpoint directory is still to be typed). The choice and the typed directory are kept
    across page switches (``kept``)."""
    names = [c.name for c in available_encoders() if needs.is_compatible(c.capabilities)]
    names += [c.name for c in cached_models() if needs.is_compatible(c.capabilities)]
    options = names + [CUSTOM]
    kept(key, default if default in options else options[0])
    if st.session_state.get(key) not in options:  # a kept name this page no longer lists
        st.session_state[key] = options[0]
    choice = st.sidebar.selectbox(label, options, key=key)
    if choice == CUSTOM:
        choice = st.sidebar.text_input("Checkpoint directory", key=kept(f"{key}_dir", "")).strip()
        if not choice:
            st.info("Type the path of a local checkpoint directory in the sidebar.")
            return None
    return choice


def load_checked(spec: str, needs: Needs) -> Encoder | None:
    """Load ``spec`` (cached) and check it against ``needs`` (a local directory is known only
    once loaded); shows a clear error and returns ``None`` when either fails."""
    try:
        encoder = get_encoder(spec, st.session_state.get("device", "auto"))
        needs.check(encoder)
    except LexlensError as exc:
        st.error(str(exc))
        return None
    return encoder


def encoder_picker(
    label: str, needs: Needs, key: str, default: str | None = None
) -> Encoder | None:
    """:func:`encoder_choice`, then :func:`load_checked`: the loaded encoder, or ``None``."""
    spec = encoder_choice(label, needs, key, default)
    return None if spec is None else load_checked(spec, needs)


def kept_result(name: str, compute: Callable[[], T], key: str | None = None) -> T | None:
    """The page's result, kept in session state under ``name`` across reruns and pages.

    ``compute`` runs when ``key`` (a hash of the inputs) differs from the last run's, or on
    every run when ``key`` is ``None`` (pages that cache the work themselves). A
    :class:`LexlensError` is shown with ``st.error`` and the previous result is kept and
    returned (``None`` when there is none).
    """
    result = st.session_state.get(name)
    if key is not None and st.session_state.get(f"{name}_key") == key:
        return result
    try:
        result = compute()
    except LexlensError as exc:
        st.error(str(exc))
        if result is not None:
            st.caption("Showing the previous result.")
        return result
    st.session_state[name] = result
    st.session_state[f"{name}_key"] = key
    return result


def content_key(*parts: bytes | str) -> str:
    """A short hash of inputs, for cache keys and widget keys."""
    digest = hashlib.sha1()
    for part in parts:
        digest.update(part.encode("utf-8") if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


# ------------------------------------------------------------- state that survives pages
#
# Streamlit forgets a widget's value when a run does not draw it (another page was shown,
# or the page stopped early, e.g. while a checkpoint directory is being typed), and the
# browser forgets it as soon as the widget leaves the screen. For keys registered with
# ``kept``, ``restore_kept`` (called by ``app/main.py`` at the start of every run) remembers
# the last value and hands it back, through session state, to every widget that was not
# on the screen in the previous run, so the browser shows it again when it reappears.
# Widgets that were on the screen are left alone: re-assigning them would overwrite, on
# each rerun, what a user has typed into a form but not yet submitted. ``app/main.py``
# calls ``remember_drawn`` after the page ran. Uploads cannot be set through session
# state, so ``remembered_uploads`` keeps their bytes instead.

_KEPT = "_lexlens_kept_keys"
_VALUES = "_lexlens_kept_values"
_DRAWN = "_lexlens_drawn_keys"
_RUN = "_lexlens_run"


def kept(key: str, default: object = None) -> str:
    """Register a widget key whose value survives page switches; returns ``key``.

    The default is seeded into session state (pass no ``value=``/``index=`` to the widget,
    or Streamlit warns that the value was set twice). Use it for value widgets (text,
    numbers, sliders, selections, checkboxes); not for buttons, uploaders or data editors,
    whose values Streamlit does not let a script set. To reset a kept widget, assign its
    new value (``st.session_state[key] = …``); deleting the key brings the last value back.
    """
    registry = st.session_state.setdefault(_KEPT, set())
    registry.add(key)
    if key not in st.session_state and default is not None:
        st.session_state[key] = default
    return key


def restore_kept() -> None:
    """Remember every kept value; give it back to widgets that were not on the screen in
    the previous run (call once per run, before any page draws)."""
    st.session_state[_RUN] = st.session_state.get(_RUN, 0) + 1
    values = st.session_state.setdefault(_VALUES, {})
    drawn = st.session_state.get(_DRAWN)  # None: unknown, so every widget gets its value
    for key in list(st.session_state.get(_KEPT, ())):
        if key in st.session_state:
            values[key] = st.session_state[key]
            if drawn is None or key not in drawn:
                st.session_state[key] = values[key]
        elif key in values:
            st.session_state[key] = values[key]


def remember_drawn() -> None:
    """Note which kept widgets this run drew (call after the page ran, also when it
    stopped early). Reads Streamlit's record of the widget keys registered in this run;
    where that is unavailable, ``restore_kept`` re-assigns every kept value instead."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    registered = getattr(getattr(ctx, "shared", ctx), "widget_user_keys_this_run", None)
    if registered is None:
        st.session_state.pop(_DRAWN, None)
        return
    st.session_state[_DRAWN] = {k for k in st.session_state.get(_KEPT, ()) if k in registered}


def remembered_uploads(key: str, uploads: list | None) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of the current uploads, or of the last ones when the uploader comes
    back empty after the page was left (another page, or an early stop); a button forgets
    them. Removing the files in the uploader itself forgets them too."""
    store = f"_lexlens_uploads_{key}"
    seen = f"{store}_run"
    run = st.session_state.get(_RUN, 0)
    shown_just_before = st.session_state.get(seen) == run - 1
    st.session_state[seen] = run
    if uploads:
        st.session_state[store] = [(f.name, f.getvalue()) for f in uploads]
    elif shown_just_before and run > 0:  # the user emptied the uploader on this page
        st.session_state.pop(store, None)
    kept_files = st.session_state.get(store, [])
    if kept_files and not uploads:
        names = ", ".join(name for name, _ in kept_files)
        left, right = st.columns([5, 1])
        left.caption(f"Using your earlier upload: {names}")
        if right.button("Forget", key=f"{store}_forget"):
            st.session_state.pop(store, None)
            st.rerun()
    return list(kept_files)
