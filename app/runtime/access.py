"""Who may use a served app, and which server files it may read (Jupyter's model).

- **Only at its own names.** A web page the user visits can make the browser send requests
  to the app under the page's own host name, once that name resolves to this machine (DNS
  rebinding). So :class:`TokenGate` first answers 403 to any request, the health check
  included, whose ``Host`` is not one of the app's names (Jupyter's ``local_hostnames``):
  ``localhost``, ``127.0.0.1``, ``::1``, the address it listens on, the address the request
  reached (an address, which no page can rebind: an app listening on every address answers
  at each of this machine's), and each name given with ``lexlens app --allow-host NAME``;
  the port is not compared (a port forward changes it). A request that carries an
  ``Origin`` — the websocket that draws pages always does — must come from a page at one of
  those names and the request's own port, else it is refused before Streamlit's handler
  runs; Streamlit's own check of an Origin it does not know asks nothing outside either
  (:func:`lexlens.app.runtime.serving.no_address_lookups`).
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
  roots (``LEXLENS_HOME/sources``, the folder the app was started from, and each
  ``--data-root DIR`` given to ``lexlens app``): :func:`data_roots`, checked by
  :func:`lexlens.analysis.core.roots.inside_roots`.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import ipaddress
import os
from pathlib import Path
from urllib.parse import parse_qsl, quote_from_bytes, urlencode, urlsplit

from lexlens.analysis.collections.workspace import sources_dir
from lexlens.analysis.core.roots import inside_roots, spec_inside_roots

#: The token a served app asks for (set by ``lexlens app``; empty: no token).
TOKEN_ENV = "LEXLENS_TOKEN"
#: The data roots, joined with ``os.pathsep`` (set by ``lexlens app``).
ROOTS_ENV = "LEXLENS_DATA_ROOTS"
#: More host names the app answers to (``lexlens app --allow-host``), joined by commas.
ALLOWED_HOSTS_ENV = "LEXLENS_ALLOWED_HOSTS"
#: Addresses that keep the app on this machine, and the names it always answers to.
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

    return str(inside_roots(raw, data_roots(), label))


def host_name(name: str) -> str:
    """A host name or address as compared: lower case, an IPv6 address in its short form and
    an IPv4 address mapped into IPv6 (``::ffff:127.0.0.1``) as the IPv4 one."""
    name = name.strip().lower()
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return name
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


def allowed_hosts() -> list[str]:
    """The names given with ``--allow-host`` (from the environment ``lexlens app`` sets)."""
    given = os.environ.get(ALLOWED_HOSTS_ENV, "").split(",")
    return [host_name(n) for n in given if n.strip()]


def _netloc(value: str, default_port: int) -> tuple[str, int] | None:
    """``(host name, port)`` of a Host header's value (``name[:port]``, ``[v6][:port]``);
    ``None`` unless it is exactly that."""
    try:
        parts = urlsplit(f"//{value}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.password is not None:
        return None
    if parts.path or parts.query or parts.fragment or any(c.isspace() for c in value):
        return None
    return host_name(parts.hostname), default_port if port is None else port


def _origin(value: str) -> tuple[str, int] | None:
    """``(host name, port)`` of an Origin header (``http[s]://host[:port]``); ``None`` for
    anything else (``null``, another scheme, a path)."""
    scheme, sep, rest = value.partition("://")
    defaults = {"http": 80, "https": 443}
    if not sep or scheme.lower() not in defaults or "/" in rest:
        return None
    return _netloc(rest, defaults[scheme.lower()])


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in headers if k.lower() == name]


def server_spec(raw: str, label: str) -> str:
    """An encoder spec typed into a page (a checkpoint folder, with a ``+faiss:FILE`` or
    ``+pq:M:CORPUS`` suffix), split as the loader splits it and every path it names checked
    against :func:`data_roots` (:func:`lexlens.analysis.core.roots.spec_inside_roots`)."""

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
FOREIGN_HOST_PAGE = _page(
    "Not this app's address",
    "This Lexlens app answers only at its own names: localhost, 127.0.0.1, ::1, the address "
    "it listens on, and names given with `lexlens app --allow-host NAME`. A page of another "
    "site may not reach it under that site's name.",
)
FOREIGN_ORIGIN_PAGE = _page(
    "Not from this app's page",
    "This Lexlens app is driven only by its own pages: the request came from a page of "
    "another site (its Origin), or of another port.",
)
EXPOSED_PAGE = _page(
    "Not served without a token",
    "This Lexlens app listens beyond its machine but no token is set: start it with "
    "`lexlens app --host ADDRESS`, which makes one.",
)


class TokenGate:
    """ASGI middleware: a request must name the app and come from its own page; then every
    request but the health check needs the token (see the module docstring). Reads the token
    once, at start, and the address the server listens on once, at the first request."""

    def __init__(self, app) -> None:
        self.app = app
        self.token = app_token()
        self._address: str | None = None  # the address the server listens on
        self._names: frozenset[str] = frozenset()  # the names it answers to

    def _listening(self) -> str:
        if self._address is None:
            from streamlit import config  # streamlit only inside the app

            self._address = str(config.get_option("server.address") or "")
            names = [*LOCAL_HOSTS, self._address, *allowed_hosts()]
            self._names = frozenset(host_name(n) for n in names if n.strip())
        return self._address

    def _listens_locally(self) -> bool:
        return is_local(self._listening())

    def foreign(self, scope) -> bytes | None:
        """The page refusing a request that does not name this app (its Host) or comes from
        another site's page (its Origin); ``None`` for one that does neither."""
        self._listening()
        reached = scope.get("server") or ()
        names = self._names | ({host_name(str(reached[0]))} if reached else set())
        headers = scope.get("headers", [])
        secure = scope.get("scheme") in ("https", "wss")
        hosts = _header(headers, b"host")
        host = _netloc(hosts[0], 443 if secure else 80) if len(hosts) == 1 else None
        if host is None or host[0] not in names:
            return FOREIGN_HOST_PAGE
        origins = _header(headers, b"origin")
        if not origins:
            return None  # not sent by a page (a browser's websocket always sends one)
        origin = _origin(origins[0]) if len(origins) == 1 else None
        if origin is None or origin[0] not in names or origin[1] != host[1]:
            return FOREIGN_ORIGIN_PAGE
        return None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refused = self.foreign(scope)
        if refused is not None:
            await _deny(scope, send, refused)
            return
        if scope.get("path") in OPEN_PATHS:
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
    """403 with ``page``; a websocket is refused before its handshake completes, with a bare
    403 (no browser shows a websocket's page, and uvicorn logs an error when one is sent)."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
    else:
        await _respond(send, 403, page, [])


def token_accepted() -> bool:
    """Whether this page run's browser session holds the token (always, when none is set)."""
    token = app_token()
    if token is None:
        return True
    import streamlit as st  # streamlit only inside the app
    from streamlit import config  # streamlit only inside the app

    given = st.context.cookies.get(cookie_name(config.get_option("server.port")))
    return same(given, cookie_value(token))
