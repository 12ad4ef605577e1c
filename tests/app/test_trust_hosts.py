"""No web page can drive the app under another name, and no client makes it reach out.

A page the user visits can have its own host name resolve to this machine (DNS rebinding)
and then send the browser's requests to the app: the app answers only to its own names
(``Host``) and to its own pages (``Origin``), Jupyter's ``local_hostnames`` rule. Streamlit's
own check of a websocket Origin it does not know looks this machine's addresses up (a UDP
connect to 8.8.8.8, a request to checkip.amazonaws.com): the served app must make no such
attempt whatever a client sends, which is checked inside a network namespace of the test's
own, by an audit hook in the server processes that logs every connect and name lookup.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request

import pytest

from tests.app.test_trust_app import TOKEN, gate_answer
from tests.browser import REPO, chromium, served_app, wait_idle

REBIND = "rebind.attacker.example"


def handshake(
    address: str, port: int, host: str, origin: str | None = None, cookie: str | None = None
) -> int:
    """The HTTP status a websocket handshake to ``/_stcore/stream`` gets (101: opened)."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        "GET /_stcore/stream HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        "Sec-WebSocket-Protocol: streamlit",
    ]
    lines += [f"Origin: {origin}"] if origin else []
    lines += [f"Cookie: {cookie}"] if cookie else []
    with socket.create_connection((address, port), timeout=10) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        answer = b""
        while b"\r\n" not in answer:
            chunk = conn.recv(4096)
            if not chunk:
                break
            answer += chunk
    return int(answer.split()[1]) if answer else 0


def get(url: str, host: str | None = None, cookie: str | None = None) -> tuple[int, bytes]:
    """(status, body) of a GET with this Host header (redirects not followed)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    headers = {"Host": host} if host else {}
    headers |= {"Cookie": cookie} if cookie else {}
    try:
        with urllib.request.build_opener(NoRedirect).open(
            urllib.request.Request(url, headers=headers), timeout=10
        ) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _listening_on(monkeypatch, address: str) -> None:
    """The gate reads the server's address from Streamlit's configuration: this one."""
    from streamlit import config

    read = config.get_option
    monkeypatch.setattr(
        config, "get_option", lambda name: address if name == "server.address" else read(name)
    )


def test_security_the_gate_answers_only_to_the_apps_own_names(monkeypatch):
    """Host: localhost, 127.0.0.1, ::1 (any spelling, any port: port forwarding changes it),
    the address listened on and the one the request reached, names given with
    --allow-host; anything else — the health check included — is refused with one page."""
    monkeypatch.delenv("LEXLENS_TOKEN", raising=False)
    monkeypatch.delenv("LEXLENS_ALLOWED_HOSTS", raising=False)
    _listening_on(monkeypatch, "127.0.0.1")
    for host in (
        "127.0.0.1:8501",
        "localhost:8501",
        "LocalHost",
        "[::1]:8501",
        "[0:0:0:0:0:0:0:1]:8501",
        "localhost:9000",
        "127.0.0.2:8501",  # the address the request reached (the test's scope says 127.0.0.2)
    ):
        assert gate_answer("/text", host=host)[0] == 200, host
    for host in (
        f"{REBIND}:8501",
        REBIND,
        "localhost.attacker.example",
        "127.0.0.1.nip.io",
        "localhost@attacker.example",
        "localhost:8501/x",
        "localhost:port",
        "mybox.lan",
        "",
        None,
    ):
        assert gate_answer("/text", host=host)[0] == 403, host
        assert gate_answer("/_stcore/health", host=host)[0] == 403, host
        assert gate_answer("/_stcore/stream", host=host, kind="websocket")[0] == 403, host
    assert gate_answer("/_stcore/health", host="localhost:8501")[0] == 200
    monkeypatch.setenv("LEXLENS_ALLOWED_HOSTS", "mybox.lan,10.1.2.3")
    assert gate_answer("/text", host="mybox.lan:8501")[0] == 200
    assert gate_answer("/text", host="MYBOX.LAN")[0] == 200
    assert gate_answer("/text", host="10.1.2.3:8501")[0] == 200
    assert gate_answer("/text", host=f"{REBIND}:8501")[0] == 403
    # Exposed with a token, the names are checked first: the token is no way around them.
    monkeypatch.setenv("LEXLENS_TOKEN", TOKEN)
    monkeypatch.delenv("LEXLENS_ALLOWED_HOSTS")
    _listening_on(monkeypatch, "192.0.2.7")
    assert gate_answer("/", b"token=" + TOKEN.encode(), host="192.0.2.7:8501")[0] == 303
    assert gate_answer("/", b"token=" + TOKEN.encode(), host=f"{REBIND}:8501")[0] == 403


def test_security_the_gate_refuses_a_request_from_another_sites_page(monkeypatch):
    """An Origin must be a page at one of the app's names and the request's own port; the
    websocket that draws pages always carries one."""
    monkeypatch.delenv("LEXLENS_TOKEN", raising=False)
    monkeypatch.delenv("LEXLENS_ALLOWED_HOSTS", raising=False)
    _listening_on(monkeypatch, "127.0.0.1")
    for kind in ("http", "websocket"):
        for origin in ("http://localhost:8501", "http://127.0.0.1:8501", "http://[::1]:8501"):
            assert gate_answer("/x", host="localhost:8501", origin=origin, kind=kind)[0] == 200
        for origin in (
            f"http://{REBIND}:8501",
            f"http://{REBIND}",
            "http://localhost:3000",  # another local server's page
            "http://localhost",
            "null",
            "file://",
            "http://localhost:8501/path",
            "chrome-extension://abc",
        ):
            code = gate_answer("/x", host="localhost:8501", origin=origin, kind=kind)[0]
            assert code == 403, (kind, origin)
    # Behind a port forward the page's port is the request's own: allowed.
    assert gate_answer("/x", host="localhost:9000", origin="http://localhost:9000")[0] == 200


def test_allow_host_takes_host_names_and_addresses_only(tmp_path, monkeypatch):
    """``--allow-host`` reaches the server as names compared as the gate compares them; a
    port, a scheme or a wildcard is refused in one line before anything starts."""
    from lexlens.app.runtime.access import ALLOWED_HOSTS_ENV
    from lexlens.models import LexlensError
    from tests.app.test_trust_app import _plan

    monkeypatch.delenv("LEXLENS_TOKEN", raising=False)
    _, env, _ = _plan(monkeypatch, tmp_path, allow_host=["MyBox.lan", "[::1]", "10.0.0.5"])
    assert env[ALLOWED_HOSTS_ENV] == "mybox.lan,::1,10.0.0.5"
    for bad in ("mybox.lan:8501", "http://mybox.lan", "*.lan", "a,b", "my box", ""):
        with pytest.raises(LexlensError, match="--allow-host"):
            _plan(monkeypatch, tmp_path, allow_host=[bad])


def test_security_a_rebinding_host_and_a_foreign_origin_are_refused_by_the_served_apps(tmp_path):
    """The default app (127.0.0.1) and a token app listening on every address: a rebinding
    Host gets the refusal page (pages and health check), a websocket with it or with a
    foreign Origin is refused; the app's own names and the address reached still open."""
    env = {"LEXLENS_HOME": str(tmp_path)}
    with served_app(env=env) as url:
        port = int(url.rsplit(":", 1)[1])
        for path in ("/text", "/", "/_stcore/health", "/_stcore/host-config"):
            code, body = get(url + path, host=f"{REBIND}:{port}")
            assert code == 403 and b"Not this app&#x27;s address" in body, path
        assert get(url + "/text", host=f"localhost:{port}")[0] == 200
        assert get(url + "/_stcore/health")[0] == 200
        own = f"http://127.0.0.1:{port}"
        assert handshake("127.0.0.1", port, f"{REBIND}:{port}", f"http://{REBIND}:{port}") == 403
        assert handshake("127.0.0.1", port, f"127.0.0.1:{port}", f"http://{REBIND}:{port}") == 403
        assert handshake("127.0.0.1", port, f"127.0.0.1:{port}", "http://localhost:1") == 403
        assert handshake("127.0.0.1", port, f"127.0.0.1:{port}", own) == 101
        assert handshake("127.0.0.1", port, f"localhost:{port}", f"http://localhost:{port}") == 101
    with served_app(host="0.0.0.0", env=env | {"LEXLENS_TOKEN": TOKEN}) as url:
        port = int(url.rsplit(":", 1)[1])
        reached = f"http://127.0.0.2:{port}"
        # The address reached is one of the app's names: the token is what it asks.
        assert get(f"{reached}/text?token={TOKEN}")[0] == 303
        cookie = f"lexlens_token_{port}=" + _cookie_value()
        assert get(f"{reached}/text", cookie=cookie)[0] == 200
        code, body = get(f"{reached}/text", host=f"{REBIND}:{port}", cookie=cookie)
        assert code == 403 and b"Not this app&#x27;s address" in body
        foreign = f"http://{REBIND}:{port}"
        assert handshake("127.0.0.2", port, f"{REBIND}:{port}", foreign, cookie) == 403
        assert handshake("127.0.0.2", port, f"127.0.0.2:{port}", foreign, cookie) == 403
        assert handshake("127.0.0.2", port, f"127.0.0.2:{port}", reached, cookie) == 101


def _cookie_value() -> str:
    from lexlens.app.runtime.access import cookie_value

    return cookie_value(TOKEN)


@pytest.mark.browser
@pytest.mark.slow
def test_pages_still_open_at_localhost_and_127_0_0_1(tmp_path):
    """What the gate lets through is what a browser sends: the app draws its pages, and its
    websocket connects, at both local names, with and without a token."""
    for env in ({}, {"LEXLENS_TOKEN": TOKEN}):
        with served_app(env={"LEXLENS_HOME": str(tmp_path)} | env) as url:
            port = int(url.rsplit(":", 1)[1])
            with chromium() as browser:
                for name in ("localhost", "127.0.0.1"):
                    page = browser.new_page()
                    query = f"?token={TOKEN}" if env else ""
                    page.goto(f"http://{name}:{port}/history{query}")
                    wait_idle(page)
                    assert page.get_by_role("heading", name="History").count() == 1, name
                    page.close()


#: Installed in every Python process of the served app (a sitecustomize on its PYTHONPATH):
#: logs each connect to, datagram to or name lookup of anything but this machine.
AUDIT_HOOK = textwrap.dedent(
    """
    import json, os, socket, sys

    LOG = os.environ["LEXLENS_TEST_CONNECT_LOG"]
    LOCAL = {None, "", "localhost", "127.0.0.1", "::1", "0.0.0.0", "::"}

    def note(kind, where):
        with open(LOG, "a") as out:
            out.write(json.dumps([os.getpid(), kind, repr(where)]) + "\\n")

    def outside(address):
        if not isinstance(address, tuple) or not address:
            return False  # a Unix socket
        host = str(address[0])
        return not (host in LOCAL or host.startswith("127.") or host.startswith("::ffff:127."))

    def hook(event, args):
        if event in ("socket.connect", "socket.sendto", "socket.sendmsg") and len(args) > 1:
            if outside(args[1]):
                note(event, args[1])
        elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
            host = args[0].decode() if isinstance(args[0], bytes) else args[0]
            if outside((host,)):
                note(event, host)

    sys.addaudithook(hook)
    note("hooked", sys.argv[:3])
    """
)

#: Runs inside the network namespace: both apps, every hostile variant, then stop.
PROBE = textwrap.dedent(
    """
    import json, os, subprocess, sys, time, urllib.request
    sys.path.insert(0, os.getcwd())
    from tests.app.test_trust_hosts import REBIND, TOKEN, _cookie_value, get, handshake

    def serve(host, port, env):
        cmd = [sys.executable, "-m", "lexlens.app.cli", "app", "--host", host, "--port", port]
        server = subprocess.Popen(cmd, env=dict(os.environ, **env),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and server.poll() is None:
            try:
                if get(f"http://{host}:{port}/_stcore/health")[0] == 200:
                    return server
            except OSError:
                time.sleep(0.3)
        raise SystemExit(f"{host}:{port} never became healthy")

    seen = []
    for host, port, env in (("127.0.0.1", "8598", {}),
                            ("127.0.0.2", "8597", {"LEXLENS_TOKEN": TOKEN})):
        server = serve(host, port, env)
        cookie = f"lexlens_token_{port}=" + _cookie_value()
        own = f"{host}:{port}"
        try:
            for origin_host in (REBIND, "localhost", "[::1]", "LOCALHOST", host):
                for host_header in (f"{REBIND}:{port}", own, f"localhost:{port}"):
                    origin = f"http://{origin_host}:{port}"
                    seen.append([own, host_header, origin,
                                 handshake(host, int(port), host_header, origin, cookie)])
            seen.append([own, "GET", get(f"http://{own}/text", f"{REBIND}:{port}", cookie)[0]])
            time.sleep(1.5)  # Streamlit's lookups would time out after 1 s each
        finally:
            server.terminate()
            print(server.communicate(timeout=30)[0].decode("utf-8", "replace"))
    print("SEEN", json.dumps(seen), flush=True)
    """
)


@pytest.mark.slow
def test_security_no_client_makes_the_app_reach_beyond_this_machine(tmp_path):
    """A rebinding Host, a foreign Origin, an Origin of another of the app's names, in every
    spelling, on the default app and on the token app: the server processes (an audit hook
    in each) attempt no connect to and look up no address but this machine's. Run in a
    network namespace with only a loopback device, so even an attempt stays here."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a network namespace (unshare -n)")
    if not (shutil.which("unshare") and shutil.which("ip")):
        pytest.skip("needs unshare (util-linux) and ip (iproute2)")
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(AUDIT_HOOK)
    log = tmp_path / "connects.jsonl"
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        LEXLENS_HOME=str(tmp_path / "home"),
        LEXLENS_TEST_CONNECT_LOG=str(log),
        PYTHONPATH=os.pathsep.join([str(hook_dir), os.environ.get("PYTHONPATH", "")]),
    )
    env.pop("LEXLENS_TOKEN", None)
    cmd = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
    cmd += [sys.executable, "-c", PROBE]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    seen = json.loads(out.split("SEEN ", 1)[1].splitlines()[0])
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    servers = [e for e in entries if e[1] == "hooked" and e[2].startswith("['-m', 'run'")]
    assert len(servers) == 2, entries  # the hook ran in both servers
    attempts = [e for e in entries if e[1] != "hooked"]
    assert attempts == [], (attempts, seen)
    assert "external IP" not in out, out[-3000:]
    # What the gate answered: a foreign name refused; the app's own page opened.
    for own, *rest in seen:
        if rest[0] == "GET":
            assert rest[1] == 403
            continue
        host_header, origin, code = rest
        if REBIND in host_header or REBIND in origin:
            assert code == 403, (own, host_header, origin)
        elif origin == f"http://{own}" and host_header == own:
            assert code == 101, (own, host_header, origin)
