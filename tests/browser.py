"""Headless-browser helpers: serve the Streamlit app and drive it with system Chromium.

Chromium is the Debian package at /usr/bin/chromium (`make browser` installs it); Playwright's
own browser download (`playwright install`) is never used. Tests that need a browser call
`require_chromium()`, which skips them with a clear reason when Chromium or Playwright is absent.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def require_chromium() -> None:
    """Skip the calling test unless system Chromium and the Playwright package are present."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found: run `make browser` (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -e '.[dev]')")


def free_port() -> int:
    """A TCP port that is free on localhost right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def served_app(app: str | Path = "app/main.py", *, timeout: float = 120.0) -> Iterator[str]:
    """Run `streamlit run <app>` headless on a free port; yield its base URL; always stop it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(app),
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", "127.0.0.1",
        "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none",
    ]  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    fd, log_name = tempfile.mkstemp(prefix="lexlens_streamlit_", suffix=".log")
    log = os.fdopen(fd, "wb")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while not _healthy(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                tail = Path(log_name).read_text(errors="replace")[-2000:]
                why = f"exited with {proc.returncode}" if proc.poll() is not None else "timed out"
                raise RuntimeError(f"streamlit {why} before {url} was healthy:\n{tail}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
        Path(log_name).unlink(missing_ok=True)


@contextlib.contextmanager
def chromium_page(width: int = 1280, height: int = 1000) -> Iterator[Any]:
    """A Playwright `Page` in headless system Chromium; the browser is closed afterwards."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            yield page
        finally:
            browser.close()
