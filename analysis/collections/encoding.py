"""Turning items into stored vectors, shared by every way of building an index (in this
process, on Ray, or dense features through a D2S head): the encoder's fingerprint and
manifest entry, the gated sparse rows ``E = V ⊙ G``, batches of texts and images, the
build's options and its result."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.sources import Skipped
from lexlens.analysis.collections.store import vocab_hash
from lexlens.analysis.core.gating import gate
from lexlens.analysis.core.results import Result, internal
from lexlens.models.base import Capability, Encoder, InputError, Needs

#: What indexing needs of an encoder: texts or images into a vocabulary.
INDEX_NEEDS = Needs(
    "a stored collection", any_of=frozenset({Capability.TEXT_LEXICAL, Capability.IMAGE_LEXICAL})
)


_FINGERPRINTS: dict[int, tuple[Any, str]] = {}


def encoder_fingerprint(encoder: Encoder) -> str:
    """A hash of the encoder's weights: every tensor, module and array it holds.

    Two loads of the same checkpoint give the same fingerprint; any changed weight (or a
    changed class→vocabulary map) gives another, so stored vectors are only reused when
    they would be computed again identically.
    """
    cached = _FINGERPRINTS.get(id(encoder))
    if cached is not None and cached[0] is encoder:
        return cached[1]
    import torch

    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{type(encoder).__module__}.{type(encoder).__qualname__}".encode())
    digest.update(vocab_hash(list(getattr(encoder, "vocab", []) or [])).encode())
    digest.update(repr(bool(encoder.bow_normalize)).encode())

    def feed(name: str, value: Any, depth: int = 0) -> None:
        if isinstance(value, torch.nn.Module):
            for key, tensor in sorted(value.state_dict().items()):
                feed(f"{name}.{key}", tensor, depth)
        elif isinstance(value, torch.Tensor):
            array = value.detach().cpu().contiguous()
            digest.update(f"{name}:{array.dtype}:{tuple(array.shape)}".encode())
            digest.update(array.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, np.ndarray):
            digest.update(f"{name}:{value.dtype}:{value.shape}".encode())
            digest.update(np.ascontiguousarray(value).tobytes())
        elif depth == 0 and hasattr(value, "__dict__") and not isinstance(value, type):
            for key, inner in sorted(vars(value).items()):
                feed(f"{name}.{key}", inner, depth + 1)

    for key, value in sorted(vars(encoder).items()):
        feed(key, value)
    fingerprint = digest.hexdigest()
    _FINGERPRINTS[id(encoder)] = (encoder, fingerprint)
    return fingerprint


def content_key(kind: str, payload: bytes) -> str:
    """The key an item's vectors are reused under: its kind and its bytes (text or image)."""
    return hashlib.blake2b(kind.encode() + b"\0" + payload, digest_size=16).hexdigest()


@dataclass(frozen=True)
class IndexResult(Result):
    """What a build did: counts, skipped items, where the index is, its manifest."""

    file_stem = "index"

    out: str
    encoder: str
    items: int
    encoded: int
    reused: int
    skipped: list[Skipped]
    up_to_date: bool
    seconds: float = internal()
    manifest: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def gated_sparse(encoding: Any, vocab: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
    """``E = V ⊙ G`` of an encoding as (sorted vocabulary ids int32, weights float32)."""
    dense = gate(encoding, vocab, k)
    cols = np.flatnonzero(dense).astype(np.int32)
    return cols, dense[cols].astype(np.float32)


def check_build_options(gate_k: int, batch_size: int) -> None:
    """The gate k (``--topk``) and ``--batch-size`` of a build, checked before anything is read."""
    if isinstance(gate_k, bool) or not isinstance(gate_k, int) or gate_k < -1:
        raise InputError("--topk must be -1 (all dimensions), 0 (own tokens only) or positive")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError("--batch-size must be a positive integer")


def encoder_entry(encoder: Encoder, spec: str | None = None) -> dict:
    """The manifest's ``encoder`` entry: what reopening, searching and reusing rely on."""
    return {
        "name": encoder.name,
        "spec": spec or encoder.name,
        "fingerprint": encoder_fingerprint(encoder),
        "class": type(encoder).__name__,
        "capabilities": sorted(str(c) for c in encoder.capabilities),
        "bow_normalize": bool(encoder.bow_normalize),
    }


def encode_payloads(
    encoder: Encoder, gate_k: int, payloads: list[tuple[str, bytes | str, str]], root: Path
) -> list[tuple[np.ndarray, np.ndarray] | Skipped]:
    """Encode (kind, payload, where) triples (image bytes or a text) into gated sparse
    vectors; unreadable images become :class:`Skipped` (the rest of the batch goes on)."""
    from lexlens.models.images import load_image

    out: list[Any] = [None] * len(payloads)
    images, image_slots, texts, text_slots = [], [], [], []
    for i, (kind, payload, where) in enumerate(payloads):
        if kind == "image":
            try:
                images.append(load_image(payload, name=where))
                image_slots.append(i)
            except InputError as exc:
                reason = str(exc)
                out[i] = Skipped(where, reason.split(": ", 1)[1] if ": " in reason else reason)
        else:
            texts.append(str(payload))
            text_slots.append(i)
    if images:
        for slot, enc in zip(
            image_slots,
            _encode_images(encoder, images, [payloads[s][2] for s in image_slots]),
            strict=True,
        ):
            out[slot] = (
                enc if isinstance(enc, Skipped) else gated_sparse(enc, encoder.vocab, gate_k)
            )
    if texts:
        encodings = encoder.encode_texts(texts, side="document", keep_units=False)
        for slot, enc in zip(text_slots, encodings, strict=True):
            out[slot] = gated_sparse(enc, encoder.vocab, gate_k)
    return out


def _encode_images(encoder: Encoder, images: list, wheres: list[str]) -> list:
    """Encode a batch; if the batch fails, encode one by one and skip the failing ones."""
    try:
        return encoder.encode_images(images, keep_units=False)
    except InputError:
        out = []
        for image, where in zip(images, wheres, strict=True):
            try:
                out.append(encoder.encode_images([image], keep_units=False)[0])
            except InputError as exc:
                out.append(Skipped(where, str(exc)))
        return out
