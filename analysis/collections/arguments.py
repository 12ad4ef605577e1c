"""The arguments of a build's entry points checked before anything is read: each wrong type
or value is one :class:`~lexlens.models.base.InputError` that names the argument (``out
must be a folder path, not int``), never a TypeError or AttributeError from deeper down."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lexlens.models.base import Encoder, InputError


def _shown(value: Any) -> str:
    """A value as a message shows it: its type, or a short repr of a string."""
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "…"
    return type(value).__name__


def loaded_encoder(encoder: Any) -> Encoder:
    """``encoder``: a loaded encoder."""
    if not isinstance(encoder, Encoder):
        raise InputError(
            f"encoder must be a loaded encoder (lexlens.load_encoder(name)), not {_shown(encoder)}"
        )
    return encoder


def encoder_or_name(encoder: Any) -> str | Encoder:
    """``encoder``: a loaded encoder, or a registry name or checkpoint folder to load."""
    if isinstance(encoder, Encoder) or (isinstance(encoder, str) and encoder.strip()):
        return encoder
    raise InputError(
        "encoder must be a loaded encoder, a registry name or a checkpoint folder, not "
        + _shown(encoder)
    )


def path_text(value: Any, name: str, what: str) -> str | Path:
    """``value``: a path (text or :class:`~pathlib.Path`) that names something (``what``)."""
    if isinstance(value, (str, Path)) and str(value).strip() and "\0" not in str(value):
        return value
    raise InputError(f"{name} must be {what}, not {_shown(value)}")


def optional_text(value: Any, name: str) -> str | None:
    """``value``: text, or ``None``."""
    if value is None or isinstance(value, str):
        return value
    raise InputError(f"{name} must be text (or None), not {_shown(value)}")


def progress_callback(progress: Any) -> Callable[[float, str], None] | None:
    """``progress``: ``None`` or a callable taking (fraction, message)."""
    if progress is None or callable(progress):
        return progress
    raise InputError(f"progress must be a function of (fraction, message), not {_shown(progress)}")


def data_roots(roots: Any) -> list[str | Path] | None:
    """``roots``: ``None`` (no restriction) or a list of folder paths."""
    if roots is None:
        return None
    listed = isinstance(roots, Sequence) and not isinstance(roots, (str, bytes))
    if listed and all(isinstance(r, (str, Path)) and str(r).strip() for r in roots):
        return list(roots)
    raise InputError(f"roots must be a list of folder paths (or None), not {_shown(roots)}")


def uploaded_files(files: Any) -> list[tuple[str, bytes]]:
    """``files``: ``None`` or a list of (file name, bytes) pairs."""
    if files is None:
        return []
    if isinstance(files, (list, tuple)):
        pairs = [f for f in files if isinstance(f, (list, tuple)) and len(f) == 2]
        if len(pairs) == len(files) and all(
            isinstance(n, str) and isinstance(d, (bytes, bytearray)) for n, d in pairs
        ):
            return [(n, d) for n, d in pairs]
    raise InputError(f"files must be a list of (file name, bytes) pairs, not {_shown(files)}")


def one_of(value: Any, name: str, choices: Sequence[str]) -> str:
    """``value``: one of ``choices``."""
    if isinstance(value, str) and value in choices:
        return value
    raise InputError(f"{name} {value!r}: one of {', '.join(choices)}")
