"""Session-scoped real models (they are small), the CLI in-process, an isolated cache.

``LEXLENS_CACHE`` points at ``.lexlens-cache/tests`` in the checkout (git-ignored), never at
the user's ``~/.cache/lexlens``: costly derived data (the ImageNet class map, fitted
codebooks) is built once per checkout and reused by later runs. Tests of the cache itself
use their own ``tmp_path``.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["LEXLENS_CACHE"] = str(ROOT / ".lexlens-cache" / "tests")
os.environ.setdefault("LEXLENS_HOME", str(ROOT / ".lexlens-cache" / "tests-home"))
# A developer's own Hugging Face cache must not add models to the pickers under test.
os.environ["HF_HUB_CACHE"] = str(ROOT / ".lexlens-cache" / "tests-hf")
# A shell without job control starts a background command with Ctrl-C ignored (`make test &`),
# and its children inherit that: the tests of what an interrupt does need it delivered.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def splade():
    from lexlens.models import load_encoder

    return load_encoder("splade-tiny", device="cpu")


@pytest.fixture(scope="module")
def three_texts_index(tmp_path_factory, splade) -> Path:
    """Three texts indexed with splade-tiny (d1 a dog on the beach, d2 espresso, d3 a
    rocket; no stored queries): the smallest collection an argument check needs. One per
    test module."""
    from lexlens.analysis.collections.indexing import build_index

    folder = tmp_path_factory.mktemp("three-texts")
    (folder / "items.csv").write_text(
        "id,text\nd1,a dog running on the beach\nd2,espresso in a small cup\nd3,a rocket\n"
    )
    build_index(splade, folder / "items.csv", folder / "ix")
    return folder / "ix"


@pytest.fixture(scope="session")
def effnet():
    from lexlens.models import load_encoder

    return load_encoder("efficientnet-lite0-lexical", device="cpu")


@pytest.fixture
def downloads(monkeypatch) -> dict[str, bytes]:
    """Every download button's payload by file name, as a page handed it to Streamlit.

    A spy on Streamlit's in-memory media storage (AppTest keeps files there); the call
    goes through unchanged.
    """
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    seen: dict[str, bytes] = {}
    original = MemoryMediaFileStorage.load_and_get_id

    def spy(self, path_or_data, mimetype, kind, filename=None):
        if filename is not None:
            data = path_or_data.encode("utf-8") if isinstance(path_or_data, str) else path_or_data
            seen[filename] = bytes(data)
        return original(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", spy)
    return seen


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
    from lexlens.app.cli import main

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
