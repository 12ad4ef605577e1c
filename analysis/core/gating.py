"""The gate ``E(x) = V(x) ⊙ G(x)`` every lexical analysis reads (VDR).

``G(x)[i] = 1`` when ``i`` is among the top-k dimensions of ``V(x)`` or one of the input's
own tokens (its bag of words; none for an image). ``k = -1`` keeps every dimension,
``k = 0`` the bag of words only. One name (``gate_k``) and one default for the whole
package: 768, VDR's text setting.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lexlens.analysis.core.options import shared_option
from lexlens.analysis.core.vocabulary import is_special_token, own_tokens, token_positions
from lexlens.models.base import LexicalEncoding

#: VDR's default gate for texts (its cross-modal models use 512 or 768).
DEFAULT_GATE_K = 768
#: The gate ``G`` as an option: one declaration (check, message, help) for every analysis.
GATE_K = shared_option(
    "gate_k",
    int,
    DEFAULT_GATE_K,
    low=-1,
    label="Gate k (-1 = all)",
    widget="number",
    help="gate k: the top-k dimensions of V(x) kept beside the input's own tokens",
    wanted="-1 (every dimension), 0 (the input's own tokens only) or a positive count",
)


def check_gate_k(k: Any) -> int:
    """Gate k checked by its one declaration (:data:`GATE_K`)."""
    return GATE_K.check(k)


def bag_of_words(encoding: LexicalEncoding, vocab: list[str]) -> np.ndarray:
    """Binary ``bow(x)`` over the output vocabulary: the input's own tokens (none for images).

    Matched by token string, so it holds for encoders whose output dimensions are a slice
    or subset of the tokenizer's ids (VDR's shifted and "valid" vocabularies). Special
    tokens (``[CLS]``, ``[SEP]``, ``[PAD]``…) are never part of the bag: VDR's own code
    drops them by slicing off ids 0–998, and a full-vocabulary encoder must drop them
    explicitly, or every text would share ``[CLS]`` and ``[SEP]`` dimensions.
    """
    positions = token_positions(vocab)
    bag = np.zeros(len(vocab), dtype=np.float32)
    for token in own_tokens(encoding):
        if not is_special_token(token):
            bag[positions.get(token, [])] = 1.0
    return bag


def bow_query(encoding: LexicalEncoding, vocab: list[str], normalize: bool) -> np.ndarray:
    """VDR's nonparametric query ``E_q = bow(q)``: binary, L2-normalised when the
    checkpoint's configuration says so (``Encoder.bow_normalize``, VDR ``norm``)."""
    bow = bag_of_words(encoding, vocab)
    if normalize:
        norm = float(np.linalg.norm(bow))
        if norm > 0:
            bow = (bow / norm).astype(np.float32)
    return bow


def gate(encoding: LexicalEncoding, vocab: list[str], k: int) -> np.ndarray:
    """``E(x) = V(x) ⊙ G(x)``; ``G`` = top-k of ``V`` or the input's own tokens.

    ``k = -1`` keeps every dimension; ``k = 0`` keeps the bag-of-words dimensions only.
    """
    weights = encoding.weights
    if k < 0 or k >= weights.shape[0]:
        return weights.copy()
    mask = bag_of_words(encoding, vocab) > 0
    if k > 0:
        mask[np.argpartition(-weights, k - 1)[:k]] = True
    return np.where(mask, weights, 0.0).astype(np.float32)
