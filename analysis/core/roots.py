"""Data roots: the folders a served app may read from when a user types a path on the server.

Jupyter's rule for a shared research tool: file access stays inside the root directories the
server was started with. A typed path is resolved (``~`` expanded, relative to the server's
working folder, every symbolic link followed) and accepted only when it lies inside one of
the roots, themselves resolved the same way; anything else is refused in one line that names
the roots and how to add one.

An encoder spec typed into a page names more than one path: :func:`spec_inside_roots`
splits it as the loader does (:func:`lexlens.models.registry.parse_spec`: a checkpoint
folder, ``+faiss:FILE``, ``+pq:M:CORPUS``) and holds every path it names to the roots —
each file of the checkpoint folder once its links are followed, the files its
``lexlens_dense_pq.json`` names, the suffix's file (a regular file only) — before anything
is loaded, and returns the spec with those paths resolved, which is what is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from lexlens.analysis.core.inputs import regular_file, user_path
from lexlens.models.base import InputError
from lexlens.models.dense_config import META_FILE, read_spec
from lexlens.models.hub import looks_like_hub_id
from lexlens.models.registry import REGISTRY, parse_spec

#: Most entries a checkpoint folder may hold for its links to be checked (a model's folder
#: holds a few dozen).
MAX_CHECKPOINT_ENTRIES = 10_000


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
    if _is_inside(resolved, real_roots):
        return resolved
    shown = ", ".join(str(r) for r in real_roots) or "none"
    raise InputError(
        f"{label} {raw!r} is outside the data roots ({shown}): start the app with "
        "--data-root DIR to read from another folder"
    )


def spec_inside_roots(spec: str, roots: Sequence[str | Path], label: str = "encoder") -> str:
    """An encoder spec typed into a page, every path it names checked against ``roots``
    (see the module docstring): the spec to load, its paths resolved. A registry name and a
    Hugging Face id of the local hub cache name no path of the user's and pass as they are."""

    raw = str(spec).strip()
    if not raw:
        raise InputError(f"{label}: give a registry name or a checkpoint folder on the server")
    parsed = parse_spec(raw)
    if parsed.codebook is None:
        return _base_inside(raw, roots, label)
    base = spec_inside_roots(parsed.base, roots, label)
    file = parsed.file
    if file is not None:
        what = "faiss index" if parsed.codebook == "faiss" else "corpus"
        file = str(_file_inside(file, roots, f"{label}: the {what}"))
    return parsed.with_paths(base, file)


def _base_inside(raw: str, roots: Sequence[str | Path], label: str) -> str:
    """A spec's base: a registry name or a cached hub id as it is, else a checkpoint folder
    inside the roots, with each of its files and every path its dense spec names."""

    if raw in REGISTRY:
        return raw
    if looks_like_hub_id(raw) and not Path(raw).expanduser().exists():
        return raw  # read from the local hub cache only, as the loader does
    folder = inside_roots(raw, roots, label)
    _checkpoint_inside(folder, roots, label)
    return str(folder)


def _checkpoint_inside(folder: Path, roots: Sequence[str | Path], label: str) -> None:
    """Every entry of a checkpoint folder inside the roots once its links are followed, and
    the folder and files its ``lexlens_dense_pq.json`` names."""

    if not folder.is_dir():
        return  # the loader says what it is
    real_roots = [Path(os.path.realpath(user_path(r, f"data root {r}"))) for r in roots]
    seen = 0
    for top, folders, files in os.walk(folder, followlinks=False):
        for name in [*folders, *files]:
            seen += 1
            if seen > MAX_CHECKPOINT_ENTRIES:
                raise InputError(
                    f"{label} {str(folder)!r}: holds over {MAX_CHECKPOINT_ENTRIES:,} files and "
                    "folders: not a checkpoint folder"
                )
            entry = Path(top) / name
            if not _is_inside(Path(os.path.realpath(entry)), real_roots):
                shown = entry.relative_to(folder).as_posix()
                raise InputError(
                    f"{label} {str(folder)!r}: {shown} is a link to a place outside the data "
                    "roots: refused"
                )
    if not (folder / META_FILE).is_file():
        return
    spec = read_spec(folder)
    if "base_dir" in spec:
        base = inside_roots(spec["base_dir"], roots, f"{label}: {META_FILE}'s base_model")
        _checkpoint_inside(base, roots, label)
    if "faiss_index" in spec:
        _file_inside(spec["faiss_index"], roots, f"{label}: {META_FILE}'s faiss_index")
    corpus = spec.get("fit", {}).get("corpus", "default")
    if corpus != "default":
        _file_inside(corpus, roots, f"{label}: {META_FILE}'s corpus")


def _file_inside(path: str | Path, roots: Sequence[str | Path], label: str) -> Path:
    """A file a spec names: inside the roots (links followed) and a regular file."""
    resolved = inside_roots(path, roots, label)
    regular_file(resolved, f"{label} {str(path)!r}")
    return resolved


def _is_inside(path: Path, real_roots: Sequence[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in real_roots)
