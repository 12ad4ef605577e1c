"""Encoding items into the rows an index stores: gated sparse vectors ``E = V ⊙ G`` (VDR).

Every build writes the same rows, whichever way it encodes: the in-process build of a
source and the Ray actors (:func:`encode_payloads`: image bytes or texts, unreadable images
skipped while the rest of the batch goes on), the dense-features build (:func:`gated_sparse`
of a feature head's encodings). :func:`content_key` names what was encoded, so a rebuild
reuses a stored row only for the same content.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from lexlens.analysis.collections.token_ids import units_to_ids
from lexlens.analysis.core.gating import gate
from lexlens.analysis.datasets.items import Skipped
from lexlens.models.base import Encoder, InputError, LexicalEncoding

#: What a row is: sorted vocabulary ids (int32) and their gated weights (float32).
SparseRow = tuple[np.ndarray, np.ndarray]
#: What an encoded item gives the index: its row and, for a text, its input token ids
#: (int32, as the encoder read them; ``None`` for an image), which analyses of its own
#: tokens read instead of encoding it again (:mod:`.token_ids`).
EncodedRow = tuple[np.ndarray, np.ndarray, np.ndarray | None]


def content_key(kind: str, payload: bytes) -> str:
    """A hash of what was encoded (``kind`` "image" or "text" and its bytes)."""
    return hashlib.blake2b(kind.encode() + b"\0" + payload, digest_size=16).hexdigest()


def gated_sparse(encoding: LexicalEncoding, vocab: list[str], gate_k: int) -> SparseRow:
    """``E = V ⊙ G`` of an encoding as (sorted vocabulary ids int32, weights float32)."""
    dense = gate(encoding, vocab, gate_k)
    cols = np.flatnonzero(dense).astype(np.int32)
    return cols, dense[cols].astype(np.float32)


def input_token_ids(encoding: LexicalEncoding, vocab: list[str]) -> np.ndarray | None:
    """A text encoding's input tokens as positions in the output vocabulary, int32
    (:func:`.token_ids.units_to_ids`; ``None`` for an image)."""
    return None if encoding.input_ids is None else units_to_ids(encoding.units, vocab)


def encode_payloads(
    encoder: Encoder, gate_k: int, payloads: list[tuple[str, bytes | str, str]]
) -> list[EncodedRow | Skipped]:
    """Encode (kind, payload, where) triples (image bytes or a text) into gated sparse
    vectors with a text's input token ids (:data:`EncodedRow`); unreadable images become
    :class:`Skipped` (the rest of the batch goes on)."""
    from lexlens.models.images import load_image  # heavy: loads PIL

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
                enc
                if isinstance(enc, Skipped)
                else (*gated_sparse(enc, encoder.vocab, gate_k), None)
            )
    if texts:
        encodings = encoder.encode_texts(texts, side="document", keep_units=False)
        for slot, enc in zip(text_slots, encodings, strict=True):
            out[slot] = (
                *gated_sparse(enc, encoder.vocab, gate_k),
                input_token_ids(enc, encoder.vocab),
            )
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
