"""Cold start: from ``make run`` (a fresh ``streamlit run app/main.py``) to the first word cloud.

A headless system Chromium is started first (a user's browser is already open); then the
clock starts, Streamlit is spawned exactly as ``make run`` spawns it, the root URL is opened
as soon as the server answers its health check, and the clock stops when the Text page's
word-cloud image has decoded (``naturalWidth > 0``) and is visible. Phases are reported too:
server healthy, first page content drawn, word cloud visible. The operating system's file
cache is warm (the bench runs once before measuring), so this is a warm-disk cold start:
a fresh Python process that imports and loads everything it needs. ``COLDSTART_APP=path``
measures another entry script the same way (to try a variant before changing the app).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.run import figure
from tests.browser import CHROMIUM, CHROMIUM_ARGS, REPO, free_port, healthy, stop

GOAL_S = 8.0
CLOUD = '[data-testid="stImage"] img'


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (Linux /proc), or None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_once(page, *, timeout: float = 180.0) -> dict[str, float]:
    """One cold start; seconds from spawning Streamlit to each phase, and the server's CPU
    seconds until the cloud showed (less sensitive than wall time to other load)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    streamlit = Path(sys.executable).parent / "streamlit"
    cmd = [
        str(streamlit),
        "run",
        os.environ.get("COLDSTART_APP", "app/main.py"),
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    with tempfile.TemporaryFile() as log:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            while not healthy(url):
                if proc.poll() is not None or time.perf_counter() - start > timeout:
                    log.seek(0)
                    tail = log.read().decode(errors="replace")[-2000:]
                    raise RuntimeError(f"streamlit did not start:\n{tail}")
                time.sleep(0.05)
            up = time.perf_counter() - start
            page.goto(url, wait_until="domcontentloaded")
            page.locator('[data-testid="stSidebar"]').first.wait_for(timeout=timeout * 1000)
            drawn = time.perf_counter() - start
            page.wait_for_function(
                f"""() => {{
                    const img = document.querySelector('{CLOUD}');
                    return img && img.complete && img.naturalWidth > 0
                        && img.getBoundingClientRect().height > 0;
                }}""",
                timeout=timeout * 1000,
                polling=50,
            )
            cloud = time.perf_counter() - start
            cpu = _cpu_seconds(proc.pid)
        finally:
            stop(proc)
    return {
        "server_healthy_s": up,
        "first_content_s": drawn,
        "word_cloud_s": cloud,
        "server_cpu_s": cpu,
    }


def measure(runs: int = 3) -> list[dict[str, float]]:
    """``runs`` cold starts after one unmeasured warm-up (fills the OS file cache)."""
    from playwright.sync_api import sync_playwright

    results = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
        )
        try:
            for i in range(runs + 1):
                context = browser.new_context(viewport={"width": 1280, "height": 1000})
                try:
                    one = measure_once(context.new_page())
                finally:
                    context.close()
                if i:  # the first run only warms the file cache
                    results.append(one)
                print(f"  cold start {i}: {one}", file=sys.stderr, flush=True)
        finally:
            browser.close()
    return results


def _child_seconds(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, its children included) of one fresh process."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run(
        command,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
    )
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu


def terms_start_up(runs: int = 5) -> dict:
    """`lexlens terms --text` against importing torch and transformers alone, each run
    ``runs`` times in fresh processes (after one warm-up of each): the CPU ratio of the
    medians (the machine is shared; wall times in details)."""
    lexlens = str(Path(sys.executable).parent / "lexlens")
    commands = {
        "imports": [sys.executable, "-c", "import torch, transformers"],
        "terms": [
            lexlens,
            "terms",
            "--encoder",
            "splade-tiny",
            "--text",
            "a small dog runs along the beach at sunset",
        ],
    }
    measured: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for i in range(runs + 1):
        for name, command in commands.items():
            one = _child_seconds(command)
            if i:  # the first round fills the file cache
                measured[name].append(one)
    medians = {
        f"{name}_{kind}_s": statistics.median(r[k] for r in rows)
        for name, rows in measured.items()
        for k, kind in ((0, "wall"), (1, "cpu"))
    }
    ratio = medians["terms_cpu_s"] / medians["imports_cpu_s"]
    return figure(
        "cli_terms_over_torch_transformers_imports",
        ratio,
        "x",
        goal=("<=", 1.5),
        measured_with=f"median CPU seconds of {runs} fresh `lexlens terms --encoder splade-tiny "
        "--text …` processes over those of `python -c 'import torch, transformers'` (after "
        "one warm-up each); the command imports torch and the tokenizers library, never "
        "transformers' modeling code",
        details={**medians, "runs": measured, "load_average_1min": os.getloadavg()[0]},
    )


def run() -> list[dict]:
    start_up = terms_start_up()
    if not CHROMIUM.exists():
        return [
            start_up,
            figure(
                "cold_start_to_first_word_cloud",
                None,
                "s",
                goal=("<=", GOAL_S),
                measured_with=f"skipped: {CHROMIUM} not found (make browser)",
            ),
        ]
    runs = measure()
    cloud = [r["word_cloud_s"] for r in runs]
    return [
        start_up,
        figure(
            "cold_start_to_first_word_cloud",
            statistics.median(cloud),
            "s",
            goal=("<=", GOAL_S),
            measured_with="median of 3 fresh `streamlit run app/main.py` processes (after one "
            "warm-up run), headless Chromium on the root URL, until the Text page's word cloud "
            "image has decoded and is visible",
            details={
                "runs": runs,
                "min_s": min(cloud),
                "max_s": max(cloud),
                "load_average_1min": os.getloadavg()[0],
            },
        ),
    ]


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
