"""The served app starts and answers with no route to any other machine, and never tries one.

`make run` starts `streamlit run app/main.py` with the shipped `app/.streamlit/config.toml`.
Here the same command runs inside a network namespace that has only a loopback device
(`unshare -n`, which needs root), with no `--server.address` flag (so the server prints its
URLs as it does for a user). The server must become healthy, serve every page URL, and its
log must show no attempt to reach an outside address (Streamlit looks up the machine's
external IP at `checkip.amazonaws.com` unless the config names the browser's address).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.browser import REPO, page_urls

#: Runs inside the namespace: start the server, wait for health, fetch every page, stop.
PROBE = textwrap.dedent(
    """
    import subprocess, sys, time, urllib.request
    port, paths = sys.argv[1], sys.argv[2:]
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app/main.py", "--server.port", port],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    def get(path):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status
    status = 1
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and server.poll() is None:
            try:
                if get("/_stcore/health") == 200:
                    break
            except OSError:
                time.sleep(0.3)
        print("PAGES", [get(p) for p in paths], flush=True)
        status = 0
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=30)
        print(out.decode("utf-8", "replace"))
    sys.exit(status)
    """
)


def test_app_starts_healthy_without_a_network_and_asks_no_outside_address():
    if os.geteuid() != 0:
        pytest.skip("needs root to make a network namespace (unshare -n)")
    if not (shutil.which("unshare") and shutil.which("ip")):
        pytest.skip("needs unshare (util-linux) and ip (iproute2)")
    paths = ["/", *page_urls()]
    cmd = [
        "unshare",
        "-n",
        "sh",
        "-c",
        'ip link set lo up && exec "$@"',
        "sh",
        sys.executable,
        "-c",
        PROBE,
        "8599",
        *paths,
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert f"PAGES {[200] * len(paths)}" in log, log[-3000:]
    for attempt in ("external IP", "checkip", "amazonaws"):
        assert attempt not in log, log[-3000:]
