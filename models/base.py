"""The encoder contract every Lexlens model family implements.

An encoder maps texts and/or images to a :class:`LexicalEncoding`: weights over a
vocabulary, pooled from per-unit rows (tokens or image patches) that are kept so the
workbench can show which unit produced which term.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from PIL import Image

# Nothing in Lexlens may reach a model hub at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


class LexlensError(Exception):
    """A user-facing error: bad input, a missing path, a malformed checkpoint.

    The message is one line meant for the person who caused it; the CLI prints it and
    exits 2, the app shows it with ``st.error``.
    """


class EncoderLoadError(LexlensError):
    """A checkpoint or packaged model could not be loaded (names the file and key)."""


class ModalityError(LexlensError):
    """The encoder does not handle the requested modality (e.g. images on a text model)."""


class InputError(LexlensError):
    """An input (text, image, file) is empty, unreadable or out of bounds."""


Normalization = str  # "none" | "l2"


@dataclass(frozen=True)
class LexicalEncoding:
    """One input's representation over the vocabulary.

    Attributes:
        weights: ``[|V|]`` float32, the pooled ``V(x)`` (ungated).
        unit_weights: ``[U, |V|]`` float32, per token or patch before pooling, or ``None``
            when the caller asked not to keep them (large corpora).
        units: labels of the units (input tokens, or ``"r{row}c{col}"`` patch ids).
        grid: ``(rows, cols)`` for images, ``None`` for text.
        input_ids: token ids of a text input (``None`` for images).
        normalization: what pooling applies after the max over units: ``"none"`` or
            ``"l2"``; :func:`pool_units` re-applies it for any subset of units.
        truncated: the text was longer than the encoder's limit and was cut.
        crop_box: for images, the ``(x0, y0, x1, y1)`` fractions of the original image
            the encoder actually saw (``(0, 0, 1, 1)`` when it saw all of it).
    """

    weights: np.ndarray
    unit_weights: np.ndarray | None
    units: list[str]
    grid: tuple[int, int] | None = None
    input_ids: list[int] | None = None
    normalization: Normalization = "none"
    truncated: bool = False
    crop_box: tuple[float, float, float, float] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def pool_units(rows: np.ndarray, normalization: Normalization) -> np.ndarray:
    """Max-pool unit rows ``[n, |V|]`` and apply the encoding's normalisation."""
    if rows.ndim != 2 or rows.shape[0] == 0:
        raise InputError("select at least one unit (token or patch) to pool")
    pooled = rows.max(axis=0)
    if normalization == "l2":
        norm = float(np.linalg.norm(pooled))
        if norm > 0:
            pooled = pooled / norm
    return pooled.astype(np.float32, copy=False)


def pick_device(device: str | None = None) -> str:
    """``cuda`` when available and not overridden, else ``cpu``; validates the name."""
    import torch

    if device is None or device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise LexlensError(f"device {device!r} requested but no CUDA GPU is available")
    if device != "cpu" and not device.startswith("cuda"):
        raise LexlensError(f"unknown device {device!r}: use 'cpu', 'cuda' or 'auto'")
    return device


class Encoder:
    """Base class: a loaded model, shared read-only between callers.

    Subclasses set ``name``, ``vocab``, ``device``, ``modalities`` and implement the
    encode methods they support. Encoding never mutates the encoder, so one instance
    can serve concurrent app sessions.
    """

    name: str = "encoder"
    vocab: list[str]
    device: str = "cpu"
    modalities: frozenset[str] = frozenset()
    #: Token limit of the text tower (longer texts are truncated with a notice).
    max_length: int = 512
    #: Human-readable origin of the weights (shown in `lexlens encoders`).
    source: str = ""
    #: Whole words the encoder's output is known to spell in word pieces (e.g. the class
    #: names of a label-space image encoder); evidence for merging pieces in displays.
    known_words: frozenset[str] = frozenset()

    def encode_texts(
        self, texts: list[str], side: str = "query", *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        """Encode texts; ``side`` picks the query or document tower of a bi-encoder."""
        raise ModalityError(f"encoder {self.name!r} does not encode text into the vocabulary")

    def encode_images(
        self, images: list[Image.Image], *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        """Encode PIL images (any mode/size; each encoder preprocesses as it needs)."""
        raise ModalityError(f"encoder {self.name!r} does not encode images")

    def static_embeddings(self) -> tuple[np.ndarray, list[str]] | None:
        """The text tower's input word-embedding table ``[n, d]`` and the token of each row.

        Context-free token vectors (D2S's ``f_enc`` for Semantic@k); ``None`` when the
        encoder has no such table.
        """
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, device={self.device!r})"


def check_texts(texts: list[str]) -> list[str]:
    """Reject empty input with a clear message; returns the texts unchanged."""
    if isinstance(texts, str):
        raise InputError("pass a list of texts, not a single string")
    if len(texts) == 0:
        raise InputError("no texts given")
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"text #{i + 1} is empty: type some words to encode")
    return texts
