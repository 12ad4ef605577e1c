"""A page rerun and a job thread of the same server may make the first import of a heavy
library at the same moment: it must succeed in both.

transformers resolves its names lazily, and two threads resolving them at once got
``ImportError: cannot import name 'AutoTokenizer' from 'transformers'`` (the Query ⊙
Document page reran while its deletion-curve job ran). The race needs a fresh process (once
transformers is imported the names are resolved), so each attempt is a new Python process in
which a job of the app's real job manager and several page reruns wait at one barrier, then
all reach transformers' tokenizer for the first time through the same code the page and the
job run (``text_words`` of splade-tiny's tokenizer).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.browser import REPO

#: One attempt: the job and the page reruns start together; prints what each ended with.
ATTEMPT = textwrap.dedent(
    """
    import json, sys, threading, time
    from lexlens.analysis.faithfulness.contrib import contrib_faithfulness
    from lexlens.analysis.lexical.word_units import text_words
    from lexlens.app.runtime import jobs, runs
    from lexlens.models import load_encoder

    PAGES = int(sys.argv[1])
    QUERY, DOC = "a small cat sat on the warm mat", "the cat sleeps on a mat by the door"
    encoder = load_encoder("splade-tiny", device="cpu")
    units = encoder.encode_texts([QUERY])[0].units
    fresh = "transformers" not in sys.modules  # nothing imported it yet: the race is open
    start = threading.Barrier(PAGES + 1)

    def work(progress):  # the Query ⊙ Document deletion curve, as its job runs it
        start.wait()
        return contrib_faithfulness(encoder, query=QUERY, doc=DOC, device="cpu")

    page_errors = []

    def rerun():  # the page drawing the words of the query meanwhile
        start.wait()
        try:
            text_words(encoder, QUERY, units)
        except Exception as exc:
            page_errors.append(f"{type(exc).__name__}: {exc}")

    run = runs.create("contrib", "race", {}, [], key="race")
    job = jobs.job_manager().submit(run, work)
    pages = [threading.Thread(target=rerun) for _ in range(PAGES)]
    for page in pages:
        page.start()
    for page in pages:
        page.join()
    deadline = time.monotonic() + 120
    while not job.finished and time.monotonic() < deadline:
        time.sleep(0.05)
    print(json.dumps({"fresh": fresh, "job": [job.status, job.error], "pages": page_errors}))
    """
)


@pytest.mark.slow
def test_traceback_a_page_rerun_and_a_job_importing_transformers_at_once(tmp_path):
    env = dict(
        os.environ,
        LEXLENS_HOME=str(tmp_path),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    for attempt in range(3):  # before the fix, 4 of 4 such attempts failed
        done = subprocess.run(
            [sys.executable, "-c", ATTEMPT, "3"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen["fresh"], "transformers was imported before the job and the pages started"
        assert seen["pages"] == [], (attempt, seen)
        assert seen["job"] == ["done", ""], (attempt, seen)
