"""Vocabulary helpers shared by every lexical analysis: special tokens and an input's own
tokens."""

from __future__ import annotations

import re

import numpy as np

from lexlens.models.base import LexicalEncoding

_SPECIAL = re.compile(r"^\[(CLS|SEP|PAD|MASK|UNK|unused\d+|id\d+)\]$")


def is_special_token(token: str) -> bool:
    """[CLS], [SEP], [PAD], [MASK], [UNK] and [unusedN] carry no meaning as terms."""
    return bool(_SPECIAL.match(token))


def special_mask(vocab: list[str]) -> np.ndarray:
    """Boolean ``[|V|]``: True where the vocabulary entry is a special token."""
    return np.fromiter((is_special_token(t) for t in vocab), dtype=bool, count=len(vocab))


def own_tokens(encoding: LexicalEncoding) -> set[str]:
    """The input's own token strings (bag of words); empty for images.

    Compared by string, since an output dimension's index is not always a token id (VDR
    drops the first 999 ids, or keeps a subset).
    """
    return set(encoding.units) if encoding.input_ids is not None else set()


# END
