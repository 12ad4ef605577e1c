"""Query ⊙ document contributions (VDR's retrieval reasoning).

``sim(q, p) = E_q · E_p`` with ``E(x) = V(x) ⊙ G(x)``: the gate keeps the top-k dimensions
and the input's own tokens. The element-wise product gives each vocabulary term's share
of the score; the shares sum exactly to the score (both are computed in float64 from the
same vectors).

Either side may be a text or an image: text through a lexical text encoder, an image
through a lexical image encoder in the same vocabulary (the default pair: ``splade-tiny``
for texts, ``efficientnet-lite0-lexical`` for images). An image has no bag of words, so
its gate is its top-k only, and the nonparametric (``bow``) query mode needs a text query.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lexlens.analysis.core.gating import (
    DEFAULT_GATE_K,
    accepts_topk,
    bow_query,
    check_gate_k,
    gate,
)
from lexlens.analysis.core.results import Record, Result, json_key
from lexlens.analysis.core.words import input_words, merge_contributions
from lexlens.models.base import (
    Capability,
    Encoder,
    InputError,
    LexicalEncoding,
    ModalityError,
    Needs,
    check_texts,
)
from lexlens.models.registry import load_encoder

#: What each side needs of its encoder: texts, or images, into a vocabulary.
TEXT_SIDE = Needs("a text side", all_of=frozenset({Capability.TEXT_LEXICAL}))
IMAGE_SIDE = Needs("an image side", all_of=frozenset({Capability.IMAGE_LEXICAL}))

#: The default pair, both ways: the encoder that puts the *other* modality into the same
#: vocabulary (``efficientnet-lite0-lexical`` is a label-space projection onto
#: ``splade-tiny``'s vocabulary). Other encoders (VDR cross-modal checkpoints) hold both
#: towers themselves.
PARTNERS = {
    ("splade-tiny", "image"): "efficientnet-lite0-lexical",
    ("efficientnet-lite0-lexical", "text"): "splade-tiny",
}


def partner_for(name: str, modality: str) -> str | None:
    """The registry encoder that encodes ``modality`` in ``name``'s vocabulary, if known."""
    return PARTNERS.get((name, modality))


@dataclass(frozen=True)
class Contribution(Record):
    """One term's share of a query–document score: ``query_weight · doc_weight``."""

    token: str
    index: int
    query_weight: float
    doc_weight: float
    contribution: float


def contributions(
    query: np.ndarray, doc: np.ndarray, vocab: list[str]
) -> tuple[float, list[Contribution]]:
    """The score ``query · doc`` and every non-zero term's share, largest first."""
    if query.shape != doc.shape or query.shape[0] != len(vocab):
        raise InputError(
            f"query ({query.shape[0]} dims) and document ({doc.shape[0]} dims) are not in the "
            f"same {len(vocab)}-term vocabulary: pick encoders that share one"
        )
    product = query.astype(np.float64) * doc.astype(np.float64)
    nonzero = np.flatnonzero(product)
    order = nonzero[np.argsort(-product[nonzero], kind="stable")]
    rows = [
        Contribution(vocab[i], int(i), float(query[i]), float(doc[i]), float(product[i]))
        for i in order
    ]
    return float(product[order].sum()), rows


# ----------------------------------------------------------------------------- use case
@dataclass(frozen=True)
class ContribResult(Result):
    """A query–document score and every shared term's contribution (summing to it)."""

    file_stem = "contrib"

    score: float
    contributions: list[Contribution]
    query: dict
    document: dict
    query_mode: str
    gate_k: int = json_key("topk")
    notes: list[str] = field(default_factory=list)
    #: The contributions for reading: word pieces joined into the words the inputs spell
    #: (or the encoders know), each word's contribution the sum of its pieces' (they still
    #: sum to the score); largest first.
    contributions_words: list[dict] = field(default_factory=list)


def _side(what: str, text: str | None, image: Any, name: str | None) -> tuple[str, Any, str]:
    """Validate one side before any model runs: ("text", str) or ("image", PIL image)."""
    if (text is None) == (image is None):
        raise InputError(f"give the {what} as a text or as an image (one of them)")
    if text is not None:
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"the {what} is empty: type some words")
        return "text", text, ""
    from PIL import Image

    from lexlens.models.images import load_image

    if isinstance(image, Image.Image):
        return "image", image, name or f"{what} image"
    if isinstance(image, (bytes, bytearray)):
        label = name or f"uploaded {what} image"
    else:
        label = name or str(image)
    return "image", load_image(image, name=label), label


def _needs(encoder: Encoder, kind: str, what: str) -> None:
    try:
        (TEXT_SIDE if kind == "text" else IMAGE_SIDE).check(encoder)
    except ModalityError:
        partner = partner_for(encoder.name, kind)
        hint = f" (for {kind}s in its vocabulary use {partner!r})" if partner else ""
        raise ModalityError(
            f"the {what} is {'a text' if kind == 'text' else 'an image'} but {encoder.name!r} "
            f"does not encode {kind}s{hint}"
        ) from None


def side_encoder(encoder: Encoder | str, kind: str, device: str | None = None) -> Encoder:
    """The encoder of one side: an encoder given by name is loaded, or its partner in the same
    vocabulary when it cannot encode ``kind`` (``splade-tiny`` for an image side gives
    ``efficientnet-lite0-lexical``); an :class:`Encoder` object is used as it is."""
    if not isinstance(encoder, str):
        return encoder
    loaded = load_encoder(encoder, device=device)
    wanted = Capability.TEXT_LEXICAL if kind == "text" else Capability.IMAGE_LEXICAL
    partner = partner_for(loaded.name, kind)
    if not loaded.can(wanted) and partner:
        return load_encoder(partner, device=device)
    return loaded


def encode_side(encoder: Encoder, kind: str, value: Any, side: str) -> LexicalEncoding:
    """Encode a validated text (``side`` = query/document tower) or image."""
    if kind == "text":
        check_texts([value])
        return encoder.encode_texts([value], side=side)[0]
    return encoder.encode_images([value])[0]


@accepts_topk
def contrib(
    query_encoder: Encoder | str,
    doc_encoder: Encoder | str | None = None,
    *,
    query: str | None = None,
    query_image: Any = None,
    query_name: str | None = None,
    doc: str | None = None,
    doc_image: Any = None,
    doc_name: str | None = None,
    mode: str = "parametric",
    gate_k: int = DEFAULT_GATE_K,
    device: str | None = None,
) -> ContribResult:
    """Score one query against one document and list each term's contribution.

    Either side is a text or an image (a path, bytes or a PIL image; ``*_name`` is the
    name shown in messages). ``mode="bow"`` uses VDR's nonparametric query (the binary,
    possibly normalised, bag of the query's own tokens: text queries only). Encoders given by
    name are loaded on ``device`` for their side (:func:`side_encoder`; the document's default
    is the query's). Inputs are validated before any model runs.
    """
    doc_encoder = query_encoder if doc_encoder is None else doc_encoder
    if mode not in ("parametric", "bow"):
        raise InputError(f"query mode must be 'parametric' or 'bow', not {mode!r}")
    gate_k = check_gate_k(gate_k)
    q_kind, q_value, q_label = _side("query", query, query_image, query_name)
    d_kind, d_value, d_label = _side("document", doc, doc_image, doc_name)
    if mode == "bow" and q_kind != "text":
        raise InputError("the bag-of-words query mode needs a text query (an image has no words)")
    query_encoder = side_encoder(query_encoder, q_kind, device)
    doc_encoder = side_encoder(doc_encoder, d_kind, device)
    _needs(query_encoder, q_kind, "query")
    _needs(doc_encoder, d_kind, "document")
    if query_encoder is not doc_encoder and query_encoder.vocab != doc_encoder.vocab:
        raise InputError(
            f"{query_encoder.name!r} ({len(query_encoder.vocab)} terms) and {doc_encoder.name!r} "
            f"({len(doc_encoder.vocab)} terms) use different vocabularies: their scores "
            "cannot be compared term by term"
        )
    vocab = query_encoder.vocab
    q_enc = encode_side(query_encoder, q_kind, q_value, "query")
    d_enc = encode_side(doc_encoder, d_kind, d_value, "document")
    if mode == "bow":
        q_vec = bow_query(q_enc, vocab, query_encoder.bow_normalize)
    else:
        q_vec = gate(q_enc, vocab, gate_k)
    d_vec = gate(d_enc, vocab, gate_k)
    score, rows = contributions(q_vec, d_vec, vocab)
    words = set(query_encoder.known_words) | set(doc_encoder.known_words)
    for enc in (q_enc, d_enc):
        words |= input_words(enc.units if enc.input_ids is not None else [])
    in_words = merge_contributions([r.to_dict() for r in rows], vocab, words)
    notes = [*q_enc.notes, *d_enc.notes]
    for what, enc, encoder in (("query", q_enc, query_encoder), ("document", d_enc, doc_encoder)):
        if enc.truncated:
            notes.append(f"{what} truncated to {encoder.max_length} tokens")
    if mode == "bow":
        notes.append(
            "bag-of-words query: binary"
            + (", L2-normalised (the checkpoint's setting)" if query_encoder.bow_normalize else "")
            + "; special tokens left out"
        )

    def info(kind: str, value: Any, label: str, encoder: Encoder) -> dict:
        out = {"text": value} if kind == "text" else {"image": label}
        return out | {"encoder": encoder.name}

    return ContribResult(
        score=score,
        contributions=rows,
        query=info(q_kind, q_value, q_label, query_encoder),
        document=info(d_kind, d_value, d_label, doc_encoder),
        query_mode=mode,
        gate_k=gate_k,
        notes=list(dict.fromkeys(notes)),
        contributions_words=in_words,
    )
