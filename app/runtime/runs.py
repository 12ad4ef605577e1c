"""Runs kept in the workspace: a page's inputs, uploads and result, so a reload, a bookmark
or a link opened later shows the same state.

A run lives in ``LEXLENS_HOME/runs/<id>/``: ``run.json`` (page, a one-line summary, the
inputs, dates, status), ``uploads/`` (the files the inputs name) and ``result.json`` (the
result's full state, :meth:`~lexlens.analysis.core.results.Record.to_state`: data, never
code). Every file is written whole or not at all. Run ids are random (16 hex digits) and
checked before any path is built from them. Stored runs have a size budget
(``LEXLENS_RUNS_BUDGET_MB``, default 500 MB): when it is exceeded, the oldest finished runs
are removed and the page says so — never one that runs, one a page has open, or a page's
newest run. A run a stopped server left ``running`` is marked failed at the first page view
after a server starts (:func:`mark_interrupted`, once per process). A server is known by its
process id and the process's start (:func:`process_start`: this boot and the start time the
kernel gives), so a later process that got the same id is not taken for it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexlens.analysis.collections.workspace import workspace
from lexlens.analysis.core.outputs import json_bytes, process_alive, write_files
from lexlens.analysis.core.results import Record, StateError, value_of
from lexlens.models.base import InputError

_ID = re.compile(r"^[0-9a-f]{16}$")
DEFAULT_BUDGET_MB = 500
MB = 1_000_000  # one unit everywhere: a megabyte is 10^6 bytes
FINISHED = ("done", "failed", "cancelled")
#: The app's pages: a run belongs to one of them.
_PAGES = Path(__file__).resolve().parents[1] / "app_pages"


def runs_dir() -> Path:
    """Where runs are kept (``LEXLENS_HOME/runs``)."""
    return workspace() / "runs"


def budget_bytes() -> int:
    """The size budget of all stored runs in bytes: ``LEXLENS_RUNS_BUDGET_MB`` megabytes
    (10^6 bytes, the unit shown everywhere), default 500; anything but a positive finite
    number is refused in one line."""
    raw = os.environ.get("LEXLENS_RUNS_BUDGET_MB", "").strip()
    if not raw:
        return DEFAULT_BUDGET_MB * MB
    try:
        mb = float(raw)
    except ValueError:
        mb = math.nan
    if not (math.isfinite(mb) and mb > 0):
        raise InputError(
            f"LEXLENS_RUNS_BUDGET_MB={raw[:40]!r}: give a positive number of megabytes "
            f"(default {DEFAULT_BUDGET_MB})"
        )
    return max(1, int(mb * MB))


def check_id(run_id: object) -> str:
    """A run id as the URL carries it, or a clear error (never a path outside the store)."""
    if not isinstance(run_id, str) or not _ID.match(run_id):
        raise InputError(f"{str(run_id)[:40]!r} is not a run id (16 hex digits)")
    return run_id


@dataclass
class Run:
    """One stored run: what page and inputs it holds, and its state."""

    id: str
    page: str
    summary: str
    inputs: dict
    created: float
    updated: float
    status: str = "done"  # running | done | failed | cancelled
    message: str = ""
    uploads: list[str] = field(default_factory=list)  # file names under uploads/
    key: str = ""  # hash of page + inputs + uploads: which result fits which inputs
    session: str = ""  # the browser session that made it (its id travels in the URL)
    server: int = 0  # the process id of the server that made it
    #: which process that id was: :func:`process_start` of it ("" when the system does not say)
    server_start: str = ""
    #: hash of the inputs that make a new run (a quick page's text, image, encoder); its
    #: display inputs (sliders, toggles) change in place: :func:`update`
    subject: str = ""
    #: where a job's analysis ran: the devices of the encoders it loaded or was given
    #: ("cpu", "cuda"; several joined by ", "), "" when none or not a job
    device: str = ""

    @property
    def folder(self) -> Path:
        return runs_dir() / self.id

    def holds(self) -> str:
        """What the run keeps, in words."""
        parts = ["inputs"]
        if self.uploads:
            parts.append(f"{len(self.uploads)} upload(s)")
        if (self.folder / "result.json").is_file():
            parts.append("result")
        return ", ".join(parts)

    def upload(self, name: str) -> bytes:
        """The bytes of one uploaded file of this run."""
        if name not in self.uploads:
            raise InputError(f"run {self.id} has no upload {name!r}")
        return (self.folder / "uploads" / f"{self.uploads.index(name)}.bin").read_bytes()

    def result(self, kind: type[Record]) -> Record | None:
        """The stored result, rebuilt as ``kind`` (``None`` when there is none yet)."""
        path = self.folder / "result.json"
        if not path.is_file():
            return None
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            return kind.from_state(state)
        except (OSError, ValueError, StateError) as exc:
            raise InputError(f"run {self.id}: its stored result cannot be read ({exc})") from None

    def _record(self) -> dict:
        return {
            "id": self.id,
            "page": self.page,
            "summary": self.summary,
            "inputs": self.inputs,
            "created": self.created,
            "updated": self.updated,
            "status": self.status,
            "message": self.message,
            "uploads": self.uploads,
            "key": self.key,
            "session": self.session,
            "server": self.server,
            "server_start": self.server_start,
            "subject": self.subject,
            "device": self.device,
        }

    def save(self, touch: bool = True) -> None:
        """Write run.json (whole or not at all); ``touch``: dated now."""
        if touch:
            self.updated = time.time()
        write_files(self.folder, {"run.json": json_bytes(self._record())})


def create(
    page: str,
    summary: str,
    inputs: dict,
    uploads: list[tuple[str, bytes]],
    key: str,
    session: str = "",
    status: str = "running",
    subject: str = "",
) -> Run:
    """A new run with its inputs and uploads written: ``running`` (a job's, until
    :func:`finish`) or ``done`` (a quick page's inputs, nothing more to store)."""
    now = time.time()
    run = Run(
        secrets.token_hex(8),
        page,
        summary,
        inputs,
        now,
        now,
        status,
        key=key,
        session=session,
        server=os.getpid(),
        server_start=process_start(os.getpid()),
        subject=subject,
    )
    if uploads:
        write_files(
            run.folder / "uploads", {f"{i}.bin": data for i, (_, data) in enumerate(uploads)}
        )
        run.uploads = [name for name, _ in uploads]
    run.save()
    return run


def update(run: Run, summary: str, inputs: dict, key: str) -> None:
    """A quick page's run follows its display inputs: the same run, its inputs, summary and
    key rewritten (its uploads and subject are the same by construction)."""
    run.summary, run.inputs, run.key = summary, inputs, key
    run.save()


def finish(run: Run, result: Record | None, status: str = "done", message: str = "") -> list[str]:
    """Store the run's end and ``result`` as one set (run.json never says it ended without
    the result beside it); returns the ids of runs removed to stay in budget."""
    run.status, run.message, run.updated = status, message, time.time()
    files = {"run.json": json_bytes(run._record())}
    if result is not None:
        files["result.json"] = json_bytes(result.to_state())
    write_files(run.folder, files)
    return enforce_budget(keep=run.id)


def load(run_id: str) -> Run:
    """The stored run ``run_id`` (checked: each field of its run.json of the right type),
    or a clear error; :func:`list_runs` leaves such a run out, so one bad run.json never
    breaks a page."""
    folder = runs_dir() / check_id(run_id)
    try:
        record = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        run = Run(**record)
    except FileNotFoundError:
        raise InputError(
            f"run {run_id} is not stored here (deleted, or from another workspace)"
        ) from None
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(f"run {run_id} cannot be read ({exc})") from None
    wrong = _wrong_field(run, run_id)
    if wrong:
        shown = repr(getattr(run, wrong))[:40]
        raise InputError(f"run {run_id} cannot be read (its {wrong} is {shown})")
    return run


#: The latest date a page can show (Python's datetime ends with the year 9999).
_LAST_TIME = 253_402_300_799.0


def _wrong_field(run: Run, run_id: str) -> str:
    """The first field of a loaded run that a page could not use ("" when none)."""

    def moment(v: object) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= _LAST_TIME

    fits = {
        "id": lambda v: v == run_id,  # a copied run.json names its own folder, no other
        "page": lambda v: (
            isinstance(v, str) and v.isidentifier() and (_PAGES / f"{v}.py").is_file()
        ),
        "inputs": lambda v: isinstance(v, dict),
        "created": moment,
        "updated": moment,
        "status": lambda v: v in ("running", *FINISHED),
        "uploads": lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v),
        "server": lambda v: isinstance(v, int) and not isinstance(v, bool),
    }
    for name in Run.__dataclass_fields__:
        fit = fits.get(name, lambda v: isinstance(v, str))
        if not fit(getattr(run, name)):
            return name
    return ""


def latest_run(page: str, session: str, fits: Callable[[Run], bool] | None = None) -> Run | None:
    """The newest run of ``page`` made in the browser session ``session`` (and that ``fits``,
    when given: a page mode's), if any."""
    mine = [
        r
        for r in list_runs()
        if r.session == session and r.page == page and (fits is None or fits(r))
    ]
    return mine[0] if mine else None


def list_runs() -> list[Run]:
    """Every stored run that can be read, newest first."""
    root = runs_dir()
    out = []
    if root.is_dir():
        for entry in root.iterdir():
            if _ID.match(entry.name):
                try:
                    out.append(load(entry.name))
                except InputError:
                    continue
    return sorted(out, key=lambda r: -r.updated)


def delete(run_id: str) -> None:
    """Remove one run and everything it holds."""
    shutil.rmtree(runs_dir() / check_id(run_id), ignore_errors=True)


def sizes() -> dict[str, int]:
    """Bytes each entry of the store takes (a run's folder by its id, or a stray file), in
    one walk: their sum is what the budget counts. A file removed meanwhile counts 0."""
    root = runs_dir()
    if not root.is_dir():
        return {}
    return {entry.name: _bytes(entry) for entry in root.iterdir()}


def _bytes(path: Path) -> int:
    total = 0
    for item in [path] if not path.is_dir() else path.rglob("*"):
        with contextlib.suppress(OSError):
            if item.is_file():
                total += item.stat().st_size
    return total


def enforce_budget(keep: str | None = None) -> list[str]:
    """Remove the oldest finished runs until the store fits its budget; returns their ids.

    Never removed: ``keep``, a run that is running, a run a live browser session has open
    (:func:`mark_open`), and the newest run of each page. With an unusable budget setting
    nothing is removed (the History page says why)."""
    try:
        budget = budget_bytes()
    except InputError:
        return []
    taken = sizes()
    total = sum(taken.values())
    if total <= budget:
        return []
    stored = list_runs()
    newest = {}
    for run in stored:  # newest first
        newest.setdefault(run.page, run.id)
    spared = {keep, *newest.values(), *open_ids()}
    removed = []
    for run in sorted(stored, key=lambda r: r.updated):
        if total <= budget:
            break
        if run.id in spared or run.status not in FINISHED:
            continue
        delete(run.id)
        removed.append(run.id)
        total -= taken.get(run.id, 0)
    return removed


#: When this process started keeping runs: a run it made itself is dated after.
_STARTED = time.time()
_interrupted_marked = False
_MARK_LOCK = threading.Lock()


def mark_interrupted() -> list[str]:
    """Runs left ``running`` by a server that stopped: marked failed, so they count toward
    the budget like any finished run. Once per process (its job manager calls it at the first
    page view); a later call marks nothing, so a job manager made again (Streamlit's "Clear
    cache") never fails the runs this server still works on. Spared too: a run this process
    made, and one of another live server on the same workspace."""
    global _interrupted_marked
    with _MARK_LOCK:
        if _interrupted_marked:
            return []
        _interrupted_marked = True
    marked = []
    for run in list_runs():
        if run.status != "running" or _own(run) or _other_server(run):
            continue
        run.status, run.message = "failed", "the server stopped while it ran"
        try:
            run.save(touch=False)  # it ended when its server did, not now
        except InputError:
            continue
        marked.append(run.id)
    return marked


def _own(run: Run) -> bool:
    """Whether this process made ``run`` (not an earlier server that had the same pid)."""
    return run.server == os.getpid() and run.created >= _STARTED


def _other_server(run: Run) -> bool:
    """Whether the server that made ``run`` is another live process (a second server on the
    same workspace): its process id alive and, where the run recorded it, started when that
    server did (a process that got the id later is another one)."""
    pid = run.server
    if pid == os.getpid() or not process_alive(pid):
        return False
    now = process_start(pid)
    return not (run.server_start and now) or now == run.server_start


def process_start(pid: int) -> str:
    """What tells process ``pid`` from a later one with the same id: this boot's id and the
    process's start time in clock ticks after boot (``/proc/sys/kernel/random/boot_id`` and
    field 22 of ``/proc/PID/stat``, proc(5)); "" where the system does not say."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
        # The command name (field 2) is in parentheses and may hold spaces and ")".
        return f"{boot}:{stat.rsplit(')', 1)[1].split()[19]}"
    except (OSError, ValueError, IndexError, OverflowError):
        return ""


# Runs that browser sessions have open: session id → {page: run id}. Eviction spares them
# while their session lives (Streamlit's runtime says which sessions are live).
_OPEN: dict[str, dict[str, str]] = {}
_OPEN_LOCK = threading.Lock()


def mark_open(session: str, page: str, run_id: str) -> None:
    """Note that the (Streamlit) session ``session`` shows ``run_id`` on ``page``."""
    with _OPEN_LOCK:
        _OPEN.setdefault(session, {})[page] = run_id


def open_ids() -> set[str]:
    """The runs live sessions have open (sessions that ended are forgotten here)."""
    try:
        from streamlit import runtime  # streamlit only inside the app

        alive = runtime.get_instance().is_active_session if runtime.exists() else None
    except Exception:  # noqa: BLE001 - outside a server every noted session counts
        alive = None
    with _OPEN_LOCK:
        if alive is not None:
            for session in [s for s in _OPEN if not alive(s)]:
                del _OPEN[session]
        return {run_id for pages in _OPEN.values() for run_id in pages.values()}


def describe_inputs(inputs: dict[str, Any]) -> str:
    """A short line of a run's inputs, for lists: each value as the page had it (a stored
    tuple reads ``(0.5, 1.0)``, not its stored form)."""

    parts = []
    for key, stored in inputs.items():
        try:
            value = value_of(stored)
        except (StateError, TypeError, ValueError):  # a hand-edited run.json: as stored
            value = stored
        text = value if isinstance(value, str) else _readable(value)
        parts.append(f"{key.split('_', 1)[-1]}={text[:40]}{'…' if len(text) > 40 else ''}")
    return ", ".join(parts)


def _readable(value: Any) -> str:
    """A value as Python writes it, but a path as its text and a number's float as given."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        inner = ", ".join(_readable(v) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, list):
        return "[" + ", ".join(_readable(v) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(_readable(v) for v in sorted(value, key=repr)) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_readable(k)}: {_readable(v)}" for k, v in value.items()) + "}"
    return repr(value)
