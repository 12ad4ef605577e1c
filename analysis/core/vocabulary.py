"""The vocabulary rules every analysis shares: which tokens are special (the one definition in
Lexlens), an input's own tokens, and where each token sits in a vocabulary."""

from __future__ import annotations

import re

import numpy as np

from lexlens.models.base import LexicalEncoding

#: Lookups built for the last few vocabularies seen (a vocabulary is a long list that
#: encoders and indexes keep for their lifetime; rebuilding these per call is slow).
_LOOKUPS: dict[int, tuple[list[str], dict[str, list[int]]]] = {}
_MASKS: dict[int, tuple[list[str], np.ndarray]] = {}

#: The tokens a (BERT WordPiece) tokenizer puts around a text: never a word of the text.
FRAME_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]"})
#: Special tokens: the frame, and the placeholders a vocabulary reserves ([MASK], [UNK],
#: [unusedN], VDR's [idN]).
_FRAME_NAMES = "|".join(sorted(token[1:-1] for token in FRAME_TOKENS))
_SPECIAL = re.compile(rf"^\[({_FRAME_NAMES}|MASK|UNK|unused\d+|id\d+)\]$")


def is_special_token(token: str) -> bool:
    """[CLS], [SEP], [PAD], [MASK], [UNK] and [unusedN] carry no meaning as terms."""
    return bool(_SPECIAL.match(token))


def is_frame_token(token: str) -> bool:
    """[CLS], [SEP] and [PAD]: put around a text by its tokenizer, so never one of its words
    (an input's [UNK] or [MASK] stands where the text had something, so it is a word)."""
    return token in FRAME_TOKENS


def frame_token_ids(tokenizer) -> set[int]:
    """The ids of the frame tokens (:data:`FRAME_TOKENS`) in a Hugging Face tokenizer."""
    return {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}


def special_mask(vocab: list[str]) -> np.ndarray:
    """Boolean ``[|V|]``: True where the vocabulary entry is a special token (built once per
    vocabulary object; read-only)."""
    cached = _MASKS.get(id(vocab))
    if cached is not None and cached[0] is vocab:
        return cached[1]
    mask = np.fromiter((is_special_token(t) for t in vocab), dtype=bool, count=len(vocab))
    mask.setflags(write=False)
    if len(_MASKS) >= 8:
        _MASKS.clear()
    _MASKS[id(vocab)] = (vocab, mask)
    return mask


def own_tokens(encoding: LexicalEncoding) -> set[str]:
    """The input's own token strings (bag of words); empty for images.

    Compared by string, since an output dimension's index is not always a token id (VDR
    drops the first 999 ids, or keeps a subset).
    """
    return set(encoding.units) if encoding.input_ids is not None else set()


def token_positions(vocab: list[str]) -> dict[str, list[int]]:
    """Token string → its positions in ``vocab`` (built once per vocabulary object)."""
    cached = _LOOKUPS.get(id(vocab))
    if cached is not None and cached[0] is vocab:
        return cached[1]
    positions: dict[str, list[int]] = {}
    for i, token in enumerate(vocab):
        positions.setdefault(token, []).append(i)
    if len(_LOOKUPS) >= 8:
        _LOOKUPS.clear()
    _LOOKUPS[id(vocab)] = (vocab, positions)
    return positions
