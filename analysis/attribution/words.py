"""Words of a tokenised text for Integrated Gradients, and the baseline built from them.

The words are those of the one word-piece rule
(:func:`lexlens.analysis.core.words.group_word_pieces`: pieces merged at WordPiece's ``##``
continuations; the frame tokens ``[CLS]``, ``[SEP]`` and ``[PAD]`` are not words). A word
counts for the masking evaluation and the topic clouds when it has a letter or digit
(punctuation and symbols do not).

**Baseline** (RepMoT, "Interpreting Dense Retrieval as Mixture of Topics", §3.2 and its
footnote 1): the same sequence with every token replaced by ``[UNK]`` except the stop
words, which keep their own embedding ("we keep all stop words for the baseline input"),
and the frame tokens. So ``x_j = x'_j`` for a stop word and its attribution is exactly
zero. The stop-word list is not stated in the paper; Lexlens uses ``wordcloud.STOPWORDS``
(192 English function words, a direct dependency), matched on the lower-cased word with its
pieces merged. ``baseline="pad"`` uses ``[PAD]`` instead of ``[UNK]``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from lexlens.analysis.attribution.options import IgOptions
from lexlens.analysis.core.options import checked
from lexlens.analysis.core.vocabulary import frame_token_ids
from lexlens.analysis.core.words import group_word_pieces


def aggregate_words(token_scores: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """Sum token scores ``[..., n_tokens]`` into word scores ``[..., n_words]``."""
    token_scores = np.asarray(token_scores, dtype=np.float64)
    out = np.zeros(token_scores.shape[:-1] + (len(groups),), dtype=np.float64)
    for w, idx in enumerate(groups):
        out[..., w] = token_scores[..., idx].sum(-1)
    return out


@functools.cache
def stop_words() -> frozenset[str]:
    """The English stop words kept in the baseline (``wordcloud.STOPWORDS``)."""
    from wordcloud import STOPWORDS  # heavy: wordcloud loads on first use

    return frozenset(w.lower() for w in STOPWORDS)


def is_word(word: str) -> bool:
    """A word has a letter or digit; punctuation and symbols do not count as words."""
    return any(ch.isalnum() for ch in word)


def baseline_ids(input_ids: Sequence[int], tokenizer, baseline: str = "unk") -> list[int]:
    """The IG baseline of one sequence: non-stop words → ``[UNK]`` (or ``[PAD]``).

    Stop words keep their own pieces (RepMoT's footnote 1), as do the frame tokens
    (``[CLS]``, ``[SEP]``, padding); every other word piece, punctuation included, becomes
    the fill token.
    """
    baseline = checked(IgOptions, "baseline", baseline)
    ids = [int(t) for t in input_ids]
    fill = int(tokenizer.unk_token_id if baseline == "unk" else tokenizer.pad_token_id)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    words, groups = group_word_pieces(tokens)
    keep = {
        j for word, g in zip(words, groups, strict=True) if word.lower() in stop_words() for j in g
    }
    frame = frame_token_ids(tokenizer)
    return [t if (t in frame or j in keep) else fill for j, t in enumerate(ids)]
