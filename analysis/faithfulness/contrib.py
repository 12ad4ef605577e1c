"""Is a query–document decomposition true? The deletion curve of the Query ⊙ Document page.

``sim(q, d) = Σ_t q_t d_t`` (:mod:`lexlens.analysis.lexical.contrib`) gives each vocabulary
term its share; each term was produced by one query word (provenance: the unit that won its
max pool, :mod:`.text_edits`), so a word's share is the sum over the terms it produced.
The query's words are deleted one more at a time in the order of their shares, the query
re-encoded after each deletion and scored against the (unchanged) document: the score after
``k`` words, ``k = 0…K``, against random orders (seeded), and its AOPC
(:mod:`.curves`). A faithful decomposition makes the score fall fastest in its own order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lexlens.analysis.core.arguments import device_argument, encoder_or_spec, text_argument
from lexlens.analysis.core.curves import (
    MEASURED_BY,
    DeletionCurve,
    deletion_curve,
    permutations,
    rng_for,
)
from lexlens.analysis.core.gating import GATE_K, gate
from lexlens.analysis.core.options import QUERY_MODE, shared
from lexlens.analysis.core.results import Result
from lexlens.analysis.faithfulness.options import FaithfulnessOptions
from lexlens.analysis.lexical.contrib import (
    IMAGE_SIDE,
    TEXT_SIDE,
    encode_side,
    side_encoder,
)
from lexlens.analysis.lexical.word_units import source_words, text_words
from lexlens.analysis.retrieval.queries import QuerySpec
from lexlens.analysis.retrieval.scorer import scores_against
from lexlens.models.base import Encoder, InputError


@dataclass(frozen=True)
class ContribFaithfulnessOptions(FaithfulnessOptions):
    """A deletion curve of a query–document score: the faithfulness settings and how the
    pair is scored (the Query ⊙ Document page's query mode and gate)."""

    what = "the deletion curve"

    query_mode: str = shared(QUERY_MODE)
    gate_k: int = shared(GATE_K)


@dataclass(frozen=True)
class ContribFaithfulness(Result):
    """The deletion curve of a query–document score: each query word's summed contribution
    (the terms it produced), the score after deleting ``k`` words in that order, re-encoded,
    against random orders."""

    file_stem = "deletion_curve"

    query: str
    score: float  # the query as given, re-encoded
    words: list[dict]  # word, contribution (summed over the terms it produced)
    edited_queries: list[str]  # the query after k = 0…K deletions, the explanation's order
    curve: DeletionCurve
    settings: dict
    measured_by: str = MEASURED_BY
    notes: list[str] = field(default_factory=list)


def contrib_faithfulness(
    query_encoder: Encoder | str,
    doc_encoder: Encoder | str | None = None,
    *,
    query: str,
    doc: str | None = None,
    doc_image: Any = None,
    device: str | None = None,
    options: ContribFaithfulnessOptions | None = None,
    **given: Any,
) -> ContribFaithfulness:
    """The deletion curve of ``query`` (a text) against a document (a text, or an image
    through an image encoder in the same vocabulary). Options:
    :class:`ContribFaithfulnessOptions` (or its fields as keywords)."""
    options = ContribFaithfulnessOptions.of(options, **given)
    encoder_or_spec(query_encoder, "query_encoder")
    if doc_encoder is not None:
        encoder_or_spec(doc_encoder, "doc_encoder")
    device_argument(device)
    if not text_argument(query, "query").strip():
        raise InputError("the query is empty: type some words")
    if (doc is None) == (doc_image is None):
        raise InputError("give the document as a text or as an image (one of them)")
    kind = "text" if doc is not None else "image"
    if doc is not None and not text_argument(doc, "doc").strip():
        raise InputError("the document is empty: type some words")
    q_model = side_encoder(query_encoder, "text", device, "query_encoder")
    TEXT_SIDE.check(q_model)
    d_model = side_encoder(doc_encoder or query_encoder, kind, device, "doc_encoder")
    (TEXT_SIDE if kind == "text" else IMAGE_SIDE).check(d_model)
    if list(q_model.vocab) != list(d_model.vocab):
        raise InputError(f"{q_model.name!r} and {d_model.name!r} use different vocabularies")
    d_enc = encode_side(d_model, kind, doc if kind == "text" else _picture(doc_image), "document")
    d_vec = gate(d_enc, list(d_model.vocab), options.gate_k)
    return deletion_of(q_model, query, d_vec, options)


def _picture(image: Any) -> Any:
    """The PIL image of a path, bytes, a PIL image or a ``(name, image)`` pair."""
    from PIL import Image  # heavy: PIL loads on first use

    from lexlens.models.images import load_image  # heavy: loads PIL

    name = None
    if isinstance(image, (tuple, list)) and len(image) == 2:
        name, image = image
    return image if isinstance(image, Image.Image) else load_image(image, name=name or "")


def deletion_of(
    encoder: Encoder, query: str, doc_vector: np.ndarray, options: ContribFaithfulnessOptions
) -> ContribFaithfulness:
    """The deletion curve of ``query`` against a gated document vector."""
    spec = QuerySpec(encoder, options.query_mode, options.gate_k)
    q, enc = spec.encode_with_units(query)
    words = text_words(encoder, query, enc.units)
    cols = np.flatnonzero(q * doc_vector)
    parts = q[cols].astype(np.float64) * doc_vector[cols].astype(np.float64)
    share = dict.fromkeys(words.deletable, 0.0)
    unsourced = 0.0
    for w, c in zip(source_words(enc, words, [[c] for c in cols]), parts, strict=True):
        if w is None:
            unsourced += float(c)
        else:
            share[w] += float(c)
    order = sorted(share, key=lambda w: (-share[w], w))
    k = min(options.curve_k, len(order))
    rng = rng_for(options.seed, query)
    randoms = [
        [words.deletable[i] for i in p]
        for p in permutations(len(words.deletable), options.draws, rng)
    ]
    edited = [words.without(order[:j]) if j else query for j in range(k + 1)]
    random_texts = [[words.without(r[:j]) if j else query for j in range(k + 1)] for r in randoms]
    spec.encode_sparse(edited + [t for ts in random_texts for t in ts])
    dense = doc_vector[None, :]

    def curve_of(texts: list[str]) -> list[float]:
        return scores_against([spec.sparse(t) for t in texts], dense)[:, 0].tolist()

    curve = curve_of(edited)
    random_curves = [curve_of(ts) for ts in random_texts]
    notes = []
    if unsourced:
        notes.append(
            f"{unsourced:.4g} of the score comes from terms no deletable word produced "
            "(a frame token or punctuation won their max pool)"
        )
    return ContribFaithfulness(
        query=query,
        score=curve[0],
        words=[{"word": words.words[w], "contribution": share[w]} for w in order],
        edited_queries=edited,
        curve=deletion_curve([words.words[w] for w in order[:k]], curve, random_curves),
        settings=options.to_dict(),
        notes=notes,
    )
