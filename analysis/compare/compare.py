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
  pieces are), and a piece one side keeps alone weighs the other side's weight of it;
- *rank correlation*: Spearman's ρ (``scipy.stats.spearmanr``) between A's and B's gated
  weights of the terms active in both (raw tokens, not merged words). Fewer than two shared
  terms, or constant weights on a side, give ``null`` and a note (never NaN). ρ says
  whether the two sides *order* their shared terms alike; it ignores the terms only one of
  them has (see the counts) and the weights' scales (which differ between families);
- for an image: the same comparison on a *patch group* (a box in fractions of the image, or
  cells when both grids have the same shape): each side pools its own patches under the
  box (max over them, then its gate), so the two grids may differ in shape; and the
  *heatmap* of one term on each side's grid (per-patch ``V``, before pooling and gating).

Stored collections are compared by :mod:`lexlens.analysis.compare.compare_collections`; the report
files are :mod:`lexlens.analysis.compare.compare_report`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.compare.result import CompareResult, TermComparison
from lexlens.analysis.compare.vocabularies import vocabulary_note, vocabulary_overlap
from lexlens.analysis.core.gating import DEFAULT_GATE_K, check_gate_k, gate
from lexlens.analysis.core.vocabulary import is_special_token, own_tokens
from lexlens.analysis.core.words import input_words, top_terms
from lexlens.analysis.lexical.patches import (
    box_to_patches,
    check_box,
    parse_box,
    term_heat,
    units_to_indices,
)
from lexlens.analysis.lexical.terms import encode_image, encode_text
from lexlens.models.base import (
    Capability,
    Encoder,
    InputError,
    LexicalEncoding,
    Needs,
    pool_units,
)
from lexlens.models.registry import as_encoder, check_spec, encoder_card

#: What comparing needs of *both* encoders, per kind of input.
COMPARE_TEXT_NEEDS = Needs(
    "comparing encoders on a text", all_of=frozenset({Capability.TEXT_LEXICAL})
)
COMPARE_IMAGE_NEEDS = Needs(
    "comparing encoders on an image", all_of=frozenset({Capability.IMAGE_LEXICAL})
)
#: A stored collection is searched with text queries and measured against the tokens of its
#: texts or captions: each side needs a text encoder in its index's vocabulary.
COMPARE_INDEX_NEEDS = Needs(
    "comparing encoders on a stored collection", all_of=frozenset({Capability.TEXT_LEXICAL})
)
#: The Needs of each kind of input (the page's pickers list only encoders that satisfy it).
COMPARE_NEEDS = {
    "text": COMPARE_TEXT_NEEDS,
    "image": COMPARE_IMAGE_NEEDS,
    "index": COMPARE_INDEX_NEEDS,
}

#: Rows listed per table (terms, hits); counts and ρ always cover everything.
DEFAULT_TOP = 20
DEFAULT_HITS = 10
#: Below this many shared terms, ρ comes with a note that it rests on very few points.
FEW_SHARED = 5


# ----------------------------------------------------------------------------- options
def check_top(top: Any, what: str = "--top") -> int:
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InputError(f"{what} must be a positive integer, not {top!r}")
    return top


#: One encoder on both sides compares two gates: B keeps this many dimensions by default.
SAME_ENCODER_GATE_B = {"text": 8, "image": 64}


def default_gates(kind: str, same: bool, stored: tuple[int, int] | None = None,
                  mean_active: float | None = None) -> tuple[int, int]:  # fmt: skip
    """The gate k of A and B when none is given — one rule for the page and the command.

    Two encoders (or two indexes): each side at its own default (:data:`DEFAULT_GATE_K` for
    an input, the stored k for an index). One encoder on one input or one index: A at that
    default and B at a smaller gate — :data:`SAME_ENCODER_GATE_B` for an input, half the
    index's mean number of stored terms (at most its stored k) for an index — so the two
    sides differ.
    """
    ka, kb = stored if stored is not None else (DEFAULT_GATE_K, DEFAULT_GATE_K)
    if not same:
        return ka, kb
    if stored is None:
        return ka, SAME_ENCODER_GATE_B.get(kind, SAME_ENCODER_GATE_B["text"])
    half = max(1, int((mean_active or 2) // 2))
    return ka, half if kb == -1 else min(half, kb)


def gate_pair(values: Sequence[int] | int | None, default: tuple[int, int]) -> tuple[int, int]:
    """Gate k of A and B: none given → ``default``; one → both sides; two → A, B (in order)."""
    if values is None:
        return default
    if isinstance(values, int) and not isinstance(values, bool):
        values = [values]
    values = list(values)
    if len(values) > 2:
        raise InputError(f"give the gate k at most twice (one per side), not {len(values)} times")
    ks = [check_gate_k(v) for v in values]
    if not ks:
        return default
    return (ks[0], ks[0]) if len(ks) == 1 else (ks[0], ks[1])


def check_sides(a: Encoder, b: Encoder, kind: str, gate_k: tuple[int, int]) -> None:
    """Both encoders can take the input (``kind`` "text" or "image") and A differs from B
    (another encoder, or another gate k): checked before anything is encoded."""
    if kind not in ("text", "image"):
        raise InputError(f"compare a text or an image here, not {kind!r}")
    needs = COMPARE_NEEDS[kind]
    needs.check(a)
    needs.check(b)
    if a is b and gate_k[0] == gate_k[1]:
        raise InputError(
            f"A and B are the same encoder ({a.name!r}) at the same gate k ({gate_k[0]}): "
            "nothing to compare; give a second encoder or a second gate k"
        )


# ----------------------------------------------------------------------------- sides
def token_index(vocab: list[str]) -> dict[str, int]:
    """Token → its first position in ``vocab``."""
    index: dict[str, int] = {}
    for i, token in enumerate(vocab):
        index.setdefault(token, i)
    return index


@dataclass(frozen=True)
class _Side:
    """One side's gated vector and what the comparison needs to read it."""

    vocab: list[str]
    lookup: dict[str, int]
    gated: np.ndarray  # E = V ⊙ G
    ungated: np.ndarray  # V
    words: set[str]  # evidence for merging pieces (input words, known words)
    own: set[str]  # the input's own tokens (bag of words; empty for images)

    def active(self) -> tuple[dict[str, float], dict[str, int]]:
        """Active terms (E > 0, no special tokens) → weight, and their rank (1 = heaviest)."""
        idx = np.flatnonzero(self.gated > 0)
        idx = np.array([i for i in idx if not is_special_token(self.vocab[i])], dtype=np.int64)
        if idx.size == 0:
            return {}, {}
        order = idx[np.lexsort((idx, -self.gated[idx]))]
        weights: dict[str, float] = {}
        for i in order:
            weights.setdefault(self.vocab[int(i)], float(self.gated[int(i)]))
        return weights, {t: r for r, t in enumerate(weights, start=1)}

    def merged(self) -> dict[str, tuple[float, list[str]]]:
        """The display view: active terms with word pieces joined (token → weight, pieces)."""
        n = int(np.count_nonzero(self.gated > 0))
        if n == 0:
            return {}
        terms = top_terms(self.gated, self.vocab, n, merge_pieces=True, words=self.words)
        out: dict[str, tuple[float, list[str]]] = {}
        for t in terms:
            out.setdefault(t.token, (t.weight, [self.vocab[i] for i in t.pieces]))
        return out


def _side(encoder: Encoder, encoding: LexicalEncoding, k: int, weights=None) -> _Side:
    """A side from an encoding (or a patch group's pooled ``weights``), gated at ``k``."""
    source = encoding if weights is None else replace(encoding, weights=weights)
    words = set(encoder.known_words)
    if encoding.input_ids is not None:
        words |= input_words(encoding.units)
    return _Side(
        vocab=encoder.vocab,
        lookup=token_index(encoder.vocab),
        gated=gate(source, encoder.vocab, k),
        ungated=np.asarray(source.weights, dtype=np.float32),
        words=words,
        own={t for t in own_tokens(encoding) if not is_special_token(t)},
    )


# ----------------------------------------------------------------------------- terms
def spearman(a: Sequence[float], b: Sequence[float]) -> dict:
    """Spearman's ρ of paired weights, or ``None`` with a note when it is not defined."""
    n = len(a)
    out: dict[str, Any] = {"method": "spearman", "n": n, "rho": None, "p_value": None}
    if n < 2:
        out["note"] = (
            f"{'no term is' if n == 0 else 'only one term is'} active in both: a rank "
            "correlation needs at least two shared terms"
        )
        return out
    if len(set(a)) < 2 or len(set(b)) < 2:
        out["note"] = "one side gives every shared term the same weight: ρ is not defined"
        return out
    from scipy.stats import spearmanr

    rho, p = spearmanr(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    rho, p = float(rho), float(p)
    out["rho"] = rho if math.isfinite(rho) else None
    out["p_value"] = p if math.isfinite(p) else None
    if out["rho"] is None:
        out["note"] = "ρ is not defined for these weights"
    elif n < FEW_SHARED:
        out["note"] = f"only {n} shared terms: ρ rests on very few points"
    else:
        out["note"] = None
    return out


def compare_sides(a: _Side, b: _Side, *, top: int) -> TermComparison:
    """The :class:`TermComparison` of two gated vectors, matched by token string."""
    wa, ra = a.active()
    wb, rb = b.active()
    own = a.own | b.own
    shared_tokens = [t for t in wa if t in wb]
    shared = sorted(
        (
            {
                "token": t,
                "weight_a": wa[t],
                "weight_b": wb[t],
                "difference": wb[t] - wa[t],
                "rank_a": ra[t],
                "rank_b": rb[t],
                "in_input": t in own,
            }
            for t in shared_tokens
        ),
        key=lambda r: (-(r["weight_a"] + r["weight_b"]), r["token"]),
    )

    def only(mine: dict, ranks: dict, other: _Side, me: str, them: str) -> list[dict]:
        rows = []
        for t, w in mine.items():
            if t in (wa if me == "b" else wb):
                continue
            j = other.lookup.get(t)
            rows.append(
                {
                    "token": t,
                    f"weight_{me}": w,
                    f"weight_{them}": None if j is None else float(other.gated[j]),
                    f"rank_{me}": ranks[t],
                    f"ungated_weight_{them}": None if j is None else float(other.ungated[j]),
                    f"in_vocab_{them}": j is not None,
                    "in_input": t in own,
                }
            )
        return rows  # already heaviest first

    only_a = only(wa, ra, b, "a", "b")
    only_b = only(wb, rb, a, "b", "a")
    counts = {
        "active_a": len(wa),
        "active_b": len(wb),
        "shared": len(shared),
        "only_a": len(only_a),
        "only_b": len(only_b),
        "only_a_no_counterpart": sum(not r["in_vocab_b"] for r in only_a),
        "only_b_no_counterpart": sum(not r["in_vocab_a"] for r in only_b),
    }
    rho = spearman([r["weight_a"] for r in shared], [r["weight_b"] for r in shared])
    rho["over"] = (
        f"the gated weights (E = V ⊙ G) of the {len(shared)} term{'s' * (len(shared) != 1)} "
        "active in both A and B, "
        "matched by token string (raw vocabulary tokens, special tokens left out)"
    )
    ma, mb = a.merged(), b.merged()

    def word_weight(side: _Side, own: dict, token: str, pieces: list[str]) -> float:
        """The side's merged weight of the word; else, for a word spelled in pieces, the
        smallest of its pieces' weights there (it is there only if every piece is); for a
        plain token, its weight there."""
        if token in own:
            return own[token][0]
        cols = [side.lookup.get(p) for p in (pieces or [token])]
        if any(c is None for c in cols):
            return 0.0
        return min(float(side.gated[c]) for c in cols)

    merged_shared, merged_only_a, merged_only_b = [], [], []
    for t in dict.fromkeys([*ma, *mb]):
        pieces = (ma.get(t) or mb.get(t))[1]
        x, y = word_weight(a, ma, t, pieces), word_weight(b, mb, t, pieces)
        row = {"token": t, "weight_a": x, "weight_b": y, "difference": y - x, "pieces": pieces}
        if x > 0 and y > 0:
            merged_shared.append(row)
        elif x > 0:
            merged_only_a.append(row)
        else:
            merged_only_b.append(row)
    merged_shared.sort(key=lambda r: (-(r["weight_a"] + r["weight_b"]), r["token"]))
    merged_only_a.sort(key=lambda r: (-r["weight_a"], r["token"]))
    merged_only_b.sort(key=lambda r: (-r["weight_b"], r["token"]))
    merged = {
        "counts": {
            "active_a": len(merged_shared) + len(merged_only_a),
            "active_b": len(merged_shared) + len(merged_only_b),
            "shared": len(merged_shared),
            "only_a": len(merged_only_a),
            "only_b": len(merged_only_b),
        },
        "shared": merged_shared[:top],
        "only_a": merged_only_a[:top],
        "only_b": merged_only_b[:top],
    }
    return TermComparison(
        counts=counts,
        shared=shared[:top],
        only_a=only_a[:top],
        only_b=only_b[:top],
        merged=merged,
        top_a=[{"token": t, "weight": w, "pieces": p} for t, (w, p) in list(ma.items())[:top]],
        top_b=[{"token": t, "weight": w, "pieces": p} for t, (w, p) in list(mb.items())[:top]],
        rank_correlation=rho,
    )


def _describe_side(encoder: Encoder, k: int, encoding: LexicalEncoding | None = None) -> dict:
    out: dict[str, Any] = {"encoder": encoder.name, "gate_k": k, "vocab_size": len(encoder.vocab)}
    if encoder.source and encoder_card(encoder.name) is None:  # a checkpoint folder: where from
        out["source"] = encoder.source
    if encoding is not None and encoding.grid is not None:
        out["grid"] = list(encoding.grid)
        out["crop_box"] = list(encoding.crop_box or (0.0, 0.0, 1.0, 1.0))
    if encoding is not None and encoding.truncated:
        out["truncated"] = True
    return out


# ----------------------------------------------------------------------------- one input
def _validate_input(text: str | None, image: Any, name: str | None) -> tuple[str, Any, str]:
    if (text is None) == (image is None):
        raise InputError("give a text or an image to compare on (one of them)")
    if text is not None:
        if not isinstance(text, str) or not text.strip():
            raise InputError("the text is empty: type some words to compare on")
        return "text", text, ""
    from PIL import Image

    from lexlens.models.images import load_image

    if isinstance(image, Image.Image):
        return "image", image, name or "image"
    label = name or (str(image) if isinstance(image, (str, Path)) else "uploaded image")
    return "image", load_image(image, name=label), label


def _group_units(encoding: LexicalEncoding, box, cells) -> list[int]:
    if encoding.unit_weights is None:
        raise InputError("this encoding kept no per-patch rows: encode with keep_units=True")
    if box is not None:
        return box_to_patches(encoding.grid, box, crop_box=encoding.crop_box)
    return units_to_indices(encoding, cells)


def _heatmap_side(encoder: Encoder, encoding: LexicalEncoding, word: str) -> dict:
    heat = term_heat(encoding, encoder.vocab, word)
    return {
        "term": heat.label,
        "columns": [encoder.vocab[i] for i in heat.columns],
        "grid": list(heat.heat.shape),
        "crop_box": list(encoding.crop_box or (0.0, 0.0, 1.0, 1.0)),
        "values": heat.heat.astype(np.float64).tolist(),
        "max": heat.peak,
        "min": heat.low,
        "argmax": heat.peak_cell,
    }


def compare_encodings(
    encoder_a: Encoder,
    encoding_a: LexicalEncoding,
    encoder_b: Encoder,
    encoding_b: LexicalEncoding,
    *,
    gate_k: tuple[int, int] = (DEFAULT_GATE_K, DEFAULT_GATE_K),
    top: int = DEFAULT_TOP,
    box: tuple[float, float, float, float] | None = None,
    cells: list[str] | None = None,
    term: str | None = None,
    input_info: dict | None = None,
) -> CompareResult:
    """The :class:`CompareResult` of two encodings of the same input (no model runs).

    ``box`` or ``cells`` (images) add the patch-group comparison; ``term`` picks the word
    whose heatmap is shown on both grids (default: the heaviest term both share, else A's
    heaviest).
    """
    check_top(top)
    ka, kb = gate_k
    check_gate_k(ka)
    check_gate_k(kb)
    image = encoding_a.grid is not None
    if image != (encoding_b.grid is not None):
        raise InputError(
            "A and B must encode the same kind of input (both a text or both an image)"
        )
    if (box is not None or cells is not None) and not image:
        raise InputError("a box or cells apply to images only")
    if box is not None and cells is not None:
        raise InputError("give a box or cells, not both")
    if box is not None:
        box = check_box(box)
    info = dict(input_info or {})
    vocab = vocabulary_overlap(encoder_a.vocab, encoder_b.vocab)
    notes = [n for n in (vocabulary_note(vocab),) if n]
    side_a = _side(encoder_a, encoding_a, ka)
    side_b = _side(encoder_b, encoding_b, kb)
    terms = compare_sides(side_a, side_b, top=top)
    if terms.rank_correlation.get("note"):
        notes.append(f"rank correlation: {terms.rank_correlation['note']}")
    for label, enc, encoder in (("A", encoding_a, encoder_a), ("B", encoding_b, encoder_b)):
        notes += [f"{label}: {n}" for n in enc.notes]
        if enc.truncated:
            notes.append(f"{label}: input truncated to {encoder.max_length} tokens")
    group = heatmap = None
    if image and (box is not None or cells is not None):
        if cells is not None and tuple(encoding_a.grid) != tuple(encoding_b.grid):
            raise InputError(
                f"A's grid ({encoding_a.grid[0]}×{encoding_a.grid[1]}) and B's "
                f"({encoding_b.grid[0]}×{encoding_b.grid[1]}) differ: cells name different "
                "regions, select the group with a box"
            )
        units_a = _group_units(encoding_a, box, cells)
        units_b = _group_units(encoding_b, box, cells)
        pooled_a = pool_units(encoding_a.unit_weights[units_a], encoding_a.normalization)
        pooled_b = pool_units(encoding_b.unit_weights[units_b], encoding_b.normalization)
        group_terms = compare_sides(
            _side(encoder_a, encoding_a, ka, pooled_a),
            _side(encoder_b, encoding_b, kb, pooled_b),
            top=top,
        )
        group = {
            "box": None if box is None else list(box),
            "cells_a": [encoding_a.units[i] for i in units_a],
            "cells_b": [encoding_b.units[i] for i in units_b],
            "terms": group_terms,
        }
    if image:
        word = term.strip() if term and term.strip() else None
        if word is None:
            pool = terms.merged["shared"] or terms.top_a or terms.top_b
            word = pool[0]["token"] if pool else None
        if word is not None:
            heatmap = {"word": word, "a": None, "b": None}
            for s, encoder, enc in (("a", encoder_a, encoding_a), ("b", encoder_b, encoding_b)):
                try:
                    heatmap[s] = _heatmap_side(encoder, enc, word)
                except InputError as exc:
                    notes.append(f"heatmap of {word!r} on {s.upper()}: {exc}")
            if heatmap["a"] is None and heatmap["b"] is None:
                raise InputError(f"{word!r} cannot be spelled in either encoder's vocabulary")
    return CompareResult(
        kind="image" if image else "text",
        a=_describe_side(encoder_a, ka, encoding_a),
        b=_describe_side(encoder_b, kb, encoding_b),
        input=info,
        vocabulary=vocab,
        terms=terms,
        group=group,
        heatmap=heatmap,
        notes=list(dict.fromkeys(notes)),
    )


def compare(
    encoder_a: Encoder | str,
    encoder_b: Encoder | str | None = None,
    *,
    text: str | None = None,
    image: Any = None,
    name: str | None = None,
    box: tuple[float, float, float, float] | str | None = None,
    cells: list[str] | None = None,
    term: str | None = None,
    gate_k: Sequence[int] | int | None = None,
    top: int | None = None,
    device: str | None = None,
) -> CompareResult:
    """Compare A and B on a text or an image (a path, bytes or a PIL image; ``name`` is the
    name results and messages use). Encoders may be given by name (loaded on ``device``);
    ``encoder_b`` defaults to ``encoder_a``. ``gate_k``: one value for both sides, or (A's,
    B's); default :func:`default_gates`. ``box``: fractions ``(x0, y0, x1, y1)`` or their
    text ``"x0,y0,x1,y1"``.

    Inputs, options and both encoders' capabilities are checked before anything is encoded
    (an encoder given by name is checked from its card before it loads).
    """
    encoder_b = encoder_a if encoder_b is None else encoder_b
    top = check_top(DEFAULT_TOP if top is None else top)
    gate_pair(gate_k, (0, 0))  # the values, before anything is read
    if box is not None:
        box = parse_box(box) if isinstance(box, str) else check_box(box)
    kind, value, label = _validate_input(text, image, name)
    if kind == "text" and (box is not None or cells is not None):
        raise InputError("a box or cells apply to images only")
    needs = COMPARE_NEEDS[kind]
    for argument, spec in (("encoder_a", encoder_a), ("encoder_b", encoder_b)):
        if isinstance(spec, str):  # both checked from their cards before either loads
            check_spec(spec, needs, argument)
    encoder_a = as_encoder(encoder_a, device, needs, "encoder_a")
    encoder_b = as_encoder(encoder_b, device, needs, "encoder_b")
    ka, kb = gate_pair(gate_k, default_gates(kind, encoder_b is encoder_a))
    check_sides(encoder_a, encoder_b, kind, (ka, kb))
    if kind == "text":
        enc_a = encode_text(encoder_a, value)
        enc_b = enc_a if encoder_b is encoder_a else encode_text(encoder_b, value)
        info = {"text": value}
    else:
        enc_a = encode_image(encoder_a, value)
        enc_b = enc_a if encoder_b is encoder_a else encode_image(encoder_b, value)
        info = {"image": label}
    return compare_encodings(
        encoder_a, enc_a, encoder_b, enc_b, gate_k=(ka, kb), top=top, box=box, cells=cells,
        term=term, input_info=info,
    )  # fmt: skip
