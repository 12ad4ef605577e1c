"""Session-scoped real models (they are small), the CLI in-process, an isolated cache.

``LEXLENS_CACHE`` points at ``.lexlens-cache/tests`` in the checkout (git-ignored), never at
the user's ``~/.cache/lexlens``: costly derived data (the ImageNet class map, fitted
codebooks) is built once per checkout and reused by later runs. Tests of the cache itself
use their own ``tmp_path``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["LEXLENS_CACHE"] = str(ROOT / ".lexlens-cache" / "tests")
os.environ.setdefault("LEXLENS_HOME", str(ROOT / ".lexlens-cache" / "tests-home"))
# A developer's own Hugging Face cache must not add models to the pickers under test.
os.environ["HF_HUB_CACHE"] = str(ROOT / ".lexlens-cache" / "tests-hf")


@pytest.fixture(scope="session")
def splade():
    from lexlens.models import load_encoder

    return load_encoder("splade-tiny", device="cpu")


def skimage_path(name: str) -> Path:
    """A real photo shipped in the scikit-image wheel (e.g. ``chelsea.png``)."""
    import skimage

    path = Path(skimage.__file__).parent / "data" / name
    if not path.exists():
        pytest.skip(f"scikit-image does not ship {name}")
    return path


@dataclass
class CliRun:
    returncode: int
    stdout: str
    stderr: str

    def json(self):
        import json

        return json.loads(self.stdout)


@pytest.fixture
def cli(capsys):
    """Run ``lexlens ARGS…`` in this process (encoders stay loaded between calls)."""
    from lexlens.analysis.cli import main

    def run(*args: str) -> CliRun:
        capsys.readouterr()  # drop anything printed before
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return CliRun(code, out, err)

    return run


@pytest.fixture
def lexlens_cli():
    """Run the installed ``lexlens`` console script in a subprocess (smoke tests only)."""
    import subprocess
    import sys

    exe = Path(sys.executable).parent / "lexlens"

    def run(*args: str, timeout: float = 300):
        return subprocess.run(
            [str(exe), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )

    return run
