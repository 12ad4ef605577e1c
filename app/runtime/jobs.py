"""Long work as jobs that outlive a page run.

A job runs one analysis function on a worker thread of the server process, one job at a
time (the others wait in a queue: two CPU cores would only slow two heavy jobs down). It
reports through the analysis's own :data:`~lexlens.analysis.core.results.Progress`
callback, which records the fraction and message and raises
:class:`~lexlens.analysis.core.results.Cancelled` once the user asked to cancel (an
analysis is stopped at its next progress report). The job's run (:mod:`lexlens.app.runtime.runs`)
keeps its inputs from the start and its result when it ends, so a page switch, a reload or
a server restart loses nothing; pages only read the jobs (never the other way round), and
Streamlit's session state is never touched from the worker.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from lexlens.analysis.core.devices import devices_used
from lexlens.analysis.core.results import Cancelled, Progress, Record
from lexlens.app.runtime import runs
from lexlens.models.base import LexlensError

_LOG = logging.getLogger(__name__)


@dataclass
class Job:
    """One piece of long work: its run, progress, state and (when done) result."""

    run: runs.Run
    work: Callable[[Progress], Record]
    status: str = "queued"  # queued | running | done | failed | cancelled
    fraction: float = 0.0
    message: str = "waiting for the job before it"
    error: str = ""
    started: float = 0.0
    ended: float = 0.0
    result: Record | None = None
    removed: list[str] = field(default_factory=list)  # runs evicted to stay in budget
    cancel: threading.Event = field(default_factory=threading.Event)
    #: the devices of the encoders the work loaded or was given, filled as it runs
    devices: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.run.id

    @property
    def device(self) -> str:
        """Where the job runs or ran ("cpu", "cuda"; "" until an encoder is loaded)."""
        return ", ".join(self.devices)

    @property
    def finished(self) -> bool:
        return self.status in runs.FINISHED

    def progress(self, fraction: float, message: str) -> None:
        """The analysis's progress callback: record it, or stop when cancelled."""
        if self.cancel.is_set():
            raise Cancelled("cancelled by the user")
        self.fraction = min(max(float(fraction), 0.0), 1.0)
        self.message = message


class JobManager:
    """The server's jobs: a queue and one worker thread (shared by every session)."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self._queue: queue.Queue[Job] = queue.Queue()
        self._lock = threading.Lock()
        self._worker = threading.Thread(target=self._loop, name="lexlens-jobs", daemon=True)
        self._worker.start()
        runs.mark_interrupted()  # what a stopped server left "running" (once per process)

    def submit(self, run: runs.Run, work: Callable[[Progress], Record]) -> Job:
        """Queue ``work`` for ``run`` (its inputs already stored); returns the job."""
        job = Job(run, work)
        with self._lock:
            self.jobs[run.id] = job
        self._queue.put(job)
        return job

    def get(self, run_id: str | None) -> Job | None:
        """The job of a run, if this server ran or runs it."""
        return self.jobs.get(run_id) if run_id else None

    def listed(self) -> list[Job]:
        """Every job of this server, newest first."""
        return sorted(self.jobs.values(), key=lambda j: -j.run.created)

    def dismiss(self, run_id: str) -> None:
        """Take a finished job off the list (its run stays in History)."""
        with self._lock:
            job = self.jobs.get(run_id)
            if job is not None and job.finished:
                del self.jobs[run_id]

    def cancel(self, run_id: str) -> None:
        """Ask a job to stop (a queued one never starts)."""
        job = self.jobs.get(run_id)
        if job is not None and not job.finished:
            job.cancel.set()
            if job.status == "queued":
                job.message = "cancelled before it started"

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            try:
                self._run(job)
            finally:
                self._queue.task_done()

    def _run(self, job: Job) -> None:
        if job.cancel.is_set():
            self._end(job, None, "cancelled", "cancelled before it started")
            return
        job.status, job.started, job.message = "running", time.time(), "starting…"
        try:
            with devices_used() as job.devices:  # the encoders' own devices, as they load
                result = job.work(job.progress)
        except Cancelled:
            self._end(job, None, "cancelled", "cancelled by the user")
        except LexlensError as exc:
            self._end(job, None, "failed", str(exc))
        except Exception as exc:  # noqa: BLE001 - a job must never take the worker down
            _LOG.exception("job %s failed", job.id)
            self._end(job, None, "failed", f"internal error: {type(exc).__name__}: {exc}")
        else:
            job.result, job.fraction = result, 1.0
            self._end(job, result, "done", "done")

    def _end(self, job: Job, result: Record | None, status: str, message: str) -> None:
        job.ended = time.time()
        job.message = message
        if status == "failed":
            job.error = message
        job.run.device = job.device
        try:
            job.removed = runs.finish(job.run, result, status, message)
        except LexlensError as exc:  # a full disk: the result stays in memory for this server
            job.error = job.error or f"the result could not be stored: {exc}"
        job.status = status


_MANAGER: JobManager | None = None
_MANAGER_LOCK = threading.Lock()


def job_manager() -> JobManager:
    """The one job manager of this server process, made at the first page view and kept
    for the process's life: not a Streamlit cached resource, which any client's "Clear
    cache" drops (a second manager would start a second worker beside the first)."""
    global _MANAGER
    with _MANAGER_LOCK:
        if _MANAGER is None:
            _MANAGER = JobManager()
        return _MANAGER


def run_outcome(run, kind: type):
    """What ``run`` holds: ``(result, job, state)`` from its job while this server has it,
    else as stored (``lost``: the server stopped while it ran); a stored result is read once
    a session."""
    job = job_manager().get(run.id)
    if job is not None:
        return job.result, job, job.status
    if run.status == "running":
        return None, None, "lost"
    if run.status != "done":
        return None, None, run.status
    results = st.session_state.setdefault("_lexlens_results", {})
    if run.id not in results:
        try:
            results[run.id] = run.result(kind)
        except LexlensError as exc:
            st.error(str(exc))
            return None, None, "failed"
    return results[run.id], None, "done"


def jobs_sidebar() -> None:
    """The sidebar's list of this server's jobs: status, progress, a link back, Cancel.
    Refreshes itself every two seconds while a job is queued or running."""
    manager = job_manager()
    if not manager.jobs:
        return

    @st.fragment(run_every=2.0 if any(not j.finished for j in manager.jobs.values()) else None)
    def listing() -> None:
        st.sidebar.caption("Jobs (one runs at a time; the others wait)")
        for job in manager.listed()[:6]:
            box = st.sidebar.container(border=True)
            state = {"queued": "queued", "running": f"{job.fraction:.0%}"}.get(
                job.status, job.status
            )
            box.page_link(
                f"app_pages/{job.run.page}.py",
                label=f"{state} · {job.run.page}",
                query_params={"run": job.id},
                help=job.run.summary,
            )
            box.caption(
                job.run.summary + (f" · on {job.device}" if job.device else "")
            )  # the whole name, wrapped, and where it runs
            if not job.finished:
                box.progress(job.fraction, text=job.message[:60])
                if box.button("Cancel", key=f"sidebar_cancel_{job.id}"):
                    manager.cancel(job.id)
                continue
            if job.error:
                box.caption(job.error[:120])
            if box.button("Dismiss", key=f"sidebar_dismiss_{job.id}"):
                manager.dismiss(job.id)
                st.rerun(scope="app")

    listing()
