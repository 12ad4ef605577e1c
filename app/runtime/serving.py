"""How the app is served: every page URL answers with Streamlit's page, told where the server is,
and the server asks no outside service about this machine.

Streamlit's frontend, opened at a page's own URL (``/images``), cannot tell whether
``/images`` is the server's base path, so it first asks ``/images/_stcore/health`` and
``/images/_stcore/host-config`` (two 404 errors in the browser console) before the root.
Serving each page URL ourselves, with the backend's address set in the page
(``window.__streamlit.BACKEND_BASE_URL``, which the frontend reads before it guesses), makes
it ask the root at once: every page URL opens and reloads with no error.

Streamlit allows a websocket whose Origin it does not know when the Origin's host is this
machine's internal address (found by a UDP ``connect`` to 8.8.8.8) or external one (asked of
``checkip.amazonaws.com``), and prints those addresses when it does not know where the app is
opened. :func:`no_address_lookups` makes both "unknown": whatever a client sends, the server
makes no request beyond this machine (:class:`~lexlens.app.runtime.access.TokenGate` refuses
a foreign Origin before Streamlit sees it; an Origin of one of the app's other names is then
refused by Streamlit, never looked up).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

#: Set before Streamlit's bundle runs (a module script, so it runs after this one).
BACKEND_HINT = (
    "<script>window.__streamlit = {BACKEND_BASE_URL: window.location.origin + '/'};</script>"
)


@functools.cache
def page_html() -> bytes:
    """Streamlit's own index.html with the backend's address set first in <head>."""
    import streamlit  # streamlit only inside the app

    index = Path(streamlit.__file__).parent / "static" / "index.html"
    html = index.read_text(encoding="utf-8")
    if "<head>" not in html:
        raise RuntimeError(f"{index} has no <head>: this Streamlit version is not supported")
    return html.replace("<head>", "<head>" + BACKEND_HINT, 1).encode("utf-8")


def no_address_lookups() -> None:
    """Streamlit's lookups of this machine's internal and external address answer "unknown"
    without asking anything (see the module docstring)."""
    from streamlit import net_util  # streamlit only inside the app

    net_util.get_internal_ip = _unknown
    net_util.get_external_ip = _unknown


def _unknown() -> None:
    return None


def page_routes(url_paths: Iterable[str]) -> list:
    """Starlette routes answering ``/`` and each page's URL with :func:`page_html`."""
    from starlette.responses import Response  # the server's; the CLI never needs it
    from starlette.routing import Route  # the server's; the CLI never needs it

    async def page(_request) -> Response:
        return Response(page_html(), media_type="text/html", headers={"Cache-Control": "no-cache"})

    paths = ["/", *(f"/{p.strip('/')}" for p in url_paths)]
    return [Route(path, page, methods=["GET", "HEAD"]) for path in paths]
