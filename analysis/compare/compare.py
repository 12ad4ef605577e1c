"""Compare two encoders — or one encoder at two gate k — on one input or a stored collection.

Two *sides*, A and B, each an encoder and a gate k. Every number is read off the retrieval
representation ``E(x) = V(x) ⊙ G(x)`` (VDR's gate: the top-k dimensions of ``V`` plus, for a
text, its own tokens) at each side's gate k.

**One input** (a text, or an image with an optional box):

- *terms*: the terms active (``E > 0``, special tokens left out) in both sides, only in A,
  only in B, with both weights and their rank on each side. Terms are matched by their
  token string, so encoders with different vocabularies (a VDR checkpoint's 29,523 or 27,623
  terms against BERT's 30,522) are compared on the tokens they share; the result counts how
  many tokens of each vocabulary have no counterpart in the other, and marks a term "only in
  A" that B's vocabulary cannot express at all (``in_vocab_b`` false). ``merged`` is the
  same on the display view, word pieces joined into words (as the Terms view shows them):
  the words of either side's merged terms, each weighing on a side its merged weight there,
  or else the smallest weight of its pieces there (a word is on a side only if all its
  pieces are), and a piece one side keeps alone weighs the other side's weight of it
  (:mod:`lexlens.analysis.compare.term_comparison`);
- *rank correlation*: Spearman's ρ (``scipy.stats.spearmanr``) between A's and B's gated
  weights of the terms active in both (raw tokens, not merged words). Fewer than two shared
  terms, or constant weights on a side, give ``null`` and a note (never NaN). ρ says
  whether the two sides *order* their shared terms alike; it ignores the terms only one of
  them has (see the counts) and the weights' scales (which differ between families);
- for an image: the same comparison on a *patch group* (a box in fractions of the image, or
  cells when both grids have the same shape): each side pools its own patches under the
  box (max over them, then its gate), so the two grids may differ in shape; and the
  *heatmap* of one term on each side's grid (per-patch ``V``, before pooling and gating)
  (:mod:`lexlens.analysis.compare.image_comparison`).

The settings are :class:`~lexlens.analysis.compare.options.CompareOptions`. Stored
collections are compared by :mod:`lexlens.analysis.compare.compare_collections`; the report
files are :mod:`lexlens.analysis.compare.compare_report`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from lexlens.analysis.compare.image_comparison import ImageSide, compare_group, heatmap
from lexlens.analysis.compare.options import CompareOptions, default_gates
from lexlens.analysis.compare.result import CompareResult, TermComparison
from lexlens.analysis.compare.sides import COMPARE_NEEDS, check_sides, describe_side, side_of
from lexlens.analysis.compare.term_comparison import compare_sides
from lexlens.analysis.compare.vocabularies import vocabulary_note, vocabulary_overlap
from lexlens.analysis.core.arguments import (
    device_argument,
    encoder_argument,
    encoder_or_spec,
    image_argument,
    loaded_encoder,
    text_argument,
)
from lexlens.analysis.lexical.terms import encode_image, encode_text
from lexlens.models.base import Encoder, InputError, LexicalEncoding


# ----------------------------------------------------------------------------- checks
def check_encoding(side: str, encoder: Any, encoding: Any) -> None:
    """``encoder_<side>`` is a loaded encoder and ``encoding_<side>`` one of its encodings
    (a weight per term of its vocabulary)."""
    loaded_encoder(encoder, f"encoder_{side}")
    if not isinstance(encoding, LexicalEncoding):
        raise InputError(
            f"encoding_{side} must be a LexicalEncoding (encode_texts or encode_images), not "
            f"{type(encoding).__name__}"
        )
    if len(encoding.weights) != len(encoder.vocab):
        raise InputError(
            f"encoding_{side} holds {len(encoding.weights):,} weights but encoder_{side}'s "
            f"vocabulary has {len(encoder.vocab):,} terms: encode the input with encoder_{side}"
        )


def checked_cells(cells: Any) -> list[str] | None:
    """Cell names (``r0c1``…) as a list, or ``None``."""
    if cells is None:
        return None
    if isinstance(cells, str) or not isinstance(cells, Sequence):
        raise InputError(f"cells must be a list of cell names (r0c1…), not {type(cells).__name__}")
    if not all(isinstance(c, str) for c in cells):
        raise InputError("cells must be a list of cell names (r0c1…), each a string")
    if not cells:
        raise InputError("cells must name at least one cell (r0c1…)")
    return list(cells)


def _check_region(image: bool, options: CompareOptions, cells: list[str] | None) -> None:
    """A box, cells and a heatmap term apply to images; a box or cells, not both."""
    if (options.box is not None or cells is not None) and not image:
        raise InputError("a box or cells apply to images only")
    if options.term is not None and not image:
        raise InputError("a heatmap term applies to images only")
    if options.box is not None and cells is not None:
        raise InputError("give a box or cells, not both")


def _input_of(text: Any, image: Any, name: Any) -> tuple[str, Any, str]:
    """(kind, the text or the opened image, the image's name), checked."""
    text_argument(name, "name", optional=True, about="the image's name")
    if (text is None) == (image is None):
        raise InputError("give a text or an image to compare on (one of them)")
    if text is not None:
        if not text_argument(text, "text").strip():
            raise InputError("the text is empty: type some words to compare on")
        if name is not None:
            raise InputError("name is the name of an image: give it with image=")
        return "text", text, ""
    from PIL import Image  # heavy: PIL loads on first use

    from lexlens.models.images import load_image  # heavy: loads PIL

    if isinstance(image_argument(image, "image"), Image.Image):
        return "image", image, name or "image"
    label = name or (str(image) if isinstance(image, (str, Path)) else "uploaded image")
    return "image", load_image(image, name=label), label


# ----------------------------------------------------------------------------- one input
def _notes(vocab: dict, terms: TermComparison, sides: Sequence[ImageSide]) -> list[str]:
    """The vocabulary note, ρ's note, each side's encoding notes and truncation."""
    notes = [n for n in (vocabulary_note(vocab),) if n]
    if terms.rank_correlation.get("note"):
        notes.append(f"rank correlation: {terms.rank_correlation['note']}")
    for label, (encoder, encoding, _) in zip("AB", sides, strict=True):
        notes += [f"{label}: {n}" for n in encoding.notes]
        if encoding.truncated:
            notes.append(f"{label}: input truncated to {encoder.max_length} tokens")
    return notes


def compare_encodings(
    encoder_a: Encoder,
    encoding_a: LexicalEncoding,
    encoder_b: Encoder,
    encoding_b: LexicalEncoding,
    *,
    cells: list[str] | None = None,
    input_info: dict | None = None,
    options: CompareOptions | None = None,
    **given: Any,
) -> CompareResult:
    """The :class:`CompareResult` of two encodings of the same input (no model runs).

    Options (:class:`CompareOptions`, or its fields as keywords): ``gate_k`` (default
    :func:`default_gates`), ``top``; for an image a ``box`` (or ``cells``) adds the
    patch-group comparison and ``term`` picks the word whose heatmap is shown on both grids
    (default: the heaviest term both share, else A's heaviest).
    """
    options = CompareOptions.of(options, **given)
    check_encoding("a", encoder_a, encoding_a)
    check_encoding("b", encoder_b, encoding_b)
    cells = checked_cells(cells)
    if input_info is not None and not isinstance(input_info, Mapping):
        raise InputError(f"input_info must be a mapping, not {type(input_info).__name__}")
    image = encoding_a.grid is not None
    if image != (encoding_b.grid is not None):
        raise InputError(
            "A and B must encode the same kind of input (both a text or both an image)"
        )
    _check_region(image, options, cells)
    kind = "image" if image else "text"
    ka, kb = options.gate_k or default_gates(kind, encoder_a is encoder_b)
    side_a: ImageSide = (encoder_a, encoding_a, ka)
    side_b: ImageSide = (encoder_b, encoding_b, kb)
    vocab = vocabulary_overlap(encoder_a.vocab, encoder_b.vocab)
    terms = compare_sides(
        side_of(encoder_a, encoding_a, ka), side_of(encoder_b, encoding_b, kb), top=options.top
    )
    notes = _notes(vocab, terms, (side_a, side_b))
    group = None
    if image and (options.box is not None or cells is not None):
        group = compare_group(side_a, side_b, options.box, cells, options.top)
    shown = heatmap(side_a, side_b, options.term, terms, notes) if image else None
    return CompareResult(
        kind=kind,
        a=describe_side(encoder_a, ka, encoding_a),
        b=describe_side(encoder_b, kb, encoding_b),
        input=dict(input_info or {}),
        vocabulary=vocab,
        terms=terms,
        group=group,
        heatmap=shown,
        notes=list(dict.fromkeys(notes)),
    )


def compare(
    encoder_a: Encoder | str,
    encoder_b: Encoder | str | None = None,
    *,
    text: str | None = None,
    image: Any = None,
    name: str | None = None,
    cells: list[str] | None = None,
    device: str | None = None,
    options: CompareOptions | None = None,
    **given: Any,
) -> CompareResult:
    """Compare A and B on a text or an image (a path, bytes or a PIL image; ``name`` is the
    name results and messages use). Encoders may be given by name (loaded on ``device``);
    ``encoder_b`` defaults to ``encoder_a``. Options: :class:`CompareOptions` (or its fields
    as keywords): ``gate_k`` one value for both sides or (A's, B's), default
    :func:`default_gates`; ``top``; ``box`` (fractions ``(x0, y0, x1, y1)``) and ``term``
    for an image.

    Inputs, options and both encoders' capabilities are checked before anything is encoded
    (an encoder given by name is checked from its card before it loads).
    """
    options = CompareOptions.of(options, **given)
    device_argument(device)
    encoder_b = encoder_a if encoder_b is None else encoder_b
    cells = checked_cells(cells)
    kind, value, label = _input_of(text, image, name)
    _check_region(kind == "image", options, cells)
    needs = COMPARE_NEEDS[kind]
    # both checked (a registry name from its card) before either loads
    encoder_or_spec(encoder_a, "encoder_a", needs)
    encoder_or_spec(encoder_b, "encoder_b", needs)
    encoder_a = encoder_argument(encoder_a, "encoder_a", needs, device)
    encoder_b = encoder_argument(encoder_b, "encoder_b", needs, device)
    gates = options.gate_k or default_gates(kind, encoder_b is encoder_a)
    check_sides(encoder_a, encoder_b, kind, gates)
    encode = encode_text if kind == "text" else encode_image
    enc_a = encode(encoder_a, value)
    enc_b = enc_a if encoder_b is encoder_a else encode(encoder_b, value)
    info = {"text": value} if kind == "text" else {"image": label}
    return compare_encodings(
        encoder_a,
        enc_a,
        encoder_b,
        enc_b,
        cells=cells,
        input_info=info,
        options=replace(options, gate_k=gates),
    )
