"""An upload given back by a reload (a new session on the run's URL) stays in use on every
later run of the page: Streamlit cannot refill a file uploader, so it stays empty, and only
emptying it on the page (it held a file in the run before) forgets the upload."""

from __future__ import annotations

from tests.helpers import app_page, reopened


def _shown(at) -> bool:
    return any("mine.txt" in s.value for s in at.subheader)


def test_data_lost_an_upload_given_back_by_a_reload_survives_later_runs(monkeypatch, tmp_path):
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    page = "app_pages/deviation.py"
    at = app_page(page)
    at.radio(key="dev_source").set_value("Upload a caption file").run()
    at.file_uploader(key="dev_upload").upload("mine.txt", b"a dog\na red bus\n", "text/plain")
    at.run()
    assert not at.exception and not at.error and _shown(at)
    again = reopened(at, page)
    assert _shown(again)
    for _ in range(3):  # every later run has the uploader empty, as after any reload
        again.run()
        assert not again.exception and not again.error
        assert _shown(again), [s.value for s in again.subheader]
        assert any("Using your earlier upload: mine.txt" in c.value for c in again.caption)
    # Emptying the uploader on the page (it held a file in the run before) still forgets it.
    again.file_uploader(key="dev_upload").upload("other.txt", b"a cat\n", "text/plain")
    again.run()
    again.file_uploader(key="dev_upload").clear().run()
    assert not any("Using your earlier upload" in c.value for c in again.caption)
