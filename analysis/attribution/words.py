"""Words of a tokenised text and the Integrated-Gradients baseline built from them.

Word pieces are merged into words at WordPiece's ``##`` continuations; ``[CLS]``, ``[SEP]``
and ``[PAD]`` are not words. A word counts for the masking evaluation and the topic clouds
when it has a letter or digit (punctuation and symbols do not).

**Baseline** (RepMoT, "Interpreting Dense Retrieval as Mixture of Topics", §3.2 and its
footnote 1): the same sequence with every token replaced by ``[UNK]`` except the stop
words, which keep their own embedding ("we keep all stop words for the baseline input"),
and ``[CLS]``/``[SEP]``. So ``x_j = x'_j`` for a stop word and its attribution is exactly
zero. The stop-word list is not stated in the paper; Lexlens uses ``wordcloud.STOPWORDS``
(192 English function words, a direct dependency), matched on the lower-cased word with its
pieces merged. ``baseline="pad"`` uses ``[PAD]`` instead of ``[UNK]``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from lexlens.analysis.attribution.validate import check_baseline

SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]"})


def group_word_pieces(tokens: Sequence[str]) -> tuple[list[str], list[list[int]]]:
    """Merge WordPiece ``##`` continuations into words; special tokens are dropped.

    Returns ``(words, groups)`` where ``groups[w]`` lists the token indices of word ``w``.
    """
    words: list[str] = []
    groups: list[list[int]] = []
    for j, tok in enumerate(tokens):
        if tok in SPECIAL_TOKENS:
            continue
        if tok.startswith("##") and groups and groups[-1][-1] == j - 1:
            words[-1] += tok[2:]
            groups[-1].append(j)
        else:
            words.append(tok)
            groups.append([j])
    return words, groups


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
    from wordcloud import STOPWORDS

    return frozenset(w.lower() for w in STOPWORDS)


def is_word(word: str) -> bool:
    """A word has a letter or digit; punctuation and symbols do not count as words."""
    return any(ch.isalnum() for ch in word)


def baseline_ids(input_ids: Sequence[int], tokenizer, baseline: str = "unk") -> list[int]:
    """The IG baseline of one sequence: non-stop words → ``[UNK]`` (or ``[PAD]``).

    Stop words keep their own pieces (RepMoT's footnote 1), as do ``[CLS]``, ``[SEP]`` and
    padding; every other word piece, punctuation included, becomes the fill token.
    """
    check_baseline(baseline)
    ids = [int(t) for t in input_ids]
    fill = int(tokenizer.unk_token_id if baseline == "unk" else tokenizer.pad_token_id)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    words, groups = group_word_pieces(tokens)
    keep = {
        j for word, g in zip(words, groups, strict=True) if word.lower() in stop_words() for j in g
    }
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    return [t if (t in special or j in keep) else fill for j, t in enumerate(ids)]
