"""Headless-browser helpers: serve the Streamlit app and drive it with system Chromium.

Chromium is the Debian package at /usr/bin/chromium (`make browser` installs it); Playwright's
own browser download (`playwright install`) is never used. Tests that need a browser call
`require_chromium()`, which skips them with a clear reason when Chromium or Playwright is absent.

The app is served exactly as `make run` serves it (`lexlens app`), with only the port (and, for
the token test, the address) given on the command line: everything else (usage statistics off, headless, no file watcher) must come
from the shipped `app/.streamlit/config.toml`, which is what the offline tests check.
"""

from __future__ import annotations

import ast
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
from urllib.parse import urlparse

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
#: Screenshots and downloads of the browser tests (git-ignored, kept after the run).
OUTPUT = Path(os.environ.get("LEXLENS_TEST_OUTPUT", REPO / ".lexlens-cache" / "test-output"))
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def app_pages() -> list[tuple[str, str, str, str]]:
    """``PAGES`` of app/main.py, read from its source: (file, title, icon, url path)."""
    tree = ast.parse((REPO / "app" / "main.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PAGES":
            return ast.literal_eval(node.value)
    raise AssertionError("app/main.py defines no PAGES list")


def page_urls() -> list[str]:
    """The URL path of every page (``/text``, ``/images``, …)."""
    return [f"/{url}" for _, _, _, url in app_pages()]


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


def healthy(url: str) -> bool:
    """The Streamlit server at ``url`` answers its health check."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def stop(proc: subprocess.Popen) -> None:
    """Terminate a server process (killed if it does not exit within 10 s)."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextlib.contextmanager
def served_app(
    *, host: str = "127.0.0.1", env: dict[str, str] | None = None, timeout: float = 120.0
) -> Iterator[str]:
    """Run `lexlens app` (what `make run` does) on a free port; yield its base URL; always
    stop it. ``host``: the address to listen on; ``env``: extra environment variables."""
    port = free_port()
    url = f"http://{host}:{port}"
    cmd = [sys.executable, "-m", "lexlens.app.cli", "app", "--port", str(port), "--host", host]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **(env or {}))
    fd, log_name = tempfile.mkstemp(prefix="lexlens_streamlit_", suffix=".log")
    log = os.fdopen(fd, "wb")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while not healthy(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                tail = Path(log_name).read_text(errors="replace")[-2000:]
                why = f"exited with {proc.returncode}" if proc.poll() is not None else "timed out"
                raise RuntimeError(f"streamlit {why} before {url} was healthy:\n{tail}")
            time.sleep(0.2)
        yield url
    finally:
        stop(proc)
        log.close()
        Path(log_name).unlink(missing_ok=True)


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless system-Chromium `Browser` (Playwright); closed afterwards."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def chromium_page(width: int = 1280, height: int = 1000) -> Iterator[Any]:
    """A Playwright `Page` in headless system Chromium; the browser is closed afterwards."""
    with chromium() as browser:
        yield browser.new_page(viewport={"width": width, "height": height})


class Watch:
    """Every request a page makes, its console messages, page errors and failed responses."""

    def __init__(self, page: Any) -> None:
        self.requests: list[str] = []
        self.console: list[tuple[str, str, str]] = []  # (type, text, resource url)
        self.page_errors: list[str] = []
        self.failures: list[tuple[int, str]] = []  # (HTTP status or 0 if no answer, url)
        page.on("request", lambda r: self.requests.append(r.url))
        page.on(
            "console",
            lambda m: self.console.append((m.type, m.text, (m.location or {}).get("url", ""))),
        )
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        page.on("response", lambda r: r.status >= 400 and self.failures.append((r.status, r.url)))
        page.on("requestfailed", self._failed)

    def _failed(self, request: Any) -> None:
        """A request that got no answer; one the browser itself aborted because the page moved
        on (a navigation or reload while an image loaded: ``net::ERR_ABORTED``) is not the
        server's failure."""
        if "ERR_ABORTED" not in (request.failure or ""):
            self.failures.append((0, request.url))

    def outside(self) -> list[str]:
        """Requests that leave this machine (anything but localhost, data: and blob: URLs)."""
        out = []
        for url in self.requests:
            parts = urlparse(url)
            if parts.scheme in {"data", "blob", "about"}:
                continue
            if parts.hostname not in LOCAL_HOSTS:
                out.append(url)
        return out

    def errors(self) -> list[str]:
        """Console errors, page errors and failed responses: none is excused."""
        errors = [
            f"{text} ({url})" if url else text
            for kind, text, url in self.console
            if kind == "error"
        ]
        bad = [f"HTTP {s or 'no answer'}: {u}" for s, u in self.failures]
        return errors + [f"page error: {e}" for e in self.page_errors] + bad

    def warnings(self) -> list[str]:
        return [text for kind, text, _ in self.console if kind == "warning"]


def wait_idle(page: Any, timeout: float = 180.0, quiet: float = 0.6) -> None:
    """Wait until the script run is over: Streamlit's own ``data-test-script-state`` reads
    ``notRunning`` (or ``initial`` never becomes ``running``) for ``quiet`` seconds."""
    deadline = time.monotonic() + timeout
    settled_since = None
    state = None
    while time.monotonic() < deadline:
        state = page.evaluate(
            "() => document.querySelector('[data-testid=\"stApp\"]')"
            "?.getAttribute('data-test-script-state') ?? null"
        )
        busy = page.locator('[data-testid="stStatusWidget"]').count() > 0
        if state == "notRunning" and not busy:
            settled_since = settled_since or time.monotonic()
            if time.monotonic() - settled_since >= quiet:
                return
        else:
            settled_since = None
        time.sleep(0.1)
    raise TimeoutError(f"the app was still running after {timeout:.0f} s (state {state!r})")


def exception_boxes(page: Any) -> list[str]:
    """Texts of Streamlit exception boxes (an uncaught error in a page)."""
    boxes = page.locator('[data-testid="stException"]')
    return [boxes.nth(i).inner_text()[:500] for i in range(boxes.count())]


def shot(page: Any, folder: Path, name: str) -> Path:
    """A screenshot of the whole app (Streamlit scrolls inside its own container, so the
    viewport should be tall); returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
