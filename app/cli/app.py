"""``lexlens app``: start the Streamlit app from the installed package (what ``make run`` does).

It listens on 127.0.0.1 unless ``--host`` says otherwise; then it needs a token (generated
here, or ``LEXLENS_TOKEN``), printed as the URL to open. Paths typed into pages are read only
inside the data roots: ``LEXLENS_HOME/sources`` and the current folder, and each
``--data-root``. It answers only to its own host names and those given with
``--allow-host``. Every option is checked, and the address and port bound once, before
anything is printed. See :mod:`lexlens.app.runtime.access` for the rules.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import re
import secrets
import socket
import sys
from pathlib import Path
from urllib.parse import urlencode

from lexlens.analysis.core.inputs import user_path
from lexlens.app.cli import common
from lexlens.app.runtime import access, runs
from lexlens.models.base import InputError

DEFAULT_PORT = 8501

COMMAND = common.Command(
    "start the app (127.0.0.1 unless --host; a token when it listens beyond it)",
    json_and_device=False,
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Where the server listens and which folders pages may read."""
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="default 8501")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only); any other "
        "address needs the printed token",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=None,
        metavar="NAME",
        help="another host name the app answers to (repeatable), for a browser that opens it "
        "by that name; it answers only to localhost, 127.0.0.1, ::1 and the --host address "
        "otherwise (a web page under another name cannot drive it: DNS rebinding)",
    )
    parser.add_argument(
        "--data-root",
        action="append",
        default=None,
        metavar="DIR",
        help="a folder whose files pages may read, besides LEXLENS_HOME/sources and the "
        "current folder, which they always may (repeatable)",
    )


def launch_plan(args: argparse.Namespace) -> tuple[list[str], dict[str, str], str]:
    """The command, the environment and the URL to open: everything checked first."""
    if not 1 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: a TCP port is 1–65535")
    host = args.host.strip()
    if not host:
        raise InputError("--host: give an address (127.0.0.1 keeps the app on this machine)")
    roots = list(dict.fromkeys(str(p.resolve()) for p in access.data_roots()))  # the defaults
    for raw in args.data_root or []:
        folder = user_path(raw, f"--data-root {raw}")
        if not folder.is_dir():
            raise InputError(f"--data-root {raw}: not a folder")
        if str(folder.resolve()) not in roots:
            roots.append(str(folder.resolve()))
    for root in roots:  # the server gets them joined by os.pathsep: one in a name would split it
        if os.pathsep in root:
            raise InputError(
                f"--data-root {root}: a data root cannot hold {os.pathsep!r} (it separates "
                "the roots the server is given): rename the folder or give another"
            )
    names = [host_name_argument(raw) for raw in args.allow_host or []]
    runs.budget_bytes()  # LEXLENS_RUNS_BUDGET_MB is checked before the server starts
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env[access.ROOTS_ENV] = os.pathsep.join(roots)
    env[access.ALLOWED_HOSTS_ENV] = ",".join(names)
    token = access.app_token()
    if not access.is_local(host) and token is None:
        token = secrets.token_urlsafe(24)
    env.pop(access.TOKEN_ENV, None)
    if token is not None:
        env[access.TOKEN_ENV] = token
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{args.port}/" + (f"?{urlencode({'token': token})}" if token else "")
    main = Path(__file__).resolve().parents[1] / "main.py"
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(main),
        "--server.address",
        host,
        "--server.port",
        str(args.port),
        "--browser.serverAddress",
        "localhost" if access.is_local(host) else host,
    ]
    return command, env, url


#: A host name as DNS spells one (RFC 1123 labels, dot-separated).
_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)


def host_name_argument(raw: str) -> str:
    """An ``--allow-host`` value: a host name or an address, no port or scheme."""
    name = raw.strip().lower()
    try:
        return str(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        pass
    if not _HOST_NAME.match(name):
        raise InputError(
            f"--allow-host {raw[:60]!r}: give a host name or an address (no port, no scheme, "
            "no wildcard), e.g. --allow-host mybox.lan"
        )
    return name


def check_can_listen(host: str, port: int) -> None:
    """Bind ``host``:``port`` as the server will (its socket options), then let it go: a port
    in use or an address not of this machine is one line before anything says "open"."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as Streamlit's server
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            if os.name != "nt":
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
            probe.listen(1)
    except socket.gaierror as exc:
        raise InputError(f"--host {host}: not an address to listen on ({exc.strerror})") from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            why = (
                f"--port {port}: already in use on {host}: stop what listens there or give "
                "another --port"
            )
        elif exc.errno == errno.EADDRNOTAVAIL:
            why = f"--host {host}: not an address of this machine"
        elif exc.errno == errno.EACCES:
            why = f"--port {port}: not allowed to this user (below 1024): give another --port"
        else:
            why = f"--host {host} --port {port}: cannot listen there ({exc.strerror})"
        raise InputError(why) from None


def run(args: argparse.Namespace) -> None:
    command, env, url = launch_plan(args)
    check_can_listen(args.host.strip(), args.port)
    roots = env[access.ROOTS_ENV].split(os.pathsep)
    defaults = {str(p.resolve()) for p in access.data_roots()}
    given = [r for r in roots if r not in defaults]
    where = ", ".join(r for r in roots if r in defaults) + " (LEXLENS_HOME/sources and this folder)"
    if given:
        where += f" and {', '.join(given)} (--data-root)"
    print(f"Lexlens: open {url}", flush=True)
    print(f"Lexlens: pages read server files only inside {where}", flush=True)
    os.execve(command[0], command, env)  # the server takes this process over (signals too)
