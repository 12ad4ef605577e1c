"""Where the workspace keeps its collections: ``LEXLENS_HOME`` (default ``~/.lexlens``), with
``collections/<name>`` (an index folder) and ``sources/<name>`` (the files uploaded for
it). The stored format (:mod:`.store`) finds a collection by its name here; the workspace
(:mod:`.workspace`) builds, lists and deletes them."""

from __future__ import annotations

import os
from pathlib import Path


def workspace() -> Path:
    """The workspace folder (``LEXLENS_HOME``, default ``~/.lexlens``)."""
    return Path(os.environ.get("LEXLENS_HOME") or Path.home() / ".lexlens").expanduser()


def collections_dir() -> Path:
    """Where the app keeps stored collections (one index folder per name)."""
    return workspace() / "collections"


def sources_dir() -> Path:
    """Where the app keeps uploaded sources (the images thumbnails are drawn from)."""
    return workspace() / "sources"


def stored_names(home: Path | None = None) -> list[str]:
    """The names of the folders under ``collections/`` (sorted; hidden ones left out)."""
    root = (home or workspace()) / "collections"
    if not root.is_dir():
        return []
    return sorted(e.name for e in root.iterdir() if not e.name.startswith(".") and e.is_dir())
