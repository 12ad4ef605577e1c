"""The two sides of a comparison on one input: what each encoder must be able to do, each
side's gated vector ``E = V ⊙ G`` at its gate k, and how a side is described in results."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from lexlens.analysis.core.gating import gate
from lexlens.analysis.core.grid import FULL_BOX
from lexlens.analysis.core.vocabulary import is_special_token, own_tokens
from lexlens.analysis.core.words import input_words, top_terms
from lexlens.models.base import Capability, Encoder, InputError, LexicalEncoding, Needs
from lexlens.models.registry import encoder_card

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


def token_index(vocab: list[str]) -> dict[str, int]:
    """Token → its first position in ``vocab``."""
    index: dict[str, int] = {}
    for i, token in enumerate(vocab):
        index.setdefault(token, i)
    return index


@dataclass(frozen=True)
class Side:
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


def side_of(
    encoder: Encoder, encoding: LexicalEncoding, k: int, weights: np.ndarray | None = None
) -> Side:
    """A side from an encoding (or a patch group's pooled ``weights``), gated at ``k``."""
    source = encoding if weights is None else replace(encoding, weights=weights)
    words = set(encoder.known_words)
    if encoding.input_ids is not None:
        words |= input_words(encoding.units)
    return Side(
        vocab=encoder.vocab,
        lookup=token_index(encoder.vocab),
        gated=gate(source, encoder.vocab, k),
        ungated=np.asarray(source.weights, dtype=np.float32),
        words=words,
        own={t for t in own_tokens(encoding) if not is_special_token(t)},
    )


def describe_side(encoder: Encoder, k: int, encoding: LexicalEncoding | None = None) -> dict:
    """A side as results describe it: encoder (and its folder), gate k, vocabulary size,
    an image's grid and crop, whether the input was truncated."""
    out: dict[str, Any] = {"encoder": encoder.name, "gate_k": k, "vocab_size": len(encoder.vocab)}
    if encoder.source and encoder_card(encoder.name) is None:  # a checkpoint folder: where from
        out["source"] = encoder.source
    if encoding is not None and encoding.grid is not None:
        out["grid"] = list(encoding.grid)
        out["crop_box"] = list(encoding.crop_box or FULL_BOX)
    if encoding is not None and encoding.truncated:
        out["truncated"] = True
    return out
