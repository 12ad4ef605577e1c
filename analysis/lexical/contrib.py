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

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.core.arguments import (
    device_argument,
    encoder_argument,
    encoder_or_spec,
    image_argument,
    text_argument,
)
from lexlens.analysis.core.gating import GATE_K, gate
from lexlens.analysis.core.options import QUERY_MODE, Options, shared
from lexlens.analysis.core.results import Record, Result
from lexlens.analysis.core.words import input_words, merge_contributions
from lexlens.analysis.lexical.terms import input_label
from lexlens.analysis.render.html import NOTEBOOK_ROWS, num, render_fragment
from lexlens.analysis.retrieval.queries import QuerySpec
from lexlens.models.base import (
    Capability,
    Encoder,
    InputError,
    LexicalEncoding,
    ModalityError,
    Needs,
    check_texts,
)
from lexlens.models.registry import load_encoder, partner_for

#: What each side needs of its encoder: texts, or images, into a vocabulary.
TEXT_SIDE = Needs("a text side", all_of=frozenset({Capability.TEXT_LEXICAL}))
IMAGE_SIDE = Needs("an image side", all_of=frozenset({Capability.IMAGE_LEXICAL}))


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
class ContribOptions(Options):
    """How a query–document score is taken apart (``lexlens contrib``, the Query ⊙ Document
    page): the query's encoding and the gate of both sides."""

    what = "contrib"

    query_mode: str = shared(QUERY_MODE)
    gate_k: int = shared(GATE_K)


@dataclass(frozen=True)
class ContribResult(Result):
    """A query–document score and every shared term's contribution (summing to it)."""

    file_stem = "contrib"

    score: float
    contributions: list[Contribution]
    query: dict
    document: dict
    query_mode: str
    gate_k: int
    notes: list[str] = field(default_factory=list)
    #: The contributions for reading: word pieces joined into the words the inputs spell
    #: (or the encoders know), each word's contribution the sum of its pieces' (they still
    #: sum to the score); largest first.
    contributions_words: list[dict] = field(default_factory=list)

    def frame_rows(self) -> list[dict]:
        """The contributions by word (pieces joined; largest first), summing to the score:
        word, contribution, both weights, the pieces joined."""
        return [
            {
                "word": r["token"],
                "contribution": float(r["contribution"]),
                "query_weight": r.get("query_weight"),
                "doc_weight": r.get("doc_weight"),
                "pieces": " ".join(r.get("pieces") or []),
            }
            for r in self.contributions_words
        ]

    def notebook_html(self) -> str:
        """The score, and the contributions by word as a bar table summing to it (the first
        :data:`~lexlens.analysis.render.html.NOTEBOOK_ROWS` rows; the rest's sum said)."""

        rows = self.frame_rows()
        shown, rest = rows[:NOTEBOOK_ROWS], rows[NOTEBOOK_ROWS:]
        largest = max((abs(r["contribution"]) for r in shown), default=0.0) or 1.0
        total = math.fsum(r["contribution"] for r in rows)
        summary = (
            f"score {num(self.score)} = the sum of {len(rows)} words' contributions ({num(total)})"
        )
        if rest:
            summary += (
                f"; the {len(rest)} not drawn add {num(math.fsum(r['contribution'] for r in rest))}"
            )
        columns = ["word", "contribution", "query_weight", "doc_weight"]
        return render_fragment(
            "notebook.html",
            title=f"Query ⊙ Document — {input_label(self.query)} ⊙ {input_label(self.document)}",
            notes=list(self.notes),
            summary=summary,
            picture="",
            cloud="",
            table={
                "columns": columns,
                "rows": [[r["word"], *(num(r[c]) for c in columns[1:])] for r in shown],
            },
            numeric=(1, 2, 3),
            bars=[r["contribution"] / largest for r in shown],
            more=len(rest),
        )


def _side(what: str, argument: str, text: Any, image: Any) -> tuple[str, Any, str]:
    """Validate one side before any model runs: ("text", str, "") or ("image", PIL image,
    its name). ``argument`` is the side's text argument (``query`` or ``doc``)."""
    from PIL import Image  # heavy: PIL loads on first use

    from lexlens.models.images import load_image  # heavy: loads PIL

    if (text is None) == (image is None):
        raise InputError(f"give the {what} as a text or as an image (one of them)")
    if text is not None:
        if not text_argument(text, argument).strip():
            raise InputError(f"the {what} is empty: type some words")
        return "text", text, ""
    name = None
    if isinstance(image, (tuple, list)) and len(image) == 2:
        name, image = image
        text_argument(name, f"{argument}_image's name")
    if isinstance(image_argument(image, f"{argument}_image"), Image.Image):
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


def side_encoder(
    encoder: Encoder | str | Path, kind: str, device: str | None = None, argument: str = "encoder"
) -> Encoder:
    """The encoder of one side: an encoder given by name is loaded, or its partner in the same
    vocabulary when it cannot encode ``kind`` (``splade-tiny`` for an image side gives
    ``efficientnet-lite0-lexical``); an :class:`Encoder` object is used as it is."""
    if isinstance(encoder, Encoder):
        return encoder
    loaded = encoder_argument(encoder, argument, device=device)
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


def contrib(
    query_encoder: Encoder | str,
    doc_encoder: Encoder | str | None = None,
    *,
    query: str | None = None,
    query_image: Any = None,
    doc: str | None = None,
    doc_image: Any = None,
    device: str | None = None,
    options: ContribOptions | None = None,
    **given: Any,
) -> ContribResult:
    """Score one query against one document and list each term's contribution.

    Either side is a text or an image: a path, bytes, a PIL image, or a ``(name, image)``
    pair (the name shown in messages and in the result). Options: :class:`ContribOptions`
    (or its fields as keywords); ``query_mode="bow"`` uses VDR's nonparametric query (the
    binary, possibly normalised, bag of the query's own tokens: text queries only). Encoders
    given by name are loaded on ``device`` for their side (:func:`side_encoder`; the
    document's default is the query's). Every argument is checked before any model runs.
    """
    options = ContribOptions.of(options, **given)
    encoder_or_spec(query_encoder, "query_encoder")
    if doc_encoder is None:
        doc_encoder = query_encoder
    else:
        encoder_or_spec(doc_encoder, "doc_encoder")
    device_argument(device)
    q_kind, q_value, q_label = _side("query", "query", query, query_image)
    d_kind, d_value, d_label = _side("document", "doc", doc, doc_image)
    if options.query_mode == "bow" and q_kind != "text":
        raise InputError("the bag-of-words query mode needs a text query (an image has no words)")
    query_encoder = side_encoder(query_encoder, q_kind, device, "query_encoder")
    doc_encoder = side_encoder(doc_encoder, d_kind, device, "doc_encoder")
    _needs(query_encoder, q_kind, "query")
    _needs(doc_encoder, d_kind, "document")
    if query_encoder is not doc_encoder and query_encoder.vocab != doc_encoder.vocab:
        raise InputError(
            f"{query_encoder.name!r} ({len(query_encoder.vocab)} terms) and {doc_encoder.name!r} "
            f"({len(doc_encoder.vocab)} terms) use different vocabularies: their scores "
            "cannot be compared term by term"
        )
    spec = QuerySpec(query_encoder, options.query_mode, options.gate_k)
    if q_kind == "text":
        check_texts([q_value])
        q_vec, q_enc = spec.encode_with_units(q_value)
    else:
        q_vec, q_enc = spec.image_with_units(q_value)
    d_enc = encode_side(doc_encoder, d_kind, d_value, "document")
    score, rows, in_words = _scored(q_vec, q_enc, d_enc, query_encoder, doc_encoder, options)

    def info(kind: str, value: Any, label: str, encoder: Encoder) -> dict:
        out = {"text": value} if kind == "text" else {"image": label}
        return out | {"encoder": encoder.name}

    return ContribResult(
        score=score,
        contributions=rows,
        query=info(q_kind, q_value, q_label, query_encoder),
        document=info(d_kind, d_value, d_label, doc_encoder),
        query_mode=options.query_mode,
        gate_k=options.gate_k,
        notes=_notes(q_enc, d_enc, query_encoder, doc_encoder, options.query_mode),
        contributions_words=in_words,
    )


def _scored(
    q_vec: np.ndarray,
    q_enc: LexicalEncoding,
    d_enc: LexicalEncoding,
    query_encoder: Encoder,
    doc_encoder: Encoder,
    options: ContribOptions,
) -> tuple[float, list[Contribution], list[dict]]:
    """The score of the query vector against the gated document, each term's contribution,
    and the contributions joined into the words the inputs spell (or the encoders know)."""
    vocab = query_encoder.vocab
    d_vec = gate(d_enc, vocab, options.gate_k)
    score, rows = contributions(q_vec, d_vec, vocab)
    words = set(query_encoder.known_words) | set(doc_encoder.known_words)
    for enc in (q_enc, d_enc):
        words |= input_words(enc.units if enc.input_ids is not None else [])
    return score, rows, merge_contributions([r.to_dict() for r in rows], vocab, words)


def _notes(
    q_enc: LexicalEncoding,
    d_enc: LexicalEncoding,
    query_encoder: Encoder,
    doc_encoder: Encoder,
    query_mode: str,
) -> list[str]:
    """The encoders' notes, truncation, and how a bag-of-words query was made (each once)."""
    notes = [*q_enc.notes, *d_enc.notes]
    for what, enc, encoder in (("query", q_enc, query_encoder), ("document", d_enc, doc_encoder)):
        if enc.truncated:
            notes.append(f"{what} truncated to {encoder.max_length} tokens")
    if query_mode == "bow":
        notes.append(
            "bag-of-words query: binary"
            + (", L2-normalised (the checkpoint's setting)" if query_encoder.bow_normalize else "")
            + "; special tokens left out"
        )
    return list(dict.fromkeys(notes))
