"""Compare two encoders — or one encoder at two gate k — on one input or a stored collection.

Two *sides*, A and B, each an encoder and a gate k. Every number is read off the retrieval
representation ``E(x) = V(x) ⊙ G(x)`` (SPEC §1: the top-k dimensions of ``V`` plus, for a
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

**A stored collection** (two indexes built from the same source by two encoders, or one
index seen at two gate k): semantic deviation (Exact@k, Semantic@k), FLOPs and vocabulary
statistics side by side (:func:`lexlens.analysis.deviation.deviation_of_index` on each
side), and a query searched on both: both rankings, which hits moved (rank in A → rank in B,
entered or left the top N) and the terms that moved them (per hit, every term's contribution
``q_t · d_t`` on each side — they sum to that side's score — and the terms whose
contribution changed most).

**Re-gating a stored index.** An index stores ``E_K = V ⊙ G_K`` (top-K of ``V`` plus the
item's own tokens); ``V`` itself is not kept. For ``k ≤ K`` the top-k of ``V`` are exactly
the k largest stored weights (they are all among the stored top-K), so the image vectors
re-gate exactly (up to ties at the k-th weight). A text's gate also keeps its own tokens
(bag of words), which the stored vector does not mark: each text is tokenised again by the
side's text encoder (``side="document"``, as ``lexlens index`` encodes) and its own tokens'
stored weights are kept, so ``E_k = V ⊙ (top-k ∪ bow)`` holds for texts too. A larger k
than the stored one cannot be recovered (refused). The re-gated vectors are held in memory
(O(non-zeros at the new k)); the query is gated at the same k as its side's documents.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.contrib import bag_of_words, check_topk, gate
from lexlens.analysis.deviation import DEFAULT_GATE_K, DEFAULT_K, check_options
from lexlens.analysis.outputs import csv_bytes, json_bytes, records_csv_bytes
from lexlens.analysis.store import StoredIndex, open_index
from lexlens.analysis.terms import input_words, is_special_token, own_tokens, top_terms
from lexlens.models.base import (
    Capability,
    Encoder,
    InputError,
    LexicalEncoding,
    Needs,
    pool_units,
)

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
#: A hit's rank is looked up this deep in each ranking (deeper: ``null``, "beyond").
RANK_DEPTH = 100
#: Terms listed per moved hit (largest change in contribution first).
CHANGED_TERMS = 8
SIDES = ("a", "b")
#: Below this many shared terms, ρ comes with a note that it rests on very few points.
FEW_SHARED = 5

Progress = Callable[[float, str], None]


# ----------------------------------------------------------------------------- options
def check_top(top: Any, what: str = "--top") -> int:
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InputError(f"{what} must be a positive integer, not {top!r}")
    return top


def gate_pair(values: Sequence[int] | int | None, default: tuple[int, int]) -> tuple[int, int]:
    """Gate k of A and B: none given → ``default``; one → both sides; two → A, B (in order)."""
    if values is None:
        return default
    if isinstance(values, int) and not isinstance(values, bool):
        values = [values]
    values = list(values)
    if len(values) > 2:
        raise InputError(f"give the gate k at most twice (one per side), not {len(values)} times")
    ks = [check_topk(v) for v in values]
    if not ks:
        return default
    return (ks[0], ks[0]) if len(ks) == 1 else (ks[0], ks[1])


def check_encoder_spec(needs: Needs, spec: str) -> None:
    """Refuse a registry encoder whose card lacks what ``needs`` asks, before it loads.

    (A local directory is checked once loaded: its capabilities are known only then.)
    """
    from lexlens.models import encoder_card

    card = encoder_card(spec)
    if card is None:
        return
    stub = Encoder()
    stub.name, stub.capabilities = card.name, card.capabilities
    needs.check(stub)


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
def _token_index(vocab: list[str]) -> dict[str, int]:
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
        lookup=_token_index(encoder.vocab),
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


@dataclass(frozen=True)
class TermComparison:
    """Terms of one input (or patch group) on two sides: shared, only in A, only in B.

    ``shared``/``only_a``/``only_b`` hold raw vocabulary tokens (at most ``top`` rows each,
    heaviest first; ``counts`` covers all of them); ``merged`` the same on the display view
    (pieces joined into words); ``top_a``/``top_b`` each side's own top terms (merged);
    ``rank_correlation`` is Spearman's ρ over *every* shared raw term.
    """

    counts: dict
    shared: list[dict]
    only_a: list[dict]
    only_b: list[dict]
    merged: dict
    top_a: list[dict]
    top_b: list[dict]
    rank_correlation: dict

    def to_dict(self) -> dict:
        return {
            "counts": self.counts,
            "rank_correlation": self.rank_correlation,
            "shared": self.shared,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "merged": self.merged,
            "top_a": self.top_a,
            "top_b": self.top_b,
        }


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


def vocabulary_overlap(vocab_a: list[str], vocab_b: list[str]) -> dict:
    """How the two vocabularies relate: the same, or how many tokens lack a counterpart."""
    if vocab_a is vocab_b or vocab_a == vocab_b:
        n = len(vocab_a)
        return {"same": True, "size_a": n, "size_b": n, "shared": n, "only_a": 0, "only_b": 0}
    sa, sb = set(vocab_a), set(vocab_b)
    return {
        "same": False,
        "size_a": len(vocab_a),
        "size_b": len(vocab_b),
        "shared": len(sa & sb),
        "only_a": len(sa - sb),
        "only_b": len(sb - sa),
    }


def vocabulary_note(v: dict) -> str | None:
    if v["same"]:
        return None
    return (
        f"A and B use different vocabularies ({v['size_a']:,} and {v['size_b']:,} terms): "
        f"they are compared on the {v['shared']:,} tokens both have; {v['only_a']:,} tokens "
        f"of A's vocabulary and {v['only_b']:,} of B's have no counterpart in the other"
    )


# ----------------------------------------------------------------------------- result
@dataclass(frozen=True)
class CompareResult:
    """A comparison of two sides (encoder + gate k) on one input or a stored collection.

    ``kind`` is ``"text"``, ``"image"`` or ``"index"``; ``a``/``b`` describe each side;
    ``terms`` compares the whole input, ``group`` an image's patch group, ``heatmap`` one
    term on both grids; ``collection`` holds the side-by-side collection analyses.
    """

    kind: str
    a: dict
    b: dict
    input: dict
    vocabulary: dict
    terms: TermComparison | None = None
    group: dict | None = None
    heatmap: dict | None = None
    collection: dict | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "a": self.a,
            "b": self.b,
            "input": self.input,
            "vocabulary": self.vocabulary,
            "terms": None if self.terms is None else self.terms.to_dict(),
            "group": None
            if self.group is None
            else {**self.group, "terms": self.group["terms"].to_dict()},
            "heatmap": self.heatmap,
            "collection": self.collection,
            "notes": self.notes,
        }

    def files(self) -> dict[str, bytes]:
        """The report: compare.html (self-contained), compare.json (``to_dict``) and CSVs."""
        return compare_files(self)


def _describe_side(encoder: Encoder, k: int, encoding: LexicalEncoding | None = None) -> dict:
    out: dict[str, Any] = {"encoder": encoder.name, "gate_k": k, "vocab_size": len(encoder.vocab)}
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
    from lexlens.analysis.patches import box_to_patches, units_to_indices

    if encoding.unit_weights is None:
        raise InputError("this encoding kept no per-patch rows: encode with keep_units=True")
    if box is not None:
        return box_to_patches(encoding.grid, box, crop_box=encoding.crop_box)
    return units_to_indices(encoding, cells)


def _heatmap_side(encoder: Encoder, encoding: LexicalEncoding, word: str) -> dict:
    from lexlens.analysis.patches import term_columns, term_heatmap

    what, columns = term_columns(encoder.vocab, word)
    heat = term_heatmap(encoding, columns)
    r, c = divmod(int(heat.argmax()), heat.shape[1])
    return {
        "term": what,
        "columns": [encoder.vocab[i] for i in columns],
        "grid": list(heat.shape),
        "crop_box": list(encoding.crop_box or (0.0, 0.0, 1.0, 1.0)),
        "values": heat.astype(np.float64).tolist(),
        "max": float(heat.max()),
        "min": float(heat.min()),
        "argmax": f"r{r}c{c}",
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
    from lexlens.analysis.patches import check_box

    check_top(top)
    ka, kb = gate_k
    check_topk(ka)
    check_topk(kb)
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
    encoder_a: Encoder,
    encoder_b: Encoder | None = None,
    *,
    text: str | None = None,
    image: Any = None,
    name: str | None = None,
    box: tuple[float, float, float, float] | None = None,
    cells: list[str] | None = None,
    term: str | None = None,
    gate_k: Sequence[int] | int | None = None,
    top: int = DEFAULT_TOP,
) -> CompareResult:
    """Compare A and B on a text or an image (a path, bytes or a PIL image; ``name`` is the
    name results and messages use). ``encoder_b`` defaults to ``encoder_a`` (then give two
    gate k). ``gate_k``: one value for both sides, or (A's, B's); default 768 each.

    Inputs, options and both encoders' capabilities are checked before anything is encoded.
    """
    from lexlens.analysis.patches import check_box
    from lexlens.analysis.terms import encode_image, encode_text

    encoder_b = encoder_b or encoder_a
    check_top(top)
    ka, kb = gate_pair(gate_k, (DEFAULT_GATE_K, DEFAULT_GATE_K))
    if box is not None:
        box = check_box(box)
    kind, value, label = _validate_input(text, image, name)
    if kind == "text" and (box is not None or cells is not None):
        raise InputError("a box or cells apply to images only")
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


# ----------------------------------------------------------------------------- re-gating
def check_regate(ix: StoredIndex, k: int) -> None:
    stored = int(ix.manifest["gate_k"])
    if k == stored or stored == -1:
        return
    if k == -1 or k > stored or (stored == 0 and k != 0):
        raise InputError(
            f"{ix.path.name} stores vectors gated at k = {stored}: they re-gate exactly only "
            f"at a smaller k (0 … {stored}), not at {k}; re-index with `lexlens index --topk "
            f"{k}` for a larger gate"
        )


def own_columns(ix: StoredIndex, encoder: Encoder, batch_size: int = 64) -> list[np.ndarray]:
    """Each text item's own tokens (bag of words) as vocabulary ids, by re-tokenising its
    text with ``encoder`` (document side, as the index was encoded)."""
    texts = [str(t or "") for t in ix.column("text")]
    out: list[np.ndarray] = [np.zeros(0, np.int64)] * len(texts)
    todo = [i for i, t in enumerate(texts) if t.strip()]
    for lo in range(0, len(todo), batch_size):
        chunk = todo[lo : lo + batch_size]
        encodings = encoder.encode_texts(
            [texts[i] for i in chunk], side="document", keep_units=False
        )
        for i, e in zip(chunk, encodings, strict=True):
            out[i] = np.flatnonzero(bag_of_words(e, encoder.vocab))
    return out


def regate_rows(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    k: int,
    own: list[np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep each stored row's ``k`` largest weights and its own tokens' (``own[i]``)."""
    n = len(indptr) - 1
    new_ptr = np.zeros(n + 1, dtype=np.int64)
    cols_out, vals_out = [], []
    for i in range(n):
        a, b = int(indptr[i]), int(indptr[i + 1])
        cols = np.asarray(indices[a:b])
        vals = np.asarray(data[a:b])
        if k >= 0 and cols.size > k:
            keep = np.zeros(cols.size, dtype=bool)
            if k > 0:
                keep[np.argpartition(-vals, k - 1)[:k]] = True
            if own is not None and own[i].size:
                keep |= np.isin(cols, own[i])
            cols, vals = cols[keep], vals[keep]
        cols_out.append(cols)
        vals_out.append(vals)
        new_ptr[i + 1] = new_ptr[i] + cols.size
    cat = np.concatenate
    return (
        new_ptr,
        cat(cols_out).astype(np.int32) if cols_out else np.zeros(0, np.int32),
        cat(vals_out).astype(np.float32) if vals_out else np.zeros(0, np.float32),
    )


class RegatedIndex(StoredIndex):
    """A stored index seen at a smaller gate k (see the module docstring): the same items,
    metadata and vocabulary, its vectors re-gated in memory. Everything that reads a
    :class:`StoredIndex` (search, deviation) reads it unchanged."""

    def __init__(self, base: StoredIndex, k: int, own: list[np.ndarray] | None = None) -> None:
        super().__init__(base.path)  # its own handles (memory maps, metadata) on the folder
        check_regate(self, k)
        stored = int(self.manifest["gate_k"])
        self.indptr, self.indices, self.data = regate_rows(
            self.indptr, self.indices, self.data, k, own
        )
        squares = np.bincount(
            np.repeat(np.arange(len(self)), np.diff(self.indptr)),
            weights=self.data.astype(np.float64) ** 2,
            minlength=len(self),
        )
        self.norms = np.sqrt(squares).astype(np.float32)
        self.postings = None
        self.manifest = {
            **self.manifest,
            "gate_k": k,
            "regated_from": stored,
            "counts": {**self.manifest["counts"], "nnz": int(self.indices.size)},
        }
        self.label = f"{base.label} (re-gated at k = {k})"


# ----------------------------------------------------------------------------- collections
def _open(index: str | Path | StoredIndex) -> StoredIndex:
    return index if isinstance(index, StoredIndex) else open_index(index)


def check_same_items(a: StoredIndex, b: StoredIndex) -> dict[str, int]:
    """Refuse two indexes that do not hold the same items of the same source; returns the
    row in ``b`` of each id."""
    fa = a.manifest["source"].get("fingerprint")
    fb = b.manifest["source"].get("fingerprint")
    if not fa or fa != fb:
        raise InputError(
            f"{a.path.name} and {b.path.name} were not built from the same source (source "
            f"fingerprints {str(fa)[:12] or 'none'} and {str(fb)[:12] or 'none'}): index one "
            "source with both encoders"
        )
    ids_a = [str(x) for x in a.column("id")]
    ids_b = [str(x) for x in b.column("id")]
    rows_b = {i: r for r, i in enumerate(ids_b)}
    missing_b = [i for i in ids_a if i not in rows_b]
    missing_a = sorted(set(ids_b) - set(ids_a))
    if missing_a or missing_b:
        example = (missing_b or missing_a)[0]
        raise InputError(
            f"{a.path.name} and {b.path.name} hold different items ({len(missing_b)} only in "
            f"the first, {len(missing_a)} only in the second, e.g. {example!r}; an item "
            "skipped by one encoder?): compare indexes of the same items"
        )
    return rows_b


def _set_summary(part: Any) -> dict | None:
    if part is None:
        return None
    return {
        "kind": part.kind,
        "n": part.n,
        "n_measured": part.n_measured,
        "exact_at_k": part.exact,
        "semantic_at_k": part.semantic,
        "by_denominator": part.by_denominator,
        "positive_terms": part.positive_terms,
        "flops": part.flops,
        "flops_with_self_pairs": part.flops_with_self_pairs,
        "mean_active_dims": part.mean_active_dims,
        "n_skipped": part.n_skipped,
    }


def _vocab_side_by_side(
    items: tuple[Any, Any], means: tuple[np.ndarray, np.ndarray], vocabs, top: int
) -> dict:
    """Top terms by mean weight of each side, with the other side's numbers for the same
    token; activation rates; lazy terms of each."""
    stats = [part.vocabulary for part in items]
    lookups = [_token_index(v) for v in vocabs]
    rates = [part.counts / max(part.n, 1) for part in items]

    def numbers(s: int, token: str) -> tuple[float | None, float | None]:
        j = lookups[s].get(token)
        if j is None:
            return None, None
        return float(means[s][j]), float(rates[s][j])

    union: dict[str, None] = {}
    for st in stats:
        if st is not None:
            union.update(dict.fromkeys(t.token for t in st.top_terms[:top]))
    tops = [{t.token for t in st.top_terms[:top]} if st else set() for st in stats]
    rows = []
    for token in union:
        ma, ra = numbers(0, token)
        mb, rb = numbers(1, token)
        rows.append(
            {
                "token": token,
                "mean_weight_a": ma,
                "mean_weight_b": mb,
                "activation_rate_a": ra,
                "activation_rate_b": rb,
                "top_a": token in tops[0],
                "top_b": token in tops[1],
            }
        )
    rows.sort(
        key=lambda r: (-max(r["mean_weight_a"] or 0.0, r["mean_weight_b"] or 0.0), r["token"])
    )
    out: dict[str, Any] = {"top_terms": rows}
    for s, st in zip(SIDES, stats, strict=True):
        out[s] = (
            None
            if st is None
            else {
                "active_terms": st.active_terms,
                "mean_active_per_item": st.mean_active_per_item,
                "lazy_rate": st.lazy_rate,
                "lazy_terms": [t.token for t in st.lazy_terms],
                "top_terms": [t.token for t in st.top_terms[:top]],
            }
        )
    return out


def _contributions(ix: StoredIndex, row: int, q: np.ndarray, vocab: list[str]) -> tuple:
    """``(score, {token: q_t · d_t})`` of one item, every non-zero term, in float64."""
    cols, vals = ix.row(row)
    parts = q[cols].astype(np.float64) * vals.astype(np.float64)
    score = float(np.sum(parts))
    out: dict[str, float] = {}
    for c, p in zip(cols, parts, strict=True):
        if p != 0:
            out[vocab[int(c)]] = out.get(vocab[int(c)], 0.0) + float(p)
    return score, out


def _search_side_by_side(
    targets: tuple[StoredIndex, StoredIndex],
    queries: tuple[np.ndarray, np.ndarray],
    rows_of: tuple[dict[str, int], dict[str, int]],
    *,
    query: str,
    top: int,
    explain: int,
) -> dict:
    """Both rankings, the hits that moved and the terms that moved them."""
    from lexlens.analysis.ranking import top_items

    depth = max(top, RANK_DEPTH)
    ranked = []
    for target, q in zip(targets, queries, strict=True):
        rows, scores = top_items(target, q, depth)
        ids = [str(m["id"]) for m in target.meta(rows, ["id"])]
        ranked.append((ids, [float(s) for s in scores]))
    rank = [{i: r for r, i in enumerate(ids, start=1)} for ids, _ in ranked]
    hits = {}
    for s, (ids, scores) in zip(SIDES, ranked, strict=True):
        metas = targets[SIDES.index(s)].meta(
            [rows_of[SIDES.index(s)][i] for i in ids[:top]], ["id", "text", "image"]
        )
        hits[s] = [
            {
                "rank": r,
                "id": i,
                "score": sc,
                "text": m.get("text") or "",
                "image": m.get("image") or "",
            }
            for r, (i, sc, m) in enumerate(zip(ids[:top], scores[:top], metas, strict=True), 1)
        ]
    union = list(dict.fromkeys([h["id"] for h in hits["a"]] + [h["id"] for h in hits["b"]]))
    moved = []
    for item in union:
        ra, rb = rank[0].get(item), rank[1].get(item)
        in_a = ra is not None and ra <= top
        in_b = rb is not None and rb <= top
        status = (
            ("same" if ra == rb else "moved") if in_a and in_b else ("left" if in_a else "entered")
        )
        side_scores, contributions = [], []
        for t, (target, q) in enumerate(zip(targets, queries, strict=True)):
            score, parts = _contributions(target, rows_of[t][item], q, target.vocab)
            side_scores.append(score)
            contributions.append(parts)
        tokens = list(dict.fromkeys([*contributions[0], *contributions[1]]))
        changes = sorted(
            (
                row
                for row in (
                    {
                        "token": tok,
                        "contribution_a": contributions[0].get(tok, 0.0),
                        "contribution_b": contributions[1].get(tok, 0.0),
                        "change": contributions[1].get(tok, 0.0) - contributions[0].get(tok, 0.0),
                    }
                    for tok in tokens
                )
                if row["change"] != 0
            ),
            key=lambda r: (-abs(r["change"]), r["token"]),
        )
        shown = changes[:explain]
        meta = targets[0].meta([rows_of[0][item]], ["id", "text", "image"])[0]
        moved.append(
            {
                "id": item,
                "text": meta.get("text") or "",
                "image": meta.get("image") or "",
                "status": status,
                "rank_a": ra,
                "rank_b": rb,
                "score_a": side_scores[0],
                "score_b": side_scores[1],
                "contributions_a": [
                    {"token": t, "contribution": c}
                    for t, c in sorted(contributions[0].items(), key=lambda x: (-x[1], x[0]))
                ],
                "contributions_b": [
                    {"token": t, "contribution": c}
                    for t, c in sorted(contributions[1].items(), key=lambda x: (-x[1], x[0]))
                ],
                "changed_terms": shown,
                "other_change": float(sum(r["change"] for r in changes[explain:])),
            }
        )
    order = {"entered": 0, "left": 1, "moved": 2, "same": 3}
    moved.sort(key=lambda m: (order[m["status"]], min(m["rank_a"] or 10**9, m["rank_b"] or 10**9)))
    metrics = _metrics(targets, ranked, query)
    return {
        "query": query,
        "top": top,
        "rank_depth": depth,
        "hits_a": hits["a"],
        "hits_b": hits["b"],
        "hits": moved,
        "counts": {s: sum(m["status"] == s for m in moved) for s in order},
        "metrics": metrics,
    }


def _metrics(targets, ranked, query: str) -> dict | None:
    """MRR@10 … of both rankings when the query is one of the collection's labels."""
    from lexlens.analysis.evaluation import ir_metrics, item_ids, labelled, relevant_ids

    labels = labelled(targets[0])
    if labels is None or query.casefold().strip() not in set().union(*labels):
        return None
    relevant = relevant_ids(labels, item_ids(targets[0]), query, None)
    return {
        s: ir_metrics({"q": ids_s[:10]}, {"q": relevant})["mean"]
        for s, (ids_s, _) in zip(SIDES, ranked, strict=True)
    } | {"relevant": len(relevant)}


def compare_indexes(
    index_a: str | Path | StoredIndex,
    index_b: str | Path | StoredIndex | None = None,
    *,
    encoder_a: Encoder,
    encoder_b: Encoder | None = None,
    gate_k: Sequence[int] | int | None = None,
    query: str | None = None,
    top: int = DEFAULT_HITS,
    k: int = DEFAULT_K,
    explain: int = CHANGED_TERMS,
    progress: Progress | None = None,
) -> CompareResult:
    """Compare two stored indexes of the same source (two encoders), or one index at two
    gate k (each ≤ the index's own). ``encoder_a``/``encoder_b`` are the text encoders in
    each index's vocabulary (queries, caption tokens and Semantic@k's static embeddings;
    B defaults to A's). ``gate_k``: one value for both sides or (A's, B's); default each
    index's stored k. ``k``: Exact@k / Semantic@k. ``query`` adds the search comparison.

    Indexes, options and encoders are checked before anything is encoded.
    """
    from lexlens.analysis.deviation import deviation_of_index
    from lexlens.analysis.queries import check_vocabulary

    check_top(top)
    check_options(k=k)
    if not isinstance(explain, int) or explain < 0:
        raise InputError("the number of changed terms shown must be 0 or more")
    if query is not None and not query.strip():
        raise InputError("the query is empty: type some words")
    ix_a = _open(index_a)
    ix_b = ix_a if index_b is None else _open(index_b)
    one = ix_b is ix_a or ix_b.path.resolve() == ix_a.path.resolve()
    if one:
        ix_b = ix_a
    stored = (int(ix_a.manifest["gate_k"]), int(ix_b.manifest["gate_k"]))
    ka, kb = gate_pair(gate_k, stored)
    check_regate(ix_a, ka)
    check_regate(ix_b, kb)
    rows_b = (
        {str(i): r for r, i in enumerate(ix_a.column("id"))}
        if one
        else check_same_items(ix_a, ix_b)
    )
    rows_a = {str(i): r for r, i in enumerate(ix_a.column("id"))}
    encoder_b = encoder_b or encoder_a
    for encoder, ix in ((encoder_a, ix_a), (encoder_b, ix_b)):
        COMPARE_INDEX_NEEDS.check(encoder)
        check_vocabulary(ix, encoder)
    if one and encoder_a is encoder_b and ka == kb:
        raise InputError(
            f"A and B are the same index ({ix_a.path.name}) at the same gate k ({ka}) with the "
            "same encoder: give a second index or a second gate k"
        )
    notes: list[str] = []
    targets = []
    for s, (ix, kk, encoder) in enumerate(((ix_a, ka, encoder_a), (ix_b, kb, encoder_b))):
        if kk == int(ix.manifest["gate_k"]):
            targets.append(ix)
            continue
        if progress:
            progress(0.02 + 0.08 * s, f"Re-gating {ix.path.name} at k = {kk}…")
        own = own_columns(ix, encoder) if ix.modality == "text" else None
        targets.append(RegatedIndex(ix, kk, own))
        how = (
            "the k largest stored weights plus each text's own tokens (re-tokenised by "
            f"{encoder.name})"
            if own is not None
            else "the k largest stored weights (images have no own tokens)"
        )
        notes.append(
            f"{SIDES[s].upper()}: {ix.path.name} is stored at gate k = {ix.manifest['gate_k']}"
            f" and re-gated at k = {kk}: {how}"
        )
    vocab = vocabulary_overlap(ix_a.vocab, ix_b.vocab)
    if note := vocabulary_note(vocab):
        notes.append(note)
    deviations = []
    for s, (target, encoder) in enumerate(zip(targets, (encoder_a, encoder_b), strict=True)):
        base = 0.1 + 0.4 * s

        def step(f: float, msg: str, base: float = base, s: int = s) -> None:
            if progress:
                progress(base + 0.4 * f, f"{SIDES[s].upper()}: {msg}")

        deviations.append(deviation_of_index(target, encoder, k=k, max_rows=0, progress=step))
    items = tuple(d.images if d.images is not None else d.captions for d in deviations)
    collection: dict[str, Any] = {
        "k": k,
        "deviation": {
            s: {
                "gate_k": d.gate_k,
                "f_enc": d.f_enc,
                "sets": {p.kind: _set_summary(p) for p in d.sets},
                "flops_captions_images": d.flops_captions_images,
                "notes": d.notes,
            }
            for s, d in zip(SIDES, deviations, strict=True)
        },
        "vocabulary": _vocab_side_by_side(
            items, tuple(t.mean_weights() for t in targets), (ix_a.vocab, ix_b.vocab), top
        ),
        "search": None,
    }
    if query is not None:
        if progress:
            progress(0.92, "Searching both…")
        # One encoding per encoder (as ``lexlens search`` encodes a query), gated per side.
        enc_a = encoder_a.encode_texts([query], side="query")[0]
        enc_b = enc_a if encoder_b is encoder_a else encoder_b.encode_texts([query])[0]
        queries = (gate(enc_a, encoder_a.vocab, ka), gate(enc_b, encoder_b.vocab, kb))
        collection["search"] = _search_side_by_side(
            tuple(targets), queries, (rows_a, rows_b), query=query, top=top, explain=explain
        )
    if progress:
        progress(1.0, "Done")

    def side(ix: StoredIndex, kk: int, encoder: Encoder) -> dict:
        return {
            "index": ix.path.name,
            "items": len(ix),
            "modality": ix.modality,
            "index_encoder": ix.encoder_name,
            "stored_gate_k": int(ix.manifest["gate_k"]),
            "gate_k": kk,
            "regated": kk != int(ix.manifest["gate_k"]),
            "encoder": encoder.name,
            "vocab_size": ix.vocab_size,
        }

    return CompareResult(
        kind="index",
        a=side(ix_a, ka, encoder_a),
        b=side(ix_b, kb, encoder_b),
        input={
            "index_a": ix_a.path.name,
            "index_b": ix_b.path.name,
            "query": query,
            "items": len(ix_a),
        },
        vocabulary=vocab,
        collection=collection,
        notes=notes,
    )


# ----------------------------------------------------------------------------- report
TERMS_CSV_HEADER = [
    "scope", "view", "status", "token", "weight_a", "weight_b", "difference", "rank_a", "rank_b",
]  # fmt: skip


def _term_csv_rows(scope: str, c: TermComparison) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for status in ("shared", "only_a", "only_b"):
        for r in getattr(c, status):
            rows.append(
                [scope, "raw", status, r["token"], r.get("weight_a"), r.get("weight_b"),
                 r.get("difference"), r.get("rank_a"), r.get("rank_b")]
            )  # fmt: skip
        for r in c.merged[status]:
            rows.append(
                [scope, "merged", status, r["token"], r.get("weight_a"), r.get("weight_b"),
                 r.get("difference"), None, None]
            )  # fmt: skip
    return rows


def compare_files(result: CompareResult) -> dict[str, bytes]:
    """compare.html, compare.json and the CSV tables of a result (CLI ``--out``, the page's
    downloads): every number the HTML shows is in the JSON, unrounded."""
    files = {
        "compare.html": render_html(result).encode("utf-8"),
        "compare.json": json_bytes(result),
    }
    if result.terms is not None:
        rows = _term_csv_rows("input", result.terms)
        if result.group is not None:
            rows += _term_csv_rows("group", result.group["terms"])
        files["compare_terms.csv"] = csv_bytes(TERMS_CSV_HEADER, rows)
    collection = result.collection
    if collection is not None:
        dev_rows = []
        for s in SIDES:
            d = collection["deviation"][s]
            for kind, part in d["sets"].items():
                dev_rows.append(
                    {"side": s.upper(), "set": kind, "gate_k": d["gate_k"],
                     "n": part["n"], "exact_at_k": part["exact_at_k"],
                     "semantic_at_k": part["semantic_at_k"], "flops": part["flops"],
                     "mean_active_dims": part["mean_active_dims"],
                     "flops_captions_images": d["flops_captions_images"]}
                )  # fmt: skip
        files["compare_deviation.csv"] = records_csv_bytes(dev_rows)
        files["compare_vocabulary.csv"] = records_csv_bytes(collection["vocabulary"]["top_terms"])
        search = collection["search"]
        if search is not None:
            files["compare_hits.csv"] = records_csv_bytes(
                [
                    {
                        "id": h["id"], "status": h["status"], "rank_a": h["rank_a"],
                        "rank_b": h["rank_b"], "score_a": h["score_a"], "score_b": h["score_b"],
                        "changed_terms": [
                            f"{c['token']}:{c['change']:+.4g}" for c in h["changed_terms"]
                        ],
                    }
                    for h in search["hits"]
                ]
            )  # fmt: skip
    return files


def _heat_rows(side: dict | None) -> list[list[dict]] | None:
    from lexlens.analysis.report import cell_colour, num

    if side is None:
        return None
    values = np.asarray(side["values"], dtype=np.float64)
    scale = float(np.abs(values).max()) if values.size else 0.0
    return [
        [
            {"colour": cell_colour(float(v), scale), "title": f"r{r}c{c}: {num(v)}"}
            for c, v in enumerate(row)
        ]
        for r, row in enumerate(values)
    ]


def render_html(result: CompareResult) -> str:
    """The comparison as one self-contained HTML page (Jinja2, autoescaped)."""
    from lexlens.analysis.report import _env, _meta_rows, _now, num

    d = result.to_dict()
    info: dict[str, Any] = {"kind": result.kind, **result.input}
    for s in SIDES:
        side = d[s]
        info[s.upper()] = {k: v for k, v in side.items() if k not in ("crop_box",)}
    info["generated"] = _now()
    heat = None
    if result.heatmap is not None:
        heat = {
            "word": result.heatmap["word"],
            "a": result.heatmap["a"],
            "b": result.heatmap["b"],
            "rows_a": _heat_rows(result.heatmap["a"]),
            "rows_b": _heat_rows(result.heatmap["b"]),
        }
    return (
        _env()
        .get_template("compare.html")
        .render(
            title=f"Lexlens comparison — A: {result.a['encoder']} (gate k {result.a['gate_k']})"
            f" · B: {result.b['encoder']} (gate k {result.b['gate_k']})",
            meta=_meta_rows(info),
            r=d,
            vocabulary_note=vocabulary_note(result.vocabulary),
            heat=heat,
            num=num,
        )
    )


__all__ = [
    "COMPARE_IMAGE_NEEDS",
    "COMPARE_INDEX_NEEDS",
    "COMPARE_NEEDS",
    "COMPARE_TEXT_NEEDS",
    "CompareResult",
    "RegatedIndex",
    "TermComparison",
    "check_encoder_spec",
    "check_sides",
    "compare",
    "compare_encodings",
    "compare_files",
    "compare_indexes",
    "gate_pair",
    "render_html",
    "spearman",
    "vocabulary_overlap",
]
