"""The plain arguments of the use cases, each kind checked by one function with one wording.

Options are declared once in :mod:`.options`; the other arguments — a progress callback, an
encoder (loaded, or a registry name or checkpoint folder to load), a device, a text, a list
of texts, an image, a path — are checked here, before any model loads. A wrong one is one
:class:`~lexlens.models.base.InputError` line that names the argument (``progress must be a
function of (fraction, message), not int``), never a TypeError or AttributeError from deeper
down. An index or its folder is checked beside the index
(:func:`lexlens.analysis.collections.arguments.index_argument`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lexlens.analysis.core.devices import note_device
from lexlens.analysis.core.results import Progress
from lexlens.models.base import Encoder, InputError, Needs, pick_device
from lexlens.models.registry import encoder_card, load_encoder


def shown(value: Any) -> str:
    """A wrong value as a message shows it: a short repr of a text, else its type's name."""
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "…"
    return type(value).__name__


def progress_argument(progress: Any) -> Progress | None:
    """``progress``: ``None`` or a function of (fraction, message)."""
    if progress is None or callable(progress):
        return progress
    raise InputError(f"progress must be a function of (fraction, message), not {shown(progress)}")


def loaded_encoder(encoder: Any, argument: str = "encoder", needs: Needs | None = None) -> Encoder:
    """An encoder already loaded (``lexlens.load_encoder``), checked against ``needs``."""
    if not isinstance(encoder, Encoder):
        raise InputError(
            f"{argument} must be a loaded encoder (lexlens.load_encoder(name)), not {shown(encoder)}"
        )
    if needs is not None:
        needs.check(encoder)
    return note_device(encoder)


def encoder_or_spec(encoder: Any, argument: str = "encoder", needs: Needs | None = None) -> Any:
    """An encoder, or its spec (a registry name, a checkpoint folder) as text, checked without
    loading it: a registry name's card against ``needs`` (a folder is checked once loaded)."""

    if isinstance(encoder, Path):
        encoder = str(encoder)
    if isinstance(encoder, Encoder):
        return encoder
    if not isinstance(encoder, str) or not encoder.strip():
        raise InputError(
            f"{argument} must be an encoder, a registry name or a checkpoint folder, not "
            f"{shown(encoder)}"
        )
    card = encoder_card(encoder)
    if needs is not None and card is not None:
        needs.check(card)
    return encoder


def encoder_argument(
    encoder: Any, argument: str = "encoder", needs: Needs | None = None, device: str | None = None
) -> Encoder:
    """An encoder given loaded, or loaded from its spec on ``device``
    (:func:`lexlens.models.registry.load_encoder`); with ``needs``, a registry name is checked
    from its card before it loads, and every encoder once loaded."""

    encoder = encoder_or_spec(encoder, argument, needs)
    if isinstance(encoder, str):
        encoder = load_encoder(encoder, device=device)
    if needs is not None:
        needs.check(encoder)
    return note_device(encoder)


def device_argument(device: Any) -> str | None:
    """``device``: ``None`` (the default) or a device the encoders accept — ``cpu``, ``cuda``
    (when there is one) or ``auto`` (:func:`lexlens.models.base.pick_device`'s rule)."""
    if device is not None:
        pick_device(device)
    return device


def text_argument(value: Any, argument: str, *, optional: bool = False, about: str = "") -> Any:
    """``value``: text (or ``None`` when ``optional``); ``about`` says what it names."""
    if isinstance(value, str) or (optional and value is None):
        return value
    wanted = f"text ({about})" if about else "text"
    raise InputError(f"{argument} must be {wanted}, not {shown(value)}")


def texts_argument(texts: Any, argument: str = "texts") -> list[str]:
    """A text or a list of texts, as a list; each a string with words. Every refusal names
    the argument (``texts[1] is empty: …``)."""
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, (list, tuple)):
        raise InputError(f"{argument} must be a text or a list of texts, not {shown(texts)}")
    if not texts:
        raise InputError(f"{argument} holds no text: give at least one")
    for i, text in enumerate(texts):
        text_argument(text, f"{argument}[{i}]")
        if not text.strip():
            raise InputError(f"{argument}[{i}] is empty: type some words to encode")
    return list(texts)


def image_argument(image: Any, argument: str) -> Any:
    """``image``: a PIL image, or what :func:`lexlens.models.images.load_image` reads (an
    image file's path, its bytes, a binary file)."""
    from PIL import Image  # heavy: PIL loads on first use

    readable = isinstance(image, (str, Path, bytes, bytearray, memoryview)) or hasattr(
        image, "read"
    )
    if isinstance(image, Image.Image) or readable:
        return image
    raise InputError(
        f"{argument} must be an image file's path, its bytes, a binary file or a PIL image, "
        f"not {shown(image)}"
    )


def is_path(value: Any) -> bool:
    """Whether ``value`` can name a file or folder: text or a :class:`~pathlib.Path`, not
    blank, without a NUL character (which no file system allows)."""
    return isinstance(value, (str, Path)) and bool(str(value).strip()) and "\0" not in str(value)


def path_argument(value: Any, argument: str, wanted: str) -> str | Path:
    """``value``: a path (:func:`is_path`) that names ``wanted``."""
    if is_path(value):
        return value
    raise InputError(f"{argument} must be {wanted}, not {shown(value)}")
