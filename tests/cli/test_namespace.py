"""The installed distribution exposes only ``lexlens`` (one import namespace)."""

from __future__ import annotations

import subprocess
import sys


def _python(code: str, cwd) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter outside the checkout (no repo root on sys.path)."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_only_lexlens_is_importable_outside_the_checkout(tmp_path):
    ok = _python(
        "import lexlens, lexlens.models, lexlens.analysis, lexlens.app;"
        "print(lexlens.load_encoder.__module__)",
        tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "lexlens.models.registry"
    for generic in ("models", "analysis", "app"):
        proc = _python(f"import {generic}", tmp_path)
        assert proc.returncode == 1
        assert f"No module named '{generic}'" in proc.stderr


def test_import_lexlens_is_light(tmp_path):
    """``import lexlens`` loads no torch and no PyTerrier: the notebook API imports on first
    use, ``lexlens.pyterrier`` only when imported."""
    code = "import sys, lexlens; print('torch' in sys.modules, 'pyterrier' in sys.modules)"
    proc = _python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False False"


def test_every_public_name_resolves_and_terms_match_the_cli(cli):
    import lexlens

    for name in lexlens.__all__:
        assert callable(getattr(lexlens, name)) or isinstance(getattr(lexlens, name), type)
    enc = lexlens.load_encoder("splade-tiny")
    result = lexlens.terms(enc, text="a cat sleeping on a book", top=5)
    run = cli(
        "terms",
        "--encoder",
        "splade-tiny",
        "--text",
        "a cat sleeping on a book",
        "--top",
        "5",
        "--json",
    )
    assert run.json() == result.to_dict()
