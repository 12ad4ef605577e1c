"""Safe to share: the app keeps to this machine unless asked, needs a token when exposed,
reads typed server paths only inside its data roots, and never loses a user's runs.

Each test is named by the kind of failure it guards against (security, data lost,
silent wrong, traceback)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.browser import chromium, served_app, wait_idle
from tests.helpers import app_page, one_line_error

TOKEN = "test-token-7c1f0b"


def listening(port: int) -> list[str]:
    """The local addresses with a socket listening on ``port`` (from /proc/net/tcp{,6})."""
    found = []
    for name in ("tcp", "tcp6"):
        table = Path(f"/proc/net/{name}")
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            if len(address) == 8:
                found.append(socket.inet_ntop(socket.AF_INET, bytes.fromhex(address)[::-1]))
            else:
                words = [bytes.fromhex(address[i : i + 8])[::-1] for i in range(0, 32, 8)]
                found.append(socket.inet_ntop(socket.AF_INET6, b"".join(words)))
    return found


def status(url: str, cookie: str | None = None) -> tuple[int, dict, bytes]:
    """(HTTP status, headers, body) of a GET that does not follow redirects."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.mark.slow
def test_security_app_listens_on_loopback_only_by_default(tmp_path):
    with served_app(env={"LEXLENS_HOME": str(tmp_path)}) as url:
        port = int(url.rsplit(":", 1)[1])
        assert listening(port) == ["127.0.0.1"]
        code, _, _ = status(f"{url}/text")
        assert code == 200  # no token on this machine's own address


@pytest.mark.slow
def test_security_exposed_app_needs_its_token_before_anything_draws(tmp_path):
    """Exposed on a second loopback address: without the token (or with a wrong one) every
    page is one page saying a token is needed — no sidebar, no jobs, no History; with it, the
    app works, and a reload keeps working through the session's cookie."""
    env = {"LEXLENS_HOME": str(tmp_path), "LEXLENS_TOKEN": TOKEN}
    with served_app(host="127.0.0.2", env=env) as url:
        port = int(url.rsplit(":", 1)[1])
        assert listening(port) == ["127.0.0.2"]
        for path in ("/", "/history", "/text?token=wrong", "/_stcore/host-config"):
            code, _, body = status(url + path)
            assert code == 403 and b"A token is needed" in body, path
            assert b"History" not in body and b"Jobs" not in body
        code, headers, _ = status(f"{url}/history?token={TOKEN}&session=ab")
        assert code == 303 and headers["location"] == "/history?session=ab"
        assert "HttpOnly" in headers["set-cookie"] and TOKEN not in headers["set-cookie"]
        with chromium() as browser:
            stranger = browser.new_page()
            stranger.goto(f"{url}/history")
            assert "A token is needed" in stranger.content()
            assert stranger.locator("[data-testid=stSidebar]").count() == 0
            stranger.goto(f"{url}/text?token=not-{TOKEN}")
            assert "A token is needed" in stranger.content()
            page = browser.new_page()
            page.goto(f"{url}/text?token={TOKEN}")
            wait_idle(page)
            assert "token=" not in page.url
            assert page.get_by_role("heading", name="Text").count() == 1
            page.reload()
            wait_idle(page)
            assert page.get_by_role("heading", name="Text").count() == 1
            page.goto(f"{url}/history")
            wait_idle(page)
            assert page.get_by_role("heading", name="History").count() == 1
            # The cookie belongs to that browser session: another one is still refused.
            other = browser.new_context().new_page()
            other.goto(f"{url}/history")
            assert "A token is needed" in other.content()


@pytest.mark.slow
def test_security_app_listening_beyond_this_machine_without_token_serves_nothing(tmp_path):
    """`streamlit run` by hand on another address, no token set: nothing but the health
    check answers."""
    from tests.browser import free_port, healthy, stop

    port = free_port()
    env = dict(os.environ, LEXLENS_HOME=str(tmp_path))
    env.pop("LEXLENS_TOKEN", None)
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(Path("app/main.py").resolve()),
        "--server.address",
        "127.0.0.3",
        "--server.port",
        str(port),
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not healthy(f"http://127.0.0.3:{port}"):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        code, _, body = status(f"http://127.0.0.3:{port}/text")
        assert code == 403 and b"no token is set" in body
    finally:
        stop(proc)


async def _app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})


def gate_answer(
    path: str,
    query: bytes = b"",
    cookie: str = "",
    raw_path: bytes | None = None,
    gate=None,
    host: str | None = "127.0.0.2:8501",
    origin: str | None = None,
    kind: str = "http",
):
    """What the token gate (a new one unless ``gate`` is given) answers a GET (``kind``
    "websocket": a websocket handshake) reaching 127.0.0.2:8501 with these headers:
    ``(status, headers)``, status 200 when it lets the request through to the app."""
    import asyncio

    from lexlens.app.runtime.access import TokenGate

    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b""}

    headers = [(b"cookie", cookie.encode("latin-1"))] if cookie else []
    headers += [(b"host", host.encode("latin-1"))] if host is not None else []
    headers += [(b"origin", origin.encode("latin-1"))] if origin is not None else []
    scope = {
        "type": kind,
        "path": path,
        "query_string": query,
        "server": ("127.0.0.2", 8501),
        "headers": headers,
    }
    if raw_path is not None:
        scope["raw_path"] = raw_path
    asyncio.run((gate or TokenGate(_app))(scope, receive, send))
    start = sent[0]
    if start["type"] == "websocket.close":
        return 403, {}
    return start["status"], {k.decode(): v.decode("latin-1") for k, v in start["headers"]}


def test_security_a_cookie_that_does_not_parse_keeps_the_token_cookie_after_it(monkeypatch):
    """A browser sends every cookie of the host in one header: another app's cookie with a
    space in its value must not make the token cookie after it unreadable (a 403)."""
    from lexlens.app.runtime.access import cookie_name, cookie_value

    monkeypatch.setenv("LEXLENS_TOKEN", TOKEN)
    valid = f"{cookie_name(8501)}={cookie_value(TOKEN)}"
    assert gate_answer("/text", cookie=f"a=b c; {valid}")[0] == 200
    assert gate_answer("/text", cookie=f'theme="dark; {valid}')[0] == 200
    assert gate_answer("/text", cookie="a=b c; lexlens_token_8501=forged")[0] == 403


def test_security_the_token_redirect_stays_on_this_server_and_keeps_the_url(monkeypatch):
    """After a right ``?token=`` the browser is sent on to the same URL without it: never
    to another host (``//evil.example`` is one), with the path as it was sent (an escaped
    ``?`` stays escaped, a non-ASCII path is no server error) and every other parameter,
    blank ones too."""
    monkeypatch.setenv("LEXLENS_TOKEN", TOKEN)
    for path, raw, query, location in (
        ("//evil.example", b"//evil.example", b"", "/evil.example"),
        ("/\\evil.example", b"/\\evil.example", b"", "/evil.example"),
        ("///evil.example/x", b"///evil.example/x", b"", "/evil.example/x"),
        ("/\u20ac", b"/%E2%82%AC", b"", "/%E2%82%AC"),
        ("/\u20ac", None, b"", "/%E2%82%AC"),  # a server that gives no raw path
        ("/a?b", b"/a%3Fb", b"x=", "/a%3Fb?x="),
        (
            "/search",
            b"/search",
            b"q=%E2%82%AC+cat&empty=&run=ab",
            "/search?q=%E2%82%AC+cat&empty=&run=ab",
        ),
    ):
        code, headers = gate_answer(path, b"token=" + TOKEN.encode() + b"&" + query, raw_path=raw)
        assert (code, headers["location"]) == (303, location), path


def test_unbounded_the_gate_reads_the_listening_address_once(monkeypatch):
    """With no token set, whether the server listens beyond this machine is read once, not
    from Streamlit's configuration on every request."""
    from streamlit import config

    from lexlens.app.runtime.access import TokenGate

    monkeypatch.delenv("LEXLENS_TOKEN", raising=False)
    asked = []
    read = config.get_option

    def counted(name):
        asked.append(name)
        return "127.0.0.1" if name == "server.address" else read(name)

    monkeypatch.setattr(config, "get_option", counted)
    gate = TokenGate(_app)
    assert [gate_answer(f"/page{i}", gate=gate)[0] for i in range(5)] == [200] * 5
    assert asked.count("server.address") == 1


def test_traceback_app_options_are_checked_before_the_server_starts(cli, tmp_path, monkeypatch):
    for args, budget, needle in (
        (["--port", "0"], "", "--port 0"),
        (["--data-root", str(tmp_path / "missing")], "", "not a folder"),
        ([], "nan", "LEXLENS_RUNS_BUDGET_MB"),
        ([], "-5", "positive number"),
        ([], "inf", "positive number"),
    ):
        monkeypatch.setenv("LEXLENS_RUNS_BUDGET_MB", budget)
        one_line_error(cli("app", *args), needle)


def _plan(monkeypatch, tmp_path, **given):
    """``lexlens app``'s launch plan (command, environment, URL) for these flags, nothing
    started."""
    import argparse

    from lexlens.app.cli.app import launch_plan

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LEXLENS_RUNS_BUDGET_MB", raising=False)
    flags = {"port": 8501, "host": "127.0.0.2", "data_root": None, "allow_host": None} | given
    return launch_plan(argparse.Namespace(**flags))


def test_security_a_chosen_token_is_printed_url_encoded_and_opens_the_app(tmp_path, monkeypatch):
    """A LEXLENS_TOKEN with URL syntax in it (&, =, #, +, a space, non-ASCII) is printed
    encoded: the printed URL gives the gate the token itself, not a piece of it."""
    from urllib.parse import parse_qs, urlsplit

    chosen = "a&b=c #€+x"
    monkeypatch.setenv("LEXLENS_TOKEN", chosen)
    _, env, url = _plan(monkeypatch, tmp_path, data_root=[str(tmp_path)])
    assert env["LEXLENS_TOKEN"] == chosen
    parts = urlsplit(url)
    assert parts.fragment == "" and parse_qs(parts.query) == {"token": [chosen]}
    code, headers = gate_answer("/", parts.query.encode("ascii"))
    assert (code, headers["location"]) == (303, "/")


def test_security_a_data_root_holding_the_path_separator_is_refused(tmp_path, monkeypatch):
    """The roots reach the server joined by os.pathsep: a folder named ``a:b`` would split
    into two other folders (``…/a`` and ``b``), so it is refused, given or the default."""
    from lexlens.models import LexlensError

    monkeypatch.delenv("LEXLENS_TOKEN", raising=False)
    monkeypatch.delenv("LEXLENS_DATA_ROOTS", raising=False)
    odd = tmp_path / f"a{os.pathsep}b"
    odd.mkdir()
    with pytest.raises(LexlensError, match=f"cannot hold '{os.pathsep}'"):
        _plan(monkeypatch, tmp_path, data_root=[str(odd)])
    monkeypatch.chdir(odd)  # the default roots: LEXLENS_HOME/sources and this folder
    with pytest.raises(LexlensError, match=f"cannot hold '{os.pathsep}'"):
        _plan(monkeypatch, tmp_path)
    monkeypatch.chdir(tmp_path)
    _, env, _ = _plan(monkeypatch, tmp_path, data_root=[str(odd.parent)])
    assert env["LEXLENS_DATA_ROOTS"].split(os.pathsep)[-1] == str(tmp_path.resolve())


def test_silent_wrong_a_data_root_adds_to_the_default_roots(cli, tmp_path, monkeypatch):
    """``--data-root DIR`` adds DIR to the roots pages always read (LEXLENS_HOME/sources and
    the folder the app starts from), as its help says; the start message names them all."""
    from lexlens.app.cli import app as app_command

    monkeypatch.delenv("LEXLENS_TOKEN", raising=False)
    monkeypatch.delenv("LEXLENS_DATA_ROOTS", raising=False)
    home, here, extra = tmp_path / "home", tmp_path / "here", tmp_path / "extra"
    here.mkdir()
    extra.mkdir()
    monkeypatch.chdir(here)
    expected = [str((home / "sources").resolve()), str(here.resolve()), str(extra.resolve())]
    _, env, _ = _plan(monkeypatch, tmp_path, data_root=[str(extra), str(here)])
    assert env["LEXLENS_DATA_ROOTS"].split(os.pathsep) == expected
    started = []
    monkeypatch.setattr(app_command.os, "execve", lambda *call: started.append(call))
    from tests.browser import free_port

    done = cli("app", "--port", free_port(), "--data-root", extra)
    assert done.returncode == 0 and len(started) == 1, done.stderr
    assert started[0][2]["LEXLENS_DATA_ROOTS"].split(os.pathsep) == expected
    roots_line = done.stdout.splitlines()[1]
    assert all(root in roots_line for root in expected), roots_line
    assert "(LEXLENS_HOME/sources and this folder)" in roots_line
    assert f"and {extra.resolve()} (--data-root)" in roots_line
    shown = subprocess.run(
        [sys.executable, "-m", "lexlens.app.cli", "app", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "besides LEXLENS_HOME/sources and the current folder" in " ".join(shown.split())


def test_traceback_a_port_in_use_is_one_line_before_anything_says_open(tmp_path):
    """Another server already listens on the port: exit 2 with one line on stderr, and no
    URL printed as if the app had started."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "lexlens.app.cli", "app", "--port", str(port)],
            env=dict(os.environ, LEXLENS_HOME=str(tmp_path)),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.stdout == ""
    one_line_error(done, f"--port {port}", "already in use")


def test_security_typed_server_paths_stay_inside_the_data_roots(tmp_path, monkeypatch):
    from lexlens.analysis.core.roots import inside_roots
    from lexlens.models import LexlensError

    root = tmp_path / "root"
    (root / "data").mkdir(parents=True)
    (root / "data" / "items.csv").write_text("id,text\na,a cat\n")
    secret = tmp_path / "private" / "notes.txt"
    secret.parent.mkdir()
    secret.write_text("private\n")
    (root / "leak").symlink_to(secret.parent)
    assert inside_roots(root / "data" / "items.csv", [root]) == root / "data" / "items.csv"
    for path in (
        secret,
        root / "leak" / "notes.txt",
        f"{root}/data/../../private/notes.txt",
        "/etc/passwd",
        "~/.ssh",
    ):
        with pytest.raises(LexlensError, match="outside the data roots") as info:
            inside_roots(path, [root], "Path on this server")
        assert str(root) in str(info.value) and "--data-root" in str(info.value)
    # The Collections page refuses to build from a path outside the roots, in one line, as
    # soon as it is typed: Build cannot be pressed.
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LEXLENS_DATA_ROOTS", str(root))
    at = app_page("app_pages/collections.py")
    at.radio(key="collections_source").set_value("Path on this server")
    at.run()
    at.text_input(key="collections_path").set_value(str(root / "leak" / "notes.txt"))
    at.text_input(key="collections_name").set_value("leak")
    at.selectbox(key="collections_encoder").set_value("splade-tiny")
    at.run()
    assert next(b for b in at.button if b.label == "Build").disabled
    assert not at.exception
    assert any("outside the data roots" in e.value for e in at.error)
    assert not (tmp_path / "home" / "collections" / "leak").exists()
    # A checkpoint directory typed in the sidebar is held to the same roots.
    at.selectbox(key="collections_encoder").set_value("local checkpoint directory…")
    at.run()
    at.text_input(key="collections_encoder_dir").set_value(str(secret.parent))
    at.run()
    assert any("outside the data roots" in e.value for e in at.error)


def test_security_an_irds_prefix_is_no_way_around_the_data_roots(tmp_path, monkeypatch):
    """A checkpoint folder or a GloVe file typed as ``irds:…`` is a path like any other
    (relative to the server's folder): held to the data roots, never passed as typed."""
    from lexlens.app.runtime.access import server_path
    from lexlens.models import LexlensError

    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("LEXLENS_DATA_ROOTS", str(root))
    (tmp_path / "secret.txt").write_text("private\n")
    with pytest.raises(LexlensError, match="outside the data roots"):
        server_path("irds:../../../secret.txt", "GloVe file")  # irds:.. is one name
    (root / "irds:vectors.txt").write_text("cat 0.1\n")
    assert server_path("irds:vectors.txt", "GloVe file") == str(root / "irds:vectors.txt")


def _stored_run(page: str, status: str, size: int, updated: float):
    from lexlens.app.runtime import runs

    run = runs.create(page, f"{page} run", {}, [("upload/x.bin", b"x" * size)], key="k")
    run.status = status
    run.save()
    record = json.loads((run.folder / "run.json").read_text())
    record["updated"] = updated
    (run.folder / "run.json").write_text(json.dumps(record))
    return run.id


def test_data_lost_eviction_spares_running_open_and_newest_runs(tmp_path, monkeypatch):
    from lexlens.app.runtime import runs

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    monkeypatch.setenv("LEXLENS_RUNS_BUDGET_MB", "0.05")  # 50,000 bytes
    old_done = _stored_run("search", "done", 20_000, 100)
    running = _stored_run("search", "running", 20_000, 101)
    opened = _stored_run("text", "done", 20_000, 102)
    newest_text = _stored_run("text", "done", 20_000, 103)
    newest_search = _stored_run("search", "failed", 20_000, 104)
    runs.mark_open("session-1", "text", opened)
    monkeypatch.setattr(runs, "open_ids", lambda: {opened})  # one live session has it open
    removed = runs.enforce_budget()
    assert removed == [old_done]  # the only run no rule spares
    left = {r.id for r in runs.list_runs()}
    assert left == {running, opened, newest_text, newest_search}


def test_data_lost_run_left_running_by_a_stopped_server_is_marked_failed(tmp_path, monkeypatch):
    from lexlens.app.runtime import runs

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    crashed = _stored_run("collections", "running", 10, 100)
    record = json.loads((runs.runs_dir() / crashed / "run.json").read_text())
    record["server"] = 2**22 + 12345  # a process id no live process has
    (runs.runs_dir() / crashed / "run.json").write_text(json.dumps(record))
    alive = _stored_run("collections", "running", 10, 101)
    record = json.loads((runs.runs_dir() / alive / "run.json").read_text())
    record["server"] = os.getppid()  # another server on this workspace that still runs
    record["server_start"] = runs.process_start(os.getppid())
    (runs.runs_dir() / alive / "run.json").write_text(json.dumps(record))
    monkeypatch.setattr(runs, "_interrupted_marked", False)  # as in a server just started
    assert runs.mark_interrupted() == [crashed]
    assert runs.load(crashed).status == "failed"
    assert "stopped" in runs.load(crashed).message
    assert runs.load(alive).status == "running"
    # Marked failed, it counts toward the budget like any finished run.
    monkeypatch.setenv("LEXLENS_RUNS_BUDGET_MB", "0.000001")
    _stored_run("collections", "done", 10, 200)
    assert crashed in runs.enforce_budget()


#: A server that makes one run and then stops (or, given "wait", keeps running until its
#: input closes); prints the run's id.
_SERVER = (
    "import sys; from lexlens.app.runtime import runs; "
    "print(runs.create('collections', 'a build', {}, [], key='k').id, flush=True); "
    "sys.argv[1:] == ['wait'] and sys.stdin.read()"
)


def test_silent_wrong_a_run_whose_server_id_another_process_took_is_marked_failed(
    tmp_path, monkeypatch
):
    """A stopped server's process id given to another live process later (ids are reused)
    is not that server: its run is marked failed, never left "running" for good. A second
    server on the workspace that still runs keeps its run."""
    from lexlens.app.runtime import runs

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    env = dict(os.environ)
    stopped = subprocess.run(
        [sys.executable, "-c", _SERVER], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    other = subprocess.Popen(["sleep", "120"])  # the process that now has the server's id
    live = subprocess.Popen(
        [sys.executable, "-c", _SERVER, "wait"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        still = live.stdout.readline().strip()
        record = json.loads((runs.runs_dir() / stopped / "run.json").read_text())
        record["server"] = other.pid  # as if the system had given the id to `other`
        (runs.runs_dir() / stopped / "run.json").write_text(json.dumps(record))
        monkeypatch.setattr(runs, "_interrupted_marked", False)  # as in a server just started
        assert runs.mark_interrupted() == [stopped]
        assert runs.load(stopped).status == "failed"
        assert runs.load(still).status == "running"
    finally:
        other.kill()
        live.communicate(timeout=30)
        other.wait(timeout=30)


def test_data_lost_clearing_streamlit_caches_keeps_this_servers_running_runs(tmp_path, monkeypatch):
    """Any client can ask Streamlit to clear its caches: the job manager (one worker) stays,
    and the runs this server still works on are not marked "the server stopped" (which
    would also let the budget evict them)."""
    import threading

    import streamlit as st

    from lexlens.app.runtime import jobs, runs

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    monkeypatch.setattr(runs, "_interrupted_marked", False)  # as in a server just started
    manager = jobs.job_manager()
    working = runs.create("collections", "a long build", {}, [], key="k")
    st.cache_resource.clear()
    st.cache_data.clear()
    assert jobs.job_manager() is manager
    assert runs.load(working.id).status == "running"
    workers = [t for t in threading.enumerate() if t.name == "lexlens-jobs"]
    assert len(workers) == 1
    # A run this process made is its own even on the first call (a page that starts a job
    # before any other made the manager).
    monkeypatch.setattr(runs, "_interrupted_marked", False)
    assert runs.mark_interrupted() == []
    assert runs.load(working.id).status == "running"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("server", "abc"),
        ("server", 2.5),
        ("server", True),
        ("updated", "yesterday"),
        ("created", 1e300),
        ("page", "../main"),
        ("page", ["text"]),
        ("id", "0123456789abcdef"),
        ("uploads", [1]),
        ("status", None),
        ("inputs", []),
        ("summary", 3),
    ],
)
def test_traceback_one_run_json_with_a_wrong_field_breaks_no_page(
    field, value, tmp_path, monkeypatch
):
    """A run.json edited or written by another version, with one field of the wrong type or
    out of range, is left out as unreadable: the store's listing, the budget, marking
    stopped runs and the History page go on with the others."""
    from lexlens.app.runtime import runs
    from lexlens.models import LexlensError

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    good = _stored_run("text", "done", 10, 100)
    bad = _stored_run("search", "running", 10, 101)
    record = json.loads((runs.runs_dir() / bad / "run.json").read_text())
    record[field] = value
    (runs.runs_dir() / bad / "run.json").write_text(json.dumps(record))
    with pytest.raises(LexlensError, match=f"run {bad} cannot be read .*{field}"):
        runs.load(bad)
    assert [r.id for r in runs.list_runs()] == [good]
    monkeypatch.setattr(runs, "_interrupted_marked", False)
    assert runs.mark_interrupted() == []
    monkeypatch.setenv("LEXLENS_RUNS_BUDGET_MB", "0.000001")
    assert runs.enforce_budget() == []  # the good one is its page's newest
    at = app_page("app_pages/history.py")
    assert not at.exception


def test_traceback_a_run_of_a_server_id_beyond_any_process_is_marked_stopped(tmp_path, monkeypatch):
    """A server id no process can have (beyond the system's range) is a stopped server:
    its run is marked failed, where asking the system about it raised OverflowError."""
    from lexlens.app.runtime import runs

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    crashed = _stored_run("search", "running", 10, 101)
    record = json.loads((runs.runs_dir() / crashed / "run.json").read_text())
    record["server"] = 10**30
    (runs.runs_dir() / crashed / "run.json").write_text(json.dumps(record))
    monkeypatch.setattr(runs, "_interrupted_marked", False)
    assert runs.mark_interrupted() == [crashed]
    assert runs.load(crashed).status == "failed"


def test_data_lost_a_run_ends_with_its_status_and_result_in_one_set(tmp_path, monkeypatch):
    """A quick page's inputs are one write of run.json, already "done"; a job's end is its
    status and its result written as one set: a disk that fills meanwhile leaves neither
    (never a result beside a run.json still "running", later marked "the server
    stopped")."""
    import errno

    from lexlens.analysis.attribution.topics import Topic
    from lexlens.analysis.core import outputs
    from lexlens.app.runtime import runs
    from lexlens.models import LexlensError

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    sets = []
    write = runs.write_files
    monkeypatch.setattr(
        runs, "write_files", lambda out, files: sets.append(sorted(files)) or write(out, files)
    )
    quick = runs.create("text", "a cat", {"text_input": "a cat"}, [], key="k", status="done")
    assert sets == [["run.json"]] and runs.load(quick.id).status == "done"
    job = runs.create("collections", "a build", {}, [], key="k")
    topic = Topic(1, 7, [0, 2], ["a cat", "a dog"], {"cat": 0.5}, [[("cat", 0.5)]], 3)
    stage = outputs.FileSet.write_bytes

    def disk_full_at_run_json(self, name, data):
        if name == "run.json":
            raise self._failed(name, OSError(errno.ENOSPC, "No space left on device"))
        return stage(self, name, data)

    monkeypatch.setattr(outputs.FileSet, "write_bytes", disk_full_at_run_json)
    with pytest.raises(LexlensError, match="the disk is full"):
        runs.finish(job, topic)
    assert not (job.folder / "result.json").exists()
    assert runs.load(job.id).status == "running"
    monkeypatch.setattr(outputs.FileSet, "write_bytes", stage)
    sets.clear()
    runs.finish(job, topic)
    assert sets == [["result.json", "run.json"]]
    assert runs.load(job.id).status == "done" and runs.load(job.id).result(Topic) == topic


def test_silent_wrong_budget_is_shown_in_the_unit_it_is_set(tmp_path, monkeypatch):
    from lexlens.app.runtime import runs

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    monkeypatch.setenv("LEXLENS_RUNS_BUDGET_MB", "2")
    assert runs.budget_bytes() == 2_000_000
    _stored_run("text", "done", 10, 1)
    at = app_page("app_pages/history.py")
    assert not at.exception
    shown = at.get("progress")[0].proto.text
    assert "of the 2 MB budget" in shown
    monkeypatch.setenv("LEXLENS_RUNS_BUDGET_MB", "lots")
    at = app_page("app_pages/history.py")
    assert not at.exception
    assert any(
        "LEXLENS_RUNS_BUDGET_MB" in e.value and "no run is removed" in e.value for e in at.error
    )
