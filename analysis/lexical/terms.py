"""Top terms of a lexical input (a text, an image or an image region, dense features): the use
case, and provenance (which input token or patch produced each term)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lexlens.analysis.collections.options import FEATURE_IDS
from lexlens.analysis.core.arguments import (
    device_argument,
    encoder_argument,
    encoder_or_spec,
    image_argument,
    text_argument,
)
from lexlens.analysis.core.grid import FULL_BOX
from lexlens.analysis.core.options import Options, option, shared
from lexlens.analysis.core.results import Record, Result, internal
from lexlens.analysis.core.truncation import truncation
from lexlens.analysis.core.vocabulary import is_special_token, own_tokens
from lexlens.analysis.core.words import Term, input_words, spelling, top_terms, unit_words
from lexlens.analysis.lexical.patches import cell_indices, check_box, parse_box, patch_group
from lexlens.analysis.render.html import NOTEBOOK_ROWS, num, render_fragment
from lexlens.models.base import (
    Capability,
    Encoder,
    InputError,
    LexicalEncoding,
    Needs,
    check_texts,
    pool_units,
)

if TYPE_CHECKING:
    from lexlens.analysis.datasets.feature_files import FeatureTable


@dataclass(frozen=True)
class TermProvenance(Record):
    """Which input unit (token or patch) won the max pool for a term."""

    term: Term
    unit_index: int
    unit: str
    unit_weight: float
    in_input: bool  # the term is one of the input's own tokens (bag of words)


def provenance(
    encoding: LexicalEncoding, terms: list[Term], units: list[int] | None = None
) -> list[TermProvenance]:
    """For each term, the unit whose row won the max pool (argmax over ``units``, or all)."""
    if encoding.unit_weights is None:
        raise ValueError("this encoding was made without per-unit rows (keep_units=False)")
    own = own_tokens(encoding)
    candidates = np.arange(len(encoding.units)) if units is None else np.asarray(units)
    rows = encoding.unit_weights[candidates]
    out = []
    for term in terms:
        column = rows[:, list(term.columns)].max(axis=1)
        unit = int(candidates[int(np.argmax(column))])
        weight = float(encoding.unit_weights[unit, list(term.columns)].max())
        out.append(TermProvenance(term, unit, encoding.units[unit], weight, term.token in own))
    return out


def term_rows(
    encoding: LexicalEncoding,
    vocab: list[str],
    k: int = 20,
    *,
    units: list[int] | None = None,
    merge_pieces: bool = False,
    words: set[str] | frozenset[str] = frozenset(),
) -> list[dict]:
    """Top terms as table rows: token, weight, index, ``in_input`` and provenance.

    ``units`` restricts the view to a group of units (a patch group): their pooled rows
    give the weights, and provenance is sought among them. ``from_unit`` (the unit that
    won the max pool) is given when per-unit rows were kept, and for a text ``from_word``,
    the whole input word that unit belongs to. ``in_input`` marks
    bag-of-words terms (the input's own tokens) against expansion terms. Pieces merge
    into the input's own words and any ``words`` given (see :func:`merge_word_pieces`).
    """

    if units is not None and encoding.unit_weights is not None:
        weights = pool_units(encoding.unit_weights[units], encoding.normalization)
    else:
        weights = encoding.weights
    words = set(words) | input_words(encoding.units if encoding.input_ids is not None else [])
    terms = top_terms(weights, vocab, k, merge_pieces=merge_pieces, words=words)
    rows = [t.to_dict() for t in terms]
    own = own_tokens(encoding)
    for row, term in zip(rows, terms, strict=True):
        row["in_input"] = vocab[term.index] in own
        if term.pieces:
            row["pieces"] = [vocab[i] for i in term.pieces]
            # the whole spelling, for reading ("pieces": those that lend the word weight)
            row["spelling"] = spelling(term, vocab)
    if encoding.unit_weights is not None:
        # the whole input word each unit of a text belongs to, worked out once
        words_of = unit_words(encoding.units) if encoding.input_ids is not None else None
        for row, prov in zip(rows, provenance(encoding, terms, units), strict=True):
            row["from_unit"] = prov.unit
            row["from_unit_index"] = prov.unit_index
            if words_of is not None:
                row["from_word"] = words_of[prov.unit_index]
    return rows


# ----------------------------------------------------------------------------- use case

#: The Text page and ``terms --text`` need a lexical text encoder.
TEXT_NEEDS = Needs("terms of a text", all_of=frozenset({Capability.TEXT_LEXICAL}))
#: ``terms --image``: a lexical image encoder.
IMAGE_TERMS_NEEDS = Needs("terms of an image", all_of=frozenset({Capability.IMAGE_LEXICAL}))
#: ``terms --features``: a head over dense feature vectors (D2S).
FEATURES_NEEDS = Needs("terms of dense features", all_of=frozenset({Capability.FEATURE_LEXICAL}))


#: The most terms one view lists.
MAX_TOP_TERMS = 10_000
#: Terms per text of a terms report (:func:`lexlens.analysis.lexical.report.terms_report`,
#: ``lexlens report``'s ``top``), unless asked otherwise: a word cloud's worth.
REPORT_TOP = 30


@dataclass(frozen=True)
class TermsOptions(Options):
    """How the terms of one input are taken (``lexlens terms``, the Text and Images pages):
    how many, the text tower, an image region, and for dense features the file of their
    ids."""

    what = "terms"

    top: int = option(
        20, "how many terms", low=1, high=MAX_TOP_TERMS, label="Top terms", widget="slider"
    )
    side: str = option(
        "query", "the text tower of a bi-encoder", choices=("query", "document"), label="Tower"
    )
    box: tuple[float, float, float, float] | None = option(
        None,
        "a region of the image (a patch group)",
        parse=parse_box,
        check=check_box,
        metavar="X0,Y0,X1,Y1",
        wanted="X0,Y0,X1,Y1: four fractions of the image in 0..1, X0 < X1 and Y0 < Y1",
    )
    ids: str | Path | None = shared(FEATURE_IDS)


@dataclass(frozen=True)
class TermsResult(Result):
    """Top terms of one input (a text, an image, or a region of an image).

    ``terms`` keeps the raw vocabulary tokens (word pieces included); ``merged_terms`` is
    the display view with pieces joined into words where there is evidence for it (a
    merged row's ``pieces`` lists the tokens whose largest weight is the word's weight).
    For an image region, ``input`` holds the ``box`` and the ``cells`` it selected.
    """

    file_stem = "terms"

    encoder: str
    input: dict
    terms: list[dict]
    merged_terms: list[dict]
    notes: list[str]
    #: The image an image's terms are of, as a display copy (RGB, ``uint8 [height, width,
    #: 3]``, at most :data:`PICTURE_SIDE` on its longer side): the notebook view draws the
    #: patch grid and the group on it. Not in the JSON.
    picture: np.ndarray | None = internal(default=None, repr=False, compare=False)

    def top(self, k: int = 10, *, merged: bool = True) -> list[tuple[str, float]]:
        rows = self.merged_terms if merged else self.terms
        return [(r["token"], r["weight"]) for r in rows[:k]]

    def frame_rows(self) -> list[dict]:
        """The top terms (pieces joined, as the pages show them): rank, term, weight, kind
        (the input's own token or an expansion), the input word or unit that gave it its
        weight (provenance, when recorded), its pieces and vocabulary index."""
        return [
            {
                "rank": rank,
                "term": r["token"],
                "weight": float(r["weight"]),
                "kind": term_kind(r),
                "from": r.get("from_word") or r.get("from_unit") or "",
                "pieces": " ".join(r.get("pieces") or []),
                "index": int(r["index"]),
            }
            for rank, r in enumerate(self.merged_terms, 1)
        ]

    def notebook_html(self) -> str:
        """The word cloud and the top-terms table with provenance, as the terms report
        draws them (the first :data:`~lexlens.analysis.render.html.NOTEBOOK_ROWS` rows)."""

        rows = self.frame_rows()
        shown = rows[:NOTEBOOK_ROWS]
        columns = ["rank", "term", "weight", "kind", "from"]
        group = "cells" in self.input
        return render_fragment(
            "notebook.html",
            title=f"{'Patch group' if group else 'Top terms'} — {self.encoder}: "
            f"{input_label(self.input)}",
            notes=list(self.notes),
            summary=f"The group: {selection_text(self)}, tinted on the grid; its terms are "
            "the max over its patches"
            if group
            else "",
            picture=self.picture_url(),
            cloud=cloud_url(self.merged_terms[:NOTEBOOK_ROWS]),
            table={
                "columns": columns,
                "rows": [[r[c] if c != "weight" else num(r[c]) for c in columns] for r in shown],
            },
            numeric=(0, 2),
            bars=[],
            more=len(rows) - len(shown),
        )

    def picture_url(self) -> str:
        """The image with its patch grid and the group's cells tinted, as the Images page
        draws it (an inline PNG, a ``data:`` URL); empty without a picture or a grid."""
        grid = self.input.get("grid")
        if self.picture is None or not grid:
            return ""
        # heavy: PIL loads on first use
        from PIL import Image

        from lexlens.analysis.render.patch_render import draw_grid  # heavy: loads PIL

        cells = self.input.get("cells")
        groups = [cell_indices(grid, cells)] if cells else []
        crop = tuple(self.input.get("crop_box") or FULL_BOX)
        drawn = draw_grid(Image.fromarray(self.picture), tuple(grid), crop, groups)
        return png_url(drawn)


#: The longer side of the picture a result of an image keeps for its notebook view.
PICTURE_SIDE = 480

#: How long an input's text is shown in a title.
TITLE_CHARACTERS = 120


def input_label(input: dict) -> str:
    """An input in a few words: its text (cut), its image and region, or its feature row."""
    if input.get("text"):
        text = str(input["text"])
        return text if len(text) <= TITLE_CHARACTERS else text[:TITLE_CHARACTERS] + "…"
    image = input.get("image")
    parts = [Path(str(image)).name if image else str(input.get("name") or "")]
    if "box" in input or "cells" in input:
        box = ",".join(f"{v:g}" for v in input.get("box", []))
        parts.append(f"box {box}" if box else f"{len(input.get('cells', []))} cells")
    return " ".join(p for p in parts if p) or "the input"


def term_kind(row: dict) -> str:
    """A term row's kind: one of the input's own tokens (bag of words) or an expansion."""
    return "bag of words" if row.get("in_input") else "expansion"


def cloud_url(rows: Sequence[dict]) -> str:
    """Term rows' word cloud as an inline PNG (a ``data:`` URL): font size ∝ weight, the
    input's own tokens dark blue, expansion terms orange."""

    from lexlens.analysis.render.plots import wordcloud_image  # heavy: loads PIL

    terms = [Term(r["token"], float(r["weight"]), int(r["index"])) for r in rows]
    own = {r["token"] for r in rows if r.get("in_input")}
    return png_url(wordcloud_image(terms, highlight=own))


def png_url(image: Any) -> str:
    """A PIL image as an inline PNG (a ``data:`` URL)."""
    from lexlens.analysis.render.plots import png_bytes  # heavy: loads PIL

    return "data:image/png;base64," + base64.b64encode(png_bytes(image)).decode("ascii")


def selection_text(result: TermsResult) -> str:
    """How a patch group was chosen, in a few words ("box 0,0,0.5,1 → 21 cells")."""
    if "box" in result.input:
        box = ",".join(f"{v:g}" for v in result.input["box"])
        return f"box {box} → {len(result.input['cells'])} cells"
    return f"cells {', '.join(result.input.get('cells', []))}"


def term_records(scoped: Sequence[tuple[str, TermsResult]], *, merged: bool) -> list[dict]:
    """Rows of a terms table over several results (the whole image, its patch groups…):
    scope, view (merged words or raw tokens), token and weight."""
    view = "merged" if merged else "raw"
    return [
        {"scope": scope, "view": view, "token": r["token"], "weight": r["weight"]}
        for scope, result in scoped
        for r in (result.merged_terms if merged else result.terms)
    ]


def encode_text(encoder: Encoder, text: str, *, side: str = "query") -> LexicalEncoding:
    """One text through a lexical text encoder (validated before the model runs)."""
    check_texts([text])
    TEXT_NEEDS.check(encoder)
    return encoder.encode_texts([text], side=side)[0]


def encode_image(encoder: Encoder, image: Any, *, name: str | None = None) -> LexicalEncoding:
    """One image (a path, bytes, or a PIL image) through a lexical image encoder."""
    IMAGE_TERMS_NEEDS.check(encoder)
    return encoder.encode_images([_picture(image, name)])[0]


def _picture(image: Any, name: str | None) -> Any:
    """The PIL image of a path, bytes or a PIL image (``name``: what messages call it)."""
    from PIL import Image  # heavy: PIL loads on first use

    from lexlens.models.images import load_image  # heavy: loads PIL

    return image if isinstance(image, Image.Image) else load_image(image, name=name or "")


def feature_row(
    features: Any, item: str | int | None = None, *, name: str | None = None, ids: Any = None
) -> tuple[FeatureTable, int]:
    """A dense features file read (or a read :class:`FeatureTable` as given) and the row of
    ``item``, its id (optional when the file holds one vector): checked before any head
    loads."""
    # heavy: loads torch
    from lexlens.analysis.datasets.feature_files import FeatureTable, read_features

    table = (
        features
        if isinstance(features, FeatureTable)
        else read_features(features, name=name, ids=ids)
    )
    if item is None or (isinstance(item, str) and not item.strip()):
        if len(table) != 1:
            shown = ", ".join(table.ids[:3])
            raise InputError(
                f"{table.name} holds {len(table)} vectors: pick one by its id (e.g. {shown})"
            )
        return table, 0
    return table, table.position(item)


def encode_feature_row(
    encoder: Encoder, table: FeatureTable, row: int
) -> tuple[LexicalEncoding, dict]:
    """Row ``row`` of a features table through a feature head (its dimension checked first),
    and the input description ``{"features": file, "item": id}``."""
    FEATURES_NEEDS.check(encoder)
    if table.dim != encoder.feature_dim:
        raise InputError(
            f"{Path(table.name).name} holds {table.dim}-d vectors but the head {encoder.name!r} "
            f"expects {encoder.feature_dim}-d (its dense_size)"
        )
    encoding = encoder.encode_features(table.vectors[row : row + 1])[0]
    return encoding, {"features": Path(table.name).name, "item": table.ids[row]}


def terms_of_encoding(
    encoder: Encoder,
    encoding: LexicalEncoding,
    *,
    cells: list[str] | None = None,
    input_info: dict | None = None,
    image: Any = None,
    options: TermsOptions | None = None,
    **given: Any,
) -> TermsResult:
    """The :class:`TermsResult` of an encoding, or of the patch group a box (in the options)
    or ``cells`` select; ``image`` (a PIL image, the one encoded) is kept as a small copy the
    notebook view draws the grid and the group on."""
    options = TermsOptions.of(options, **given)
    top, box = options.top, options.box
    info = dict(input_info or {})
    units = patch_group(encoding, box, cells)
    if units is not None:
        if box is not None:
            info["box"] = list(box)
        info["cells"] = [encoding.units[i] for i in units]
    if encoding.grid is not None:
        info["grid"] = list(encoding.grid)
        info["crop_box"] = list(encoding.crop_box or FULL_BOX)
    raw = term_rows(encoding, encoder.vocab, top, units=units)
    merged = term_rows(
        encoding, encoder.vocab, top, units=units, merge_pieces=True, words=encoder.known_words
    )
    notes = list(encoding.notes)
    text = info.get("text")
    if encoding.truncated and isinstance(text, str):
        notes.append(truncation(encoder, text, encoding, "input").note())
    elif encoding.truncated:
        notes.append(f"input truncated to the encoder's limit of {encoder.max_length} tokens")
    if "text" in info and encoding.units and all(is_special_token(u) for u in encoding.units):
        notes.append(
            "the text has no token of the encoder's vocabulary (only "
            + ", ".join(dict.fromkeys(encoding.units))
            + "): its terms come from these special tokens alone, not from its words"
        )
    return TermsResult(encoder.name, info, raw, merged, notes, picture=_display_array(image))


def _display_array(image: Any) -> np.ndarray | None:
    """A PIL image's display copy (at most :data:`PICTURE_SIDE` a side) as an RGB array."""
    if image is None:
        return None
    from lexlens.analysis.render.patch_render import display_copy  # heavy: loads PIL

    return np.asarray(display_copy(image, PICTURE_SIDE), dtype=np.uint8)


def terms(
    encoder: Encoder | str,
    *,
    text: str | None = None,
    image: Any = None,
    features: Any = None,
    item: str | int | None = None,
    name: str | None = None,
    cells: list[str] | None = None,
    device: str | None = None,
    options: TermsOptions | None = None,
    **given: Any,
) -> TermsResult:
    """Top terms of a text, an image, an image region (the ``box`` option, in fractions
    0..1, or ``cells``), or one item of a dense features file (``features`` with its
    ``item`` id and the ``ids`` option; a D2S head). ``encoder`` is loaded, or its spec (a
    registry name, a checkpoint folder) loaded on ``device`` once every input is checked and
    read (a registry name's card is checked first). Options: :class:`TermsOptions` (or its
    fields as keywords)."""
    options = TermsOptions.of(options, **given)
    device_argument(device)
    kind = _input_kind(text, image, features, item, cells, options)
    needs = {"text": TEXT_NEEDS, "image": IMAGE_TERMS_NEEDS, "features": FEATURES_NEEDS}[kind]
    encoder_or_spec(encoder, needs=needs)
    if kind == "features":
        table, row = feature_row(features, item, name=name, ids=options.ids)
        model = encoder_argument(encoder, needs=needs, device=device)
        encoding, info = encode_feature_row(model, table, row)
        return terms_of_encoding(model, encoding, input_info=info, options=options)
    if kind == "text":
        model = encoder_argument(encoder, needs=needs, device=device)
        encoding = model.encode_texts([text], side=options.side)[0]
        info = {"text": text, "side": options.side}
        picture = None
    else:
        label = name or (str(image) if isinstance(image, (str, Path)) else None)
        picture = _picture(image_argument(image, "image"), label)
        model = encoder_argument(encoder, needs=needs, device=device)
        encoding = model.encode_images([picture])[0]
        info = {"image": label or "image"}
    return terms_of_encoding(
        model,
        encoding,
        cells=cells,
        input_info=info,
        image=picture,
        options=options,
    )


def _input_kind(
    text: Any, image: Any, features: Any, item: Any, cells: Any, options: TermsOptions
) -> str:
    """Which one input is given ("text", "image" or "features"), checked with what applies
    to one kind only (a box or cells, an item id and its ids) before anything is read."""
    if sum(x is not None for x in (text, image, features)) != 1:
        raise InputError("give one of a text, an image or dense features")
    if text is not None:
        check_texts([text_argument(text, "text")])
    if (options.box is not None or cells is not None) and image is None:
        raise InputError("a box or cells apply to images only")
    if features is None and item is not None:
        raise InputError("an item id applies to dense features only")
    if features is None and options.ids is not None:
        raise InputError("ids apply to dense features only")
    return "text" if text is not None else "image" if image is not None else "features"
