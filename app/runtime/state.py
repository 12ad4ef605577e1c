"""Shared Streamlit state: encoder and device pickers, cached model loading.

Pages stay thin: they pick an encoder here and call ``analysis`` functions.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Callable
from typing import TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from lexlens.analysis.core.results import state_of, value_of
from lexlens.app.runtime import runs
from lexlens.app.runtime.access import server_spec
from lexlens.app.runtime.jobs import job_manager, run_outcome
from lexlens.models import Encoder, LexlensError, Needs, available_encoders, load_encoder
from lexlens.models.base import pick_device
from lexlens.models.hub import cached_models

CUSTOM = "local checkpoint directory…"
T = TypeVar("T")


@st.cache_resource(show_spinner="Loading encoder…", max_entries=8)
def get_encoder(spec: str, device: str) -> Encoder:
    """Load once per (spec, device) and share across sessions (encoders are read-only)."""
    return load_encoder(spec, device=None if device == "auto" else device)


_AUTO_DEVICE = "_lexlens_auto_device"  # where the last encoder loaded under auto went


def device_picker() -> str:
    """Sidebar choice of device; ``auto`` = CUDA when available, else CPU, shown with the
    device it chose ("auto → cpu"): the one the last encoder of this session was loaded on
    under ``auto``, before any the one the loader's rule picks."""
    import torch  # heavy: torch loads on first use

    options = ["auto", "cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    choice = st.sidebar.selectbox(
        "Device", options, key="device", help="auto picks the GPU if there is one"
    )
    if choice == "auto":
        st.sidebar.caption(f"auto → {st.session_state.get(_AUTO_DEVICE) or pick_device()}")
    return choice


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
        try:
            choice = server_spec(choice, "Checkpoint directory")
        except LexlensError as exc:
            st.error(str(exc))
            return None
    return choice


def load_checked(spec: str, needs: Needs) -> Encoder | None:
    """Load ``spec`` (cached) and check it against ``needs`` (a local directory is known only
    once loaded); shows a clear error and returns ``None`` when either fails."""
    device = st.session_state.get("device", "auto")
    try:
        encoder = get_encoder(spec, device)
        needs.check(encoder)
    except LexlensError as exc:
        st.error(str(exc))
        return None
    if device == "auto":
        st.session_state[_AUTO_DEVICE] = encoder.device
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
    browser_session()  # the URL carries the session, so a reload finds every page's run
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

    ctx = get_script_run_ctx()
    registered = getattr(getattr(ctx, "shared", ctx), "widget_user_keys_this_run", None)
    if registered is None:
        st.session_state.pop(_DRAWN, None)
        return
    st.session_state[_DRAWN] = {k for k in st.session_state.get(_KEPT, ()) if k in registered}


def remembered_uploads(key: str, uploads: list | None) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of the current uploads, or of the last ones when the uploader comes
    back empty after the page was left (another page, an early stop, a reload: Streamlit
    cannot refill an uploader, so it stays empty on every later run); a button forgets
    them. Removing the files in the uploader itself (it held them in the run just before)
    forgets them too."""
    store = f"_lexlens_uploads_{key}"
    seen = f"{store}_run"
    run = st.session_state.get(_RUN, 0)
    held_just_before = st.session_state.get(seen) == (run - 1, True)
    st.session_state[seen] = (run, bool(uploads))
    if uploads:
        st.session_state[store] = [(f.name, f.getvalue()) for f in uploads]
    elif held_just_before and run > 0:  # the user emptied the uploader on this page
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


# ----------------------------------------------------------- runs: reload, bookmark, jobs
#
# A page keeps its inputs (and, for long work, its result) as a run in the workspace
# (:mod:`lexlens.app.runtime.runs`) and puts the run's id in the URL (``?run=<id>``). Opening that
# URL later — a reload, a bookmark, a link — gives the inputs back to the widgets and the
# uploads back to the uploaders, and shows the stored result. A result is shown only under
# the inputs it was computed from.

_RESTORED = "_lexlens_restored_run"
_RUNS = "_lexlens_runs"  # run id → Run, read once per session


def inputs_key(page: str, inputs: dict, uploads: dict[str, list[tuple[str, bytes]]]) -> str:
    """The hash of a page's inputs and uploads: which stored result fits which inputs."""

    parts: list[bytes | str] = [page, json.dumps(state_of(inputs), sort_keys=True)]
    for key in sorted(uploads):
        for name, data in uploads[key]:
            parts += [key, name, data]
    return content_key(*parts)


_SESSION = "_lexlens_browser_session"


def browser_session() -> str:
    """This browser session's id, kept in the URL (``?session=…``) so that after a reload
    every page finds its last run again; a new one for a new tab."""

    sid = st.session_state.get(_SESSION)
    if sid is None:
        given = st.query_params.get("session") or ""
        sid = given if re.fullmatch(r"[0-9a-f]{16}", given) else secrets.token_hex(8)
        st.session_state[_SESSION] = sid
    if st.query_params.get("session") != sid:
        st.query_params["session"] = sid
    return sid


def url_run_id() -> str | None:
    """The run id the page's URL carries, if any."""
    value = st.query_params.get("run")
    return value or None


def _run(run_id: str):

    cache = st.session_state.setdefault(_RUNS, {})
    if run_id not in cache:
        cache[run_id] = runs.load(run_id)
    return cache[run_id]


_PAGE_RUNS = "_lexlens_page_runs"  # page (or page:mode) → its last run in this session
_MODES = "_lexlens_page_modes"  # page → (its mode widget's key, the mode of a run without it)
_LAST_MODE = "_lexlens_last_mode"  # page → the mode its previous run showed


def page_modes(page: str, key: str, default: str) -> None:
    """Declare that ``page`` has modes, chosen by the kept widget ``key`` (a run whose inputs
    do not name it is of mode ``default``): each mode keeps its own run — inputs and result —
    so a switch to another mode and back shows the mode's result again, while a link to a run
    shows the run in its own mode (call before :func:`restore_inputs`)."""
    st.session_state.setdefault(_MODES, {})[page] = (key, default)


def _mode(page: str) -> str | None:
    """The mode ``page`` shows now (``None``: the page has no modes)."""
    declared = st.session_state.get(_MODES, {}).get(page)
    if declared is None:
        return None
    key, default = declared
    return str(st.session_state.get(key, default))


def _mode_of(page: str, run) -> str | None:
    """The mode of ``page`` that ``run`` was made in (``None``: the page has no modes)."""
    declared = st.session_state.get(_MODES, {}).get(page)
    return None if declared is None else str(run.inputs.get(declared[0], declared[1]))


def _slot(page: str, mode: str | None) -> str:
    return page if mode is None else f"{page}:{mode}"


def _shown_mode(page: str, run) -> str | None:
    """The mode ``page`` shows with the URL's ``run`` (one of its own): the mode the user
    just switched to, else the run's own (a link or a reload chooses the mode)."""
    mode = _mode(page)
    if mode is None:
        return None
    last = st.session_state.setdefault(_LAST_MODE, {})
    switched = page in last and last[page] != mode
    theirs = _mode_of(page, run) if run is not None else mode
    if theirs != mode and not switched:
        st.session_state[st.session_state[_MODES][page][0]] = mode = theirs
    last[page] = mode
    return mode


def fresh_mode(page: str, mode: str) -> None:
    """Open ``mode`` of ``page`` without a run, for inputs set from elsewhere (a link from
    another page): its last run is not brought back over them."""
    st.session_state.get(_PAGE_RUNS, {}).pop(_slot(page, mode), None)
    st.session_state.setdefault("_lexlens_looked_up", set()).add(_slot(page, mode))


def url_run(page: str):
    """The run the URL names, when it is one of ``page``'s (a bad id: an error, dropped).
    Back on a page whose URL names no run of its own, the page's last run of this session
    returns to the URL; on a page with modes (:func:`page_modes`), the last run of the mode
    it shows."""
    run_id = url_run_id()
    named = None
    if run_id is not None:
        try:
            named = _run(run_id)
        except LexlensError as exc:
            st.error(str(exc))
            del st.query_params["run"]
            run_id = None
    mine = named if named is not None and named.page == page else None
    mode = _shown_mode(page, mine)
    slot = _slot(page, mode)
    if mine is not None and _mode_of(page, mine) == mode:
        st.session_state.setdefault(_PAGE_RUNS, {})[slot] = mine.id
        note_open(slot, mine.id)
        return mine
    # No run in the URL, another page's, or another mode's: this page's (mode's) last run in
    # this browser session (remembered, or found by the session id the URL carries after a
    # reload).
    own = st.session_state.get(_PAGE_RUNS, {}).get(slot)
    looked = st.session_state.setdefault("_lexlens_looked_up", set())
    if own is None and slot not in looked:  # once a session: the stored runs are read
        looked.add(slot)
        latest = runs.latest_run(page, browser_session(), lambda r: _mode_of(page, r) == mode)
        own = latest.id if latest is not None else None
    try:
        run = None if own is None else _run(own)
    except LexlensError:  # deleted meanwhile (History)
        run = None
    if run is None:
        if run_id is not None:
            del st.query_params["run"]
        return None
    st.session_state.setdefault(_PAGE_RUNS, {})[slot] = run.id
    st.query_params["run"] = run.id
    note_open(slot, run.id)
    return run


def note_open(slot: str, run_id: str) -> None:
    """Tell the run store this session has ``run_id`` open in ``slot`` (a page, or a page's
    section): eviction spares it."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx  # streamlit only inside the app

    ctx = get_script_run_ctx()
    if ctx is not None:
        runs.mark_open(ctx.session_id, slot, run_id)


def restore_inputs(page: str) -> None:
    """Once per session and run: the URL's run gives its inputs back to this page's widgets
    and its uploads back to the uploaders (call before the page draws its widgets)."""

    run = url_run(page)
    if run is None or st.session_state.get(_RESTORED) == run.id:
        return
    values = st.session_state.setdefault(_VALUES, {})
    for key, value in run.inputs.items():
        st.session_state[key] = values[key] = value_of(value)
    by_key: dict[str, list[tuple[str, bytes]]] = {}
    for name in run.uploads:
        key, _, file_name = name.partition("/")
        by_key.setdefault(key, []).append((file_name, run.upload(name)))
    for key, files in by_key.items():
        st.session_state[f"_lexlens_uploads_{key}"] = files
    st.session_state[_RESTORED] = run.id


def _new_run(page, summary, inputs, uploads, status: str, subject: str = ""):

    flat = [(f"{key}/{name}", data) for key, files in uploads.items() for name, data in files]
    run = runs.create(
        page,
        summary,
        {k: state_of(v) for k, v in inputs.items()},
        flat,
        inputs_key(page, inputs, uploads),
        browser_session(),
        status,
        subject,
    )
    st.session_state.setdefault(_RUNS, {})[run.id] = run
    st.session_state[_RESTORED] = run.id  # its inputs are the widgets' already
    slot = _slot(page, _mode(page))
    st.session_state.setdefault(_PAGE_RUNS, {})[slot] = run.id
    st.query_params["run"] = run.id
    note_open(slot, run.id)
    return run


def record_inputs(
    page: str,
    summary: str,
    inputs: dict,
    uploads: dict[str, list[tuple[str, bytes]]] | None = None,
    subject: tuple[str, ...] | None = None,
) -> None:
    """Keep the inputs of a page whose result is quick to recompute, so its URL reopens it
    (nothing is written when the URL's run holds these inputs already). ``subject``: the
    keys of the inputs that make a new run (with the uploads); while only the others change
    (sliders, toggles: how the result is shown), this session's run is updated in place, so
    a dozen slider drags are one run in History. ``None``: every input makes a new run."""

    uploads = uploads or {}
    key = inputs_key(page, inputs, uploads)
    current = url_run(page)
    if current is not None and current.key == key:
        return
    chosen = inputs if subject is None else {k: inputs.get(k) for k in subject}
    same = inputs_key(page, chosen, uploads)
    try:
        if _follows(current, same):
            runs.update(current, summary, {k: state_of(v) for k, v in inputs.items()}, key)
            st.session_state[_RESTORED] = current.id  # its inputs are the widgets' already
            return
        run = _new_run(page, summary, inputs, uploads, "done", same)
        runs.enforce_budget(keep=run.id)
    except LexlensError as exc:  # a full disk: the page works on, unbookmarked
        st.caption(f"This state could not be kept for a reload: {exc}")


def _follows(run, subject: str) -> bool:
    """Whether a quick page's ``run`` takes new display inputs in place: one of the same
    subject made by this browser session (a link opened from elsewhere is never rewritten)."""
    mine = run is not None and run.session == browser_session() and run.subject == subject
    return mine and run.status == "done" and not (run.folder / "result.json").is_file()


def keep_for_reload(
    page: str,
    prefix: str,
    summary: str,
    uploads: dict[str, list[tuple[str, bytes]]] | None = None,
    subject: tuple[str, ...] | None = None,
) -> None:
    """:func:`record_inputs` of every kept widget whose key starts with ``prefix`` (a quick
    page: its result is recomputed from them after a reload); ``subject``: the keys whose
    change makes a new run (the rest update the run)."""
    keys = sorted(k for k in st.session_state.get(_KEPT, ()) if k.startswith(prefix))
    record_inputs(page, summary, {k: st.session_state.get(k) for k in keys}, uploads, subject)


def start_job(
    page: str,
    summary: str,
    inputs: dict,
    uploads: dict[str, list[tuple[str, bytes]]],
    work: Callable,
):
    """Run ``work(progress)`` as a job that outlives this page run; its run is in the URL.
    The page then runs again, so that the sidebar (drawn before the page) lists the job."""

    manager = job_manager()  # made first: its start marks what a stopped server left running
    run = _new_run(page, summary, inputs, uploads, "running")
    manager.submit(run, work)
    st.rerun()


def job_outcome(page: str, kind: type, inputs: dict, uploads=None):
    """What the URL's run holds for the current inputs: ``(result, job, state)`` with state
    ``none`` (no run of this page), ``other`` (the run is for other inputs), ``queued``,
    ``running``, ``done``, ``failed``, ``cancelled`` or ``lost`` (the server stopped while
    it ran)."""
    run = url_run(page)
    if run is None:
        return None, None, "none"
    if run.key != inputs_key(page, inputs, uploads or {}):
        return None, job_manager().get(run.id), "other"
    return run_outcome(run, kind)


def show_job_state(job, state: str, doing: str, what: str) -> bool:
    """A page's job as :func:`job_outcome` reports it: its live progress while queued or
    running (True: the page has nothing else to show yet), else how the last one ended when
    it did not finish (``doing``: "Building", ``what``: "build")."""
    if state in ("queued", "running"):
        st.caption(f"{doing} as a job: switch pages freely, it goes on; the result shows here.")
        show_job(job)
        return True
    if state in ("failed", "cancelled", "lost"):
        message = job.message if job is not None else "the server stopped while it ran"
        run_id = job.id if job is not None else url_run_id()
        left, right = st.columns([6, 1])
        (left.error if state == "failed" else left.info)(f"The last {what} {state}: {message}")
        if run_id and right.button(
            "Dismiss", key=f"dismiss_{run_id}", help="forget this run: its inputs stay in the form"
        ):
            dismiss_run(run_id)
            st.rerun()
    return False


def dismiss_run(run_id: str) -> None:
    """Forget a run that did not finish: off the sidebar's jobs, out of the URL and the
    pages' memory, and deleted from the store (it holds no result; the widgets keep its
    inputs)."""

    job_manager().dismiss(run_id)
    pages = st.session_state.get(_PAGE_RUNS, {})
    for page in [p for p, r in pages.items() if r == run_id]:
        del pages[page]
    st.session_state.get(_RUNS, {}).pop(run_id, None)
    if st.query_params.get("run") == run_id:
        del st.query_params["run"]
    runs.delete(run_id)


def show_job(job) -> None:
    """A job's progress, refreshed every second until it ends (then the page reruns), with a
    Cancel button."""

    @st.fragment(run_every=1.0)
    def live() -> None:
        if job.finished:
            st.rerun(scope="app")
        label = "Queued: waiting for the job before it" if job.status == "queued" else job.message
        st.progress(job.fraction, text=label)
        if st.button("Cancel", key=f"cancel_{job.id}"):
            job_manager().cancel(job.id)
            st.caption("Cancelling: the work stops at its next progress report.")

    live()
