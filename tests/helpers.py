"""Plain helpers shared by the test files (fixtures are in conftest.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
MAIN = str(ROOT / "app" / "main.py")

#: How far a float32 model output may move, as a share of the sum of |terms| that made it:
#: 1e-5 ≈ 84 float32 steps (2^-23 ≈ 1.2e-7). See :func:`model_tolerance`.
FLOAT32_REL = 1e-5


def model_tolerance(terms, axis=None):
    """The absolute tolerance of a float32 model output (a score, a weight, a gap, an IG
    attribution, a distance): ``FLOAT32_REL × Σ|terms|`` plus float32's underflow step
    (2^-149) per term, summed over ``axis`` (all of ``terms`` by default).

    The rule: float32 keeps 24 bits, a relative step of 2^-23 ≈ 1.2e-7. A sum of n terms
    rounds at each addition by at most half a step of the partial sum, so it may be off by
    up to ~n steps of Σ|terms| (Higham, *Accuracy and Stability of Numerical Algorithms*,
    §4.2) — of the terms, not of the result, which cancellation can make small. The order
    of the sum is not the test's: the BLAS kernel (OpenBLAS picks SkylakeX, Haswell or Zen
    code by CPU), the thread count and the batch a text is encoded in reorder it, and a
    model chains many such sums. ``FLOAT32_REL = 1e-5`` allows ~84 steps (the worst case of
    a sum of ~170 terms). Measured on this suite at one and at two threads, a text alone
    against in a batch: scores within 3.5e-7 of Σ|terms|, weights within 1.6e-6 of their
    vector's largest; a wrong edit, a wrong row or a linear shortcut moved a value by 5,000
    to 70,000 tolerances. The floor is the absolute error float32 adds below its smallest
    normal number (IEEE 754 gradual underflow): a sum of zeros must be exactly 0.

    ``terms`` are the products (or the values) whose sum is the output: ``q_j · d_j`` for a
    score, both items' products for a gap, those of ``a² − 2ab + b²`` for a squared distance
    (``axis=()``: each entry already the Σ|terms| of one output, as a chain of sums). For an
    encoder's own weight, the end of sums inside the model the test does not see, pass the
    largest weight of its vector: every weight comes out of the same last-layer sums, so
    their roundings share that scale (relative to a weight near 0 they do not).
    """
    magnitude = np.abs(np.asarray(terms, dtype=np.float64))
    axes = range(magnitude.ndim) if axis is None else np.atleast_1d(axis).astype(int)
    count = int(np.prod([magnitude.shape[a] for a in axes]))
    return FLOAT32_REL * magnitude.sum(axis=axis) + count * float(
        np.finfo(np.float32).smallest_subnormal
    )


def close_to(expected, *, terms):
    """``expected`` as ``pytest.approx`` within :func:`model_tolerance` of ``terms``: the one
    tolerance of a float32 model output."""
    return pytest.approx(expected, rel=0, abs=float(model_tolerance(terms)))


def skimage_path(name: str) -> Path:
    """A real photo shipped in the scikit-image wheel (e.g. ``chelsea.png``)."""
    skimage = pytest.importorskip("skimage")
    path = Path(skimage.__file__).parent / "data" / name
    if not path.exists():
        pytest.skip(f"scikit-image does not ship {name}")
    return path


def app_page(page: str | None = None, timeout: float = 240):
    """The app run headless (Streamlit's AppTest), on ``page`` (``"app_pages/search.py"``)
    or the default page."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(MAIN, default_timeout=timeout)
    if page:
        at.switch_page(page)
    return at.run()


def reopened(at, page: str):
    """A new session on the URL ``at`` shows now (a reload, a bookmark, a link opened
    later), on ``page``: run, without an exception or an error box."""
    run_id = at.query_params["run"]
    again = app_page()
    again.query_params["run"] = run_id[0] if isinstance(run_id, list) else run_id
    again.switch_page(page)
    again.run()
    assert not again.exception and not again.error
    return again


def one_line_error(run, *needles: str) -> str:
    """A CLI run that failed as a user should see it: exit 2, one stderr line (no traceback)
    holding every needle; returns the line."""
    assert run.returncode == 2, run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def formula_cells(cells) -> list[str]:
    """The CSV cells a spreadsheet would run as a formula (OWASP's CSV injection: text
    starting with = + - @, a tab or a carriage return), numbers left aside."""

    def number(cell: str) -> bool:
        try:
            float(cell)
        except ValueError:
            return False
        return True

    return [c for c in cells if c.startswith(("=", "+", "-", "@", "\t", "\r")) and not number(c)]


def refused(call, *needles: str) -> str:
    """``call()`` refused as the API refuses a wrong argument: one :class:`LexlensError` line
    (never a traceback of another kind) holding every needle; returns the line."""
    from lexlens.models.base import LexlensError

    with pytest.raises(LexlensError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, message
    return message


def argument_cases(table: list[tuple]):
    """A table of wrong-argument cases ``(argument, call, needle)`` as pytest parameters, each
    row's id its argument and position."""
    return pytest.mark.parametrize(
        ("argument", "call", "needle"), table, ids=[f"{a}-{i}" for i, (a, _, _) in enumerate(table)]
    )


def click_and_wait(at, click, timeout: float = 600.0) -> None:
    """``click()`` (a button, a form submit), run the page, and when that started a job, let
    it finish and run the page again (as its live progress would)."""
    import time

    from lexlens.app.runtime.jobs import job_manager

    before = set(job_manager().jobs)
    click()
    at.run()
    started = [j for i, j in job_manager().jobs.items() if i not in before]
    if not started:
        return
    deadline = time.monotonic() + timeout
    while not all(j.finished for j in started):
        if time.monotonic() > deadline:
            raise AssertionError("a job did not finish in time")
        time.sleep(0.1)
    at.run()


def page_result(at):
    """The result of the run the page's URL names (a job's result, or the stored one)."""
    from lexlens.app.runtime import runs
    from lexlens.app.runtime.jobs import job_manager

    run_id = at.query_params["run"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    job = job_manager().get(run_id)
    if job is not None:
        return job.result
    from lexlens.analysis.core.results import Result

    return runs.load(run_id).result(Result)
