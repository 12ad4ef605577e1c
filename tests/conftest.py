"""Session-scoped real models (they are small) and sample inputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def splade():
    from models import load_encoder

    return load_encoder("splade-tiny", device="cpu")


def skimage_path(name: str) -> Path:
    """A real photo shipped in the scikit-image wheel (e.g. ``chelsea.png``)."""
    import skimage

    path = Path(skimage.__file__).parent / "data" / name
    if not path.exists():
        pytest.skip(f"scikit-image does not ship {name}")
    return path


@pytest.fixture
def lexlens_cli():
    """Run the installed ``lexlens`` console script; returns CompletedProcess."""
    import subprocess
    import sys

    exe = Path(sys.executable).parent / "lexlens"

    def run(*args: str, timeout: float = 300):
        return subprocess.run(
            [str(exe), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )

    return run
