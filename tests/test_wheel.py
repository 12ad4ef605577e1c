"""The wheel is the product: built from this tree, installed into a fresh virtual environment
outside the checkout, it imports every module, runs ``lexlens terms``, ``lexlens index`` and
``lexlens evaluate`` on the packaged BEIR sample, and serves the app until its health check
answers.

The fresh environment gets Lexlens only from the wheel (``--no-deps``); its dependencies —
torch, transformers and the rest, gigabytes that would come from PyPI — are read from this
test's own environment through a ``.pth`` path line (which does not bring this checkout's
editable install: a path line's own ``.pth`` files are not processed). The test checks that
``lexlens`` is imported from the fresh environment and that every dependency the wheel
declares is satisfied there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from tests.browser import free_port, healthy
from tests.helpers import ROOT

pytestmark = pytest.mark.slow

#: Imports every module of the installed package (page scripts are run by Streamlit and
#: ``__main__`` by ``python -m``, not imported) and prints where lexlens came from and how
#: many modules it imported.
IMPORT_ALL = """
import importlib, json, pkgutil, lexlens
names = [m.name for m in pkgutil.walk_packages(lexlens.__path__, "lexlens.")
         if ".app_pages" not in m.name and not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
print(json.dumps({"file": lexlens.__file__, "modules": len(names)}))
"""
#: Every requirement the installed wheel declares (extras aside) is met in the environment.
CHECK_REQUIREMENTS = """
import importlib.metadata as md
from packaging.requirements import Requirement
missing = []
for text in md.requires("lexlens") or []:
    req = Requirement(text)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    try:
        version = md.version(req.name)
    except md.PackageNotFoundError:
        missing.append(text)
        continue
    if version not in req.specifier:
        missing.append(f"{text} (found {version})")
print("\\n".join(missing))
"""


def _tree_copy(dest: Path) -> Path:
    """The files of this tree that git tracks or would track (no venv, no build output)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for name in listed:
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_wheel_installed_outside_the_checkout_works(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is needed to list the tree's files")
    source = _tree_copy(tmp_path / "src")
    wheels = tmp_path / "wheels"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(source),
        ],
        tmp_path,
        dict(os.environ),
    )
    (wheel,) = wheels.glob("lexlens-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, dict(os.environ))
    python = venv / "bin" / "python"
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            tmp_path,
            dict(os.environ),
        ).strip()
    )
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(
        [str(python), "-m", "pip", "install", "--no-deps", "-q", str(wheel)],
        tmp_path,
        dict(os.environ),
    )

    work = tmp_path / "elsewhere"  # no checkout anywhere above it
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        LEXLENS_HOME=str(tmp_path / "home"),
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    )
    imported = json.loads(_run([str(python), "-c", IMPORT_ALL], work, env))
    assert Path(imported["file"]).is_relative_to(site), imported  # the wheel, not the checkout
    assert imported["modules"] > 100
    assert _run([str(python), "-c", CHECK_REQUIREMENTS], work, env).strip() == ""

    lexlens = str(venv / "bin" / "lexlens")
    terms = json.loads(
        _run(
            [
                lexlens,
                "terms",
                "--encoder",
                "splade-tiny",
                "--text",
                "a cat sleeping on a book",
                "--json",
            ],
            work,
            env,
        )
    )
    assert terms["merged_terms"][0]["token"] == "cat"
    sample = _run(
        [
            str(python),
            "-c",
            "from lexlens.analysis.core.samples import "
            "sample_benchmark as s; print(s('imagenet_beir'))",
        ],
        work,
        env,
    ).strip()
    assert Path(sample).is_relative_to(site)
    _run(
        [lexlens, "index", "--encoder", "splade-tiny", "--source", sample, "--out", "ix"], work, env
    )
    evaluated = json.loads(_run([lexlens, "evaluate", "--index", "ix", "--json"], work, env))
    assert evaluated["settings"]["queries"] == 60
    assert 0.0 < evaluated["metrics"]["aggregate"]["nDCG@10"] <= 1.0

    port = free_port()
    log = (tmp_path / "app.log").open("wb")
    server = subprocess.Popen(
        [lexlens, "app", "--port", str(port)],
        cwd=work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while not healthy(f"http://127.0.0.1:{port}"):
            assert server.poll() is None, (tmp_path / "app.log").read_text()
            assert time.monotonic() < deadline, "the installed app did not answer in time"
            time.sleep(0.3)
        served = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
        main = next(Path(a.decode()) for a in served if a.endswith(b"main.py"))
        assert main.is_relative_to(site)  # the app served from the installed package
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()
