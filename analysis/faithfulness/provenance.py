"""Is a term's provenance true? For each top term of a text, delete the input word its
provenance names (the word whose unit won the term's max pool,
:func:`lexlens.analysis.lexical.terms.term_rows`), re-encode the text, and read the term's
weight again (a word joined from pieces: the largest of the pieces that lend it weight, as
shown). A faithful provenance names a word without which the term fades: the share of top
terms whose weight drops by at least half is the summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lexlens.analysis.core.arguments import device_argument, encoder_argument, text_argument
from lexlens.analysis.core.curves import MEASURED_BY
from lexlens.analysis.core.results import Result
from lexlens.analysis.lexical.terms import TEXT_NEEDS, TermsOptions, terms_of_encoding
from lexlens.analysis.lexical.word_units import term_columns, text_words
from lexlens.models.base import Encoder, InputError

#: A term "drops" when its weight after the deletion is at most this share of its weight.
DROP = 0.5


@dataclass(frozen=True)
class ProvenanceFaithfulness(Result):
    """Each shown top term of a text, its weight, and its weight after deleting its named
    source word (re-encoded); ``dropped_share``: the share of the terms with a deletable
    source word whose weight falls to half or less."""

    file_stem = "provenance_check"

    text: str
    terms: list[dict]  # token, weight, from_word, edited_text, weight_after, ratio, dropped
    dropped_share: float | None
    tested: int  # terms whose source is a deletable word
    untested: int  # terms produced by [CLS], [SEP] or punctuation
    merged: bool
    measured_by: str = MEASURED_BY
    notes: list[str] = field(default_factory=list)


def provenance_faithfulness(
    encoder: Encoder | str,
    text: str,
    *,
    merged: bool = True,
    device: str | None = None,
    options: TermsOptions | None = None,
    **given: Any,
) -> ProvenanceFaithfulness:
    """The provenance check of ``text``'s top terms (``merged``: words joined from pieces,
    as the Text page shows them by default). Options: :class:`TermsOptions` (``top``,
    ``side``)."""
    options = TermsOptions.of(options, **given)
    if not isinstance(merged, bool):
        raise InputError(f"merged must be True or False, not {type(merged).__name__}")
    if not text_argument(text, "text").strip():
        raise InputError("the text is empty: type some words")
    if options.box is not None or options.ids is not None:
        raise InputError("a box or ids apply to images or dense features, not to a text")
    device_argument(device)
    model = encoder_argument(encoder, needs=TEXT_NEEDS, device=device)
    enc = model.encode_texts([text], side=options.side)[0]
    shown = terms_of_encoding(model, enc, input_info={"text": text}, top=options.top)
    rows = shown.merged_terms if merged else shown.terms
    words = text_words(model, text, enc.units)
    deletable = set(words.deletable)
    edits: dict[int, str] = {}
    for r in rows:
        w = words.unit_word[r["from_unit_index"]] if "from_unit_index" in r else None
        if w in deletable:
            edits[w] = words.without([w])
    after = {}
    if edits:
        texts = list(dict.fromkeys(edits.values()))
        encodings = model.encode_texts(texts, side=options.side, keep_units=False)
        after = {t: e.weights for t, e in zip(texts, encodings, strict=True)}
    out = []
    for r in rows:
        w = words.unit_word[r["from_unit_index"]] if "from_unit_index" in r else None
        entry = {"token": r["token"], "weight": r["weight"], "from_word": r.get("from_word")}
        if w in deletable:
            cols = term_columns(r, model.vocab)
            weight_after = float(np.max(after[edits[w]][cols])) if cols else 0.0
            ratio = weight_after / r["weight"] if r["weight"] else None
            entry |= {
                "edited_text": edits[w],
                "weight_after": weight_after,
                "ratio": ratio,
                "dropped": bool(weight_after <= DROP * r["weight"]),
            }
        out.append(entry)
    tested = [e for e in out if "dropped" in e]
    return ProvenanceFaithfulness(
        text=text,
        terms=out,
        merged=merged,
        tested=len(tested),
        untested=len(out) - len(tested),
        dropped_share=float(np.mean([e["dropped"] for e in tested])) if tested else None,
        notes=list(shown.notes),
    )
