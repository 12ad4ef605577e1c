"""Data roots: the folders a served app may read from when a user types a path on the server.

Jupyter's rule for a shared research tool: file access stays inside the root directories the
server was started with. A typed path is resolved (``~`` expanded, relative to the server's
working folder, every symbolic link followed) and accepted only when it lies inside one of
the roots, themselves resolved the same way; anything else is refused in one line that names
the roots and how to add one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from lexlens.analysis.core.inputs import user_path
from lexlens.models.base import InputError


def inside_roots(path: str | Path, roots: Sequence[str | Path], label: str = "path") -> Path:
    """``path`` resolved (links followed), when it lies inside one of ``roots``; else an
    :class:`InputError` naming the roots."""
    raw = str(path).strip()
    if not raw:
        raise InputError(f"{label}: give a path on the server")
    if "\0" in raw:
        raise InputError(f"{label}: a path cannot contain a NUL character")
    resolved = Path(os.path.realpath(user_path(raw, f"{label} {raw!r}")))
    real_roots = [Path(os.path.realpath(user_path(r, f"data root {r}"))) for r in roots]
    if any(resolved == r or resolved.is_relative_to(r) for r in real_roots):
        return resolved
    shown = ", ".join(str(r) for r in real_roots) or "none"
    raise InputError(
        f"{label} {raw!r} is outside the data roots ({shown}): start the app with "
        "--data-root DIR to read from another folder"
    )
