"""Who may use a served app, and which server files it may read (Jupyter's model).

- **This machine unless asked.** ``lexlens app`` (and ``make run``) listen on 127.0.0.1.
  Started with ``--host ADDRESS`` the app needs a token: generated at start or taken from
  ``LEXLENS_TOKEN``, printed as the URL to open (``…/?token=…``). :class:`TokenGate`, an
  ASGI middleware in front of every route, checks it before anything is served: a request
  with the right ``?token=`` gets a cookie for this browser session (HttpOnly, SameSite
  strict, named after the port) and is sent on to the same URL without the token; a request
  without it gets one page saying a token is needed, and the websocket that draws pages is
  refused. Only the health check answers without a token. An app listening beyond this
  machine with no token set (``streamlit run … --server.address 0.0.0.0``) serves nothing.
- **Files within the data roots.** Paths typed into a page are read only inside the data
  roots (``--data-root DIR``, repeatable; default ``LEXLENS_HOME/sources`` and the folder
  the app was started from): :func:`data_roots`, checked by
  :func:`lexlens.analysis.core.roots.inside_roots`.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import os
from pathlib import Path
from urllib.parse import parse_qsl, quote_from_bytes, urlencode

from lexlens.analysis.collections.workspace import sources_dir

#: The token a served app asks for (set by ``lexlens app``; empty: no token).
TOKEN_ENV = "LEXLENS_TOKEN"
#: The data roots, joined with ``os.pathsep`` (set by ``lexlens app``).
ROOTS_ENV = "LEXLENS_DATA_ROOTS"
#: Addresses that keep the app on this machine.
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
#: What answers without a token: the health check (process managers and tests poll it).
OPEN_PATHS = ("/_stcore/health",)


def is_local(host: str | None) -> bool:
    """Whether an app bound to ``host`` is reachable from this machine only."""
    return (host or "").strip().lower() in LOCAL_HOSTS


def app_token() -> str | None:
    """The token this server asks for, if any."""
    return os.environ.get(TOKEN_ENV, "").strip() or None


def cookie_name(port: int | str) -> str:
    """The cookie that keeps a browser session's token (one per port: cookies ignore ports)."""
    return f"lexlens_token_{port}"


def cookie_value(token: str) -> str:
    """What the cookie holds: derived from the token, never the token itself."""
    return hmac.new(token.encode("utf-8"), b"lexlens browser session", hashlib.sha256).hexdigest()


def same(given: str | None, expected: str) -> bool:
    """A constant-time comparison of a presented secret."""
    return given is not None and hmac.compare_digest(given.encode("utf-8"), expected.encode())


def data_roots() -> list[Path]:
    """The folders a page may read typed server paths from (see the module docstring)."""
    given = [p for p in os.environ.get(ROOTS_ENV, "").split(os.pathsep) if p.strip()]
    return [Path(p) for p in given] if given else [sources_dir(), Path.cwd()]


def server_path(raw: str, label: str) -> str:
    """A path typed into a page (a checkpoint folder, a GloVe file), resolved and checked
    against :func:`data_roots`. A collection's source, which may also name no path
    (``irds:ID``, ``sample:NAME``), has its own rule in the collections' workspace."""
    from lexlens.analysis.core.roots import inside_roots

    return str(inside_roots(raw, data_roots(), label))


def server_spec(raw: str, label: str) -> str:
    """An encoder spec typed into a page (a checkpoint folder, with a ``+faiss:FILE`` or
    ``+pq:M:CORPUS`` suffix), split as the loader splits it and every path it names checked
    against :func:`data_roots` (:func:`lexlens.analysis.core.roots.spec_inside_roots`)."""
    from lexlens.analysis.core.roots import spec_inside_roots

    return spec_inside_roots(raw, data_roots(), label)


def _cookies(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """The request's cookies, as browsers send them: a cookie that does not parse (a space
    in a value another site set) is taken as it is, never drops the ones after it."""
    from starlette.requests import cookie_parser  # the server's; the CLI never needs it

    jar: dict[str, str] = {}
    for name, value in headers:
        if name.lower() == b"cookie":
            jar.update(cookie_parser(value.decode("latin-1")))
    return jar


def _page(title: str, body: str) -> bytes:
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Lexlens</title></head>"
        "<body style='font-family:sans-serif;max-width:40em;margin:4em auto'>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(body)}</p></body></html>"
    ).encode()


TOKEN_PAGE = _page(
    "A token is needed",
    "This Lexlens app is shared beyond its machine and asks for the token it printed when it "
    "started: open the URL it printed (…/?token=…). The token is kept for this browser "
    "session (a cookie), so cookies must be allowed.",
)
EXPOSED_PAGE = _page(
    "Not served without a token",
    "This Lexlens app listens beyond its machine but no token is set: start it with "
    "`lexlens app --host ADDRESS`, which makes one.",
)


class TokenGate:
    """ASGI middleware: every request but the health check needs the token (see the module
    docstring). Reads the token once, at start, and the address the server listens on once,
    at the first request without a token set."""

    def __init__(self, app) -> None:
        self.app = app
        self.token = app_token()
        self._local: bool | None = None  # whether the server listens on this machine only

    def _listens_locally(self) -> bool:
        if self._local is None:
            from streamlit import config

            self._local = is_local(config.get_option("server.address"))
        return self._local

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        if self.token is None:
            if self._listens_locally():
                await self.app(scope, receive, send)
            else:
                await _deny(scope, send, EXPOSED_PAGE)
            return
        port = (scope.get("server") or ("", 0))[1]
        jar = _cookies(scope.get("headers", []))
        if same(jar.get(cookie_name(port)), cookie_value(self.token)):
            await self.app(scope, receive, send)
            return
        # Escapes decoded byte for byte (latin-1), so the query round-trips exactly.
        query = parse_qsl(
            scope.get("query_string", b"").decode("latin-1"),
            keep_blank_values=True,
            encoding="latin-1",
        )
        given = next((v for k, v in query if k == "token"), None)
        if given is not None:
            given = given.encode("latin-1").decode("utf-8", "replace")  # the URL's UTF-8
        if scope["type"] == "http" and same(given, self.token):
            cookie = (
                f"{cookie_name(port)}={cookie_value(self.token)}; Path=/; HttpOnly; SameSite=Strict"
            )
            location = _same_url_without_token(scope, query)
            await _respond(
                send,
                303,
                b"",
                [
                    (b"location", location.encode("ascii")),
                    (b"set-cookie", cookie.encode("latin-1")),
                ],
            )
            return
        await _deny(scope, send, TOKEN_PAGE)


#: What a redirect's path and query keep as sent: RFC 3986's reserved characters and the
#: escapes already there; anything else (a backslash, a space, a byte beyond ASCII) is escaped.
_URL_SAFE = "/%:@!$&'()*+,;=?"


def _same_url_without_token(scope, query: list[tuple[str, str]]) -> str:
    """Where a request with the right token is sent on: its path as the browser sent it
    (raw: an escaped ``?`` stays escaped), its leading slashes and backslashes collapsed to
    one (``//evil.example`` would be another host), and its query but the token (blank
    values kept)."""
    raw = scope.get("raw_path") or scope["path"].encode("utf-8")
    path = "/" + quote_from_bytes(raw.lstrip(b"/\\"), safe=_URL_SAFE)
    rest = urlencode([(k, v) for k, v in query if k != "token"], encoding="latin-1")
    return path + (f"?{rest}" if rest else "")


async def _respond(send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"cache-control", b"no-store"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _deny(scope, send, page: bytes) -> None:
    if scope["type"] == "websocket":  # refused before the handshake completes (HTTP 403)
        await send({"type": "websocket.close", "code": 1008})
    else:
        await _respond(send, 403, page, [])


def token_accepted() -> bool:
    """Whether this page run's browser session holds the token (always, when none is set)."""
    token = app_token()
    if token is None:
        return True
    import streamlit as st
    from streamlit import config

    given = st.context.cookies.get(cookie_name(config.get_option("server.port")))
    return same(given, cookie_value(token))
