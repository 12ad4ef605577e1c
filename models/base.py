"""The encoder contract every Lexlens model family implements.

An encoder maps texts and/or images to a :class:`LexicalEncoding`: weights over a
vocabulary, pooled from per-unit rows (tokens or image patches) that are kept so the
workbench can show which unit produced which term.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

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


#: Reports progress: the done fraction of the whole work (0..1) and a short message. Every
#: step that takes long accepts one; a job may raise from it to cancel the work. The one
#: progress type of Lexlens (``lexlens.analysis.core.results`` re-exports it).
Progress = Callable[[float, str], None]


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
    import torch  # heavy: torch loads on first use

    if device is not None and not isinstance(device, str):
        raise InputError(f"device must be 'cpu', 'cuda' or 'auto', not {type(device).__name__}")
    if device is None or device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise LexlensError(f"device {device!r} requested but no CUDA GPU is available")
    if device != "cpu" and not device.startswith("cuda"):
        raise LexlensError(f"unknown device {device!r}: use 'cpu', 'cuda' or 'auto'")
    return device


class Capability(StrEnum):
    """What an encoder can do; each analysis states the capabilities it needs."""

    #: texts → weights over a vocabulary (``encode_texts``)
    TEXT_LEXICAL = "text-lexical"
    #: images → weights over a vocabulary, one row per patch (``encode_images``)
    IMAGE_LEXICAL = "image-lexical"
    #: texts → dense vectors (``embed_texts``, ``dim``)
    DENSE = "dense"
    #: dense vectors → discrete codes of a product quantiser (``quantizer``, ``codes``)
    QUANTISED = "quantised"
    #: a differentiable path from input word embeddings to the sub-vectors (Integrated
    #: Gradients: ``tokenizer``, ``word_embeddings``, ``tokenize``, ``forward_embeds``,
    #: ``split_torch``)
    DIFFERENTIABLE = "differentiable"
    #: dense feature vectors (a frozen backbone's output, e.g. BLIP/ALBEF) → weights over a
    #: vocabulary (``encode_features``, ``feature_dim``, ``tokenize_texts``): a D2S head
    FEATURE_LEXICAL = "feature-lexical"


#: How each capability reads in messages and on encoder cards.
CAPABILITY_TEXT = {
    Capability.TEXT_LEXICAL: "text → vocabulary weights",
    Capability.IMAGE_LEXICAL: "image → vocabulary weights",
    Capability.DENSE: "text → dense vector",
    Capability.QUANTISED: "discrete codes (product quantiser)",
    Capability.DIFFERENTIABLE: "gradients to input words",
    Capability.FEATURE_LEXICAL: "dense features → vocabulary weights",
}


@dataclass(frozen=True)
class Needs:
    """What an analysis needs of an encoder (LIT's ``is_compatible``), checked in one place.

    ``all_of``: every capability is required; ``any_of``: at least one of them (e.g. terms
    of a text *or* an image).
    """

    analysis: str
    all_of: frozenset[Capability] = frozenset()
    any_of: frozenset[Capability] = frozenset()

    def is_compatible(self, capabilities: frozenset[Capability] | Encoder | EncoderCard) -> bool:
        """Whether an encoder (or its card, or a set of capabilities) meets these needs."""
        caps = capabilities if isinstance(capabilities, frozenset) else capabilities.capabilities
        return self.all_of <= caps and (not self.any_of or bool(self.any_of & caps))

    def check(self, encoder: Encoder | EncoderCard) -> None:
        """Raise :class:`ModalityError` naming what is missing, in one line.

        A registry card can be checked before its encoder loads.
        """
        if not hasattr(encoder, "capabilities"):
            raise InputError(
                f"{self.analysis} needs a loaded encoder (lexlens.load_encoder(name)), not "
                f"{type(encoder).__name__}"
            )
        if self.is_compatible(encoder):
            return
        missing = sorted(self.all_of - encoder.capabilities) or sorted(self.any_of)
        has = ", ".join(CAPABILITY_TEXT[c] for c in sorted(encoder.capabilities)) or "nothing"
        joiner = " and " if self.all_of - encoder.capabilities else " or "
        wants = joiner.join(CAPABILITY_TEXT[c] for c in missing)
        raise ModalityError(
            f"{self.analysis} needs an encoder with {wants}; {encoder.name!r} offers {has}"
        )


@dataclass(frozen=True)
class EncoderCard:
    """What the registry knows about an encoder before loading it."""

    name: str
    summary: str
    capabilities: frozenset[Capability]
    vocab_size: int | None
    weights: str
    licence: str

    @property
    def modalities(self) -> frozenset[str]:
        """Input modalities the encoder takes ("text", "image", "features")."""
        return modalities_of(self.capabilities)

    def to_dict(self) -> dict:
        """The card as ``lexlens encoders`` prints it (capabilities as sorted strings)."""
        return {
            "name": self.name,
            "summary": self.summary,
            "modalities": sorted(self.modalities),
            "capabilities": sorted(str(c) for c in self.capabilities),
            "vocab_size": self.vocab_size,
            "weights": self.weights,
            "licence": self.licence,
        }


def modalities_of(capabilities: frozenset[Capability]) -> frozenset[str]:
    """Input modalities implied by capabilities ("text", "image", "features")."""
    out = set()
    if capabilities & {Capability.TEXT_LEXICAL, Capability.DENSE}:
        out.add("text")
    if Capability.IMAGE_LEXICAL in capabilities:
        out.add("image")
    if Capability.FEATURE_LEXICAL in capabilities:
        out.add("features")
    return frozenset(out)


class Encoder:
    """Base class: a loaded model, shared read-only between callers.

    Subclasses set ``name``, ``device``, ``capabilities`` (and ``vocab`` when lexical) and
    implement the members of the protocols below for each capability they declare.
    Encoding never mutates the encoder, so one instance can serve concurrent app sessions.
    """

    name: str = "encoder"
    vocab: list[str]
    device: str = "cpu"
    capabilities: frozenset[Capability] = frozenset()
    #: Token limit of the text tower (longer texts are truncated with a notice).
    max_length: int = 512
    #: Human-readable origin of the weights (shown in `lexlens encoders`).
    source: str = ""
    #: Whole words the encoder's output is known to spell in word pieces (e.g. the class
    #: names of a label-space image encoder); evidence for merging pieces in displays.
    known_words: frozenset[str] = frozenset()
    #: Whether the nonparametric (bag-of-words) query of this model is L2-normalised, as
    #: the checkpoint's configuration says (VDR ``norm``); binary otherwise.
    bow_normalize: bool = False

    @property
    def modalities(self) -> frozenset[str]:
        """Input modalities the encoder takes ("text", "image", "features")."""
        return modalities_of(self.capabilities)

    def can(self, capability: Capability) -> bool:
        """Whether the encoder declares ``capability``."""
        return capability in self.capabilities

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

    def encode_features(
        self, features: np.ndarray, *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        """Encode dense feature vectors ``[N, d]`` (one encoding per row)."""
        raise ModalityError(f"encoder {self.name!r} does not encode dense feature vectors")

    def static_embeddings(self) -> tuple[np.ndarray, list[str]] | None:
        """The text tower's input word-embedding table ``[n, d]`` and the token of each row.

        Context-free token vectors (D2S's ``f_enc`` for Semantic@k); ``None`` when the
        encoder has no such table.
        """
        return None

    def __repr__(self) -> str:
        caps = ",".join(sorted(self.capabilities))
        return f"{type(self).__name__}(name={self.name!r}, device={self.device!r}, {caps})"


@runtime_checkable
class LexicalEncoder(Protocol):
    """``TEXT_LEXICAL`` / ``IMAGE_LEXICAL``: inputs → :class:`LexicalEncoding` over ``vocab``."""

    name: str
    vocab: list[str]
    known_words: frozenset[str]
    max_length: int

    def encode_texts(
        self, texts: list[str], side: str = "query", *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        """Texts → one encoding each (``side``: the query or document tower)."""
        ...

    def encode_images(
        self, images: list[Image.Image], *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        """PIL images → one encoding each, one unit per patch."""
        ...

    def static_embeddings(self) -> tuple[np.ndarray, list[str]] | None:
        """Context-free token vectors ``[n, d]`` and their tokens, or ``None``."""
        ...


@runtime_checkable
class FeatureLexicalEncoder(Protocol):
    """``FEATURE_LEXICAL``: dense feature vectors ``[N, feature_dim]`` → :class:`LexicalEncoding`.

    The head has no text tower of its own: ``tokenize_texts`` gives a text's own tokens in
    the output vocabulary (an encoding with zero weights, ``units`` = tokens), which is
    what a bag-of-words query and a caption's tokens (Exact@k) need.
    """

    name: str
    vocab: list[str]
    feature_dim: int

    def encode_features(
        self, features: np.ndarray, *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        """Dense feature vectors ``[N, d]`` → one encoding per row."""
        ...

    def tokenize_texts(self, texts: list[str]) -> list[LexicalEncoding]:
        """Texts' own tokens as zero-weight encodings (their bag of words)."""
        ...

    def static_embeddings(self) -> tuple[np.ndarray, list[str]] | None:
        """Context-free token vectors ``[n, d]`` and their tokens, or ``None``."""
        ...


@runtime_checkable
class DenseEncoder(Protocol):
    """``DENSE``: texts → ``[N, dim]`` float32 vectors."""

    name: str
    dim: int

    def embed_texts(
        self, texts: list[str], *, batch_size: int | None = None, progress: Progress | None = None
    ) -> np.ndarray:
        """Texts → ``[N, dim]`` float32 embeddings."""
        ...


@runtime_checkable
class QuantisedEncoder(DenseEncoder, Protocol):
    """``QUANTISED``: a dense encoder with a product quantiser (``[M, K, D/M]`` centroids)."""

    quantizer: Any  # lexlens.models.pq.ProductQuantizer
    m: int
    k: int
    centroids: np.ndarray

    def codes(self, texts: list[str], *, progress: Progress | None = None) -> np.ndarray:
        """Texts → ``[N, M]`` code ids, one per sub-vector."""
        ...

    def with_quantizer(self, quantizer: Any, *, name: str | None = None) -> QuantisedEncoder:
        """A new encoder sharing this model, with another codebook."""
        ...


@runtime_checkable
class DifferentiableEncoder(QuantisedEncoder, Protocol):
    """``DIFFERENTIABLE``: what Integrated Gradients over input word embeddings needs."""

    tokenizer: Any
    device: str
    max_length: int

    @property
    def word_embeddings(self) -> Any:  # torch.nn.Embedding
        """The input word-embedding layer (Integrated Gradients' input space)."""
        ...

    def tokenize(self, texts: list[str]) -> Any:  # lexlens.models.text_io.TokenBatch
        """Texts → padded token ids and attention mask."""
        ...

    def forward_embeds(self, inputs_embeds: Any, attention_mask: Any) -> Any:
        """Differentiable embedding ``[B, D]`` from word embeddings ``[B, T, E]``."""
        ...

    def forward_ids(self, input_ids: Any, attention_mask: Any) -> Any:
        """Embedding ``[B, D]`` from token ids (through :attr:`word_embeddings`)."""
        ...

    def split_torch(self, f: Any) -> Any:
        """Embeddings ``[B, D]`` → rotated sub-vectors ``[B, M, D/M]`` (differentiable)."""
        ...

    def centroids_torch(self) -> Any:
        """The codebooks ``[M, K, D/M]`` as a tensor on the encoder's device."""
        ...


#: Texts hashed in one update by :func:`texts_digest` (their bytes are the same either way).
DIGEST_BLOCK = 4096


def texts_digest(texts: Iterable[str], end: str) -> str:
    """SHA-256 of texts in order, each as UTF-8 followed by ``end`` (what tells them apart)."""
    digest = hashlib.sha256()
    iterator = iter(texts)
    while block := list(islice(iterator, DIGEST_BLOCK)):  # one update per block of texts
        digest.update((end.join(block) + end).encode("utf-8"))
    return digest.hexdigest()


def check_texts(texts: list[str]) -> list[str]:
    """Reject empty input with a clear message; returns the texts unchanged."""
    if isinstance(texts, str):
        raise InputError("pass a list of texts, not a single string")
    if not isinstance(texts, (list, tuple)):
        raise InputError(f"pass a list of texts, not {type(texts).__name__}")
    if len(texts) == 0:
        raise InputError("no texts given")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"text #{i + 1} is {type(text).__name__}, not a string")
        if not text.strip():
            which = "the text is" if len(texts) == 1 else f"text #{i + 1} is"
            raise InputError(f"{which} empty: type some words to encode")
    return texts
