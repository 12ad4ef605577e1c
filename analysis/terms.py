"""Top terms of a lexical encoding: filtering, word-piece merging, provenance."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from itertools import permutations

import numpy as np

from models.base import LexicalEncoding

_SPECIAL = re.compile(r"^\[(CLS|SEP|PAD|MASK|UNK|unused\d+|id\d+)\]$")


@dataclass(frozen=True)
class Term:
    """One output dimension: its token string, weight and index in the vocabulary."""

    token: str
    weight: float
    index: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TermProvenance:
    """Which input unit (token or patch) won the max pool for a term."""

    term: Term
    unit_index: int
    unit: str
    unit_weight: float
    in_input: bool  # the term is one of the input's own tokens (bag of words)

    def to_dict(self) -> dict:
        return {
            "token": self.term.token,
            "weight": self.term.weight,
            "unit_index": self.unit_index,
            "unit": self.unit,
            "in_input": self.in_input,
        }


def is_special_token(token: str) -> bool:
    """[CLS], [SEP], [PAD], [MASK], [UNK] and [unusedN] carry no meaning as terms."""
    return bool(_SPECIAL.match(token))


def special_mask(vocab: list[str]) -> np.ndarray:
    """Boolean ``[|V|]``: True where the vocabulary entry is a special token."""
    return np.fromiter((is_special_token(t) for t in vocab), dtype=bool, count=len(vocab))


def top_terms(
    weights: np.ndarray,
    vocab: list[str],
    k: int = 20,
    *,
    merge_pieces: bool = False,
    exclude_special: bool = True,
) -> list[Term]:
    """The ``k`` highest-weighted terms (positive weights only), best first.

    With ``merge_pieces``, a continuation piece (``##raf``) is shown joined to the best
    preceding head piece it can complete among the top terms ("gi ##raf ##fe" →
    "giraffe", weight = max of the pieces), a display choice for the word-piece failure
    VDR App. F describes.
    """
    if k <= 0:
        return []
    if weights.shape[0] != len(vocab):
        raise ValueError(
            f"weights have {weights.shape[0]} dims but the vocabulary has {len(vocab)}"
        )
    scores = np.asarray(weights, dtype=np.float32).copy()
    if exclude_special:
        scores[special_mask(vocab)] = -np.inf
    # Pull a generous candidate pool, so merging and filtering still leave k terms.
    pool = min(len(scores), max(4 * k, k + 64))
    idx = np.argpartition(-scores, pool - 1)[:pool]
    idx = idx[np.argsort(-scores[idx], kind="stable")]
    terms = [Term(vocab[i], float(scores[i]), int(i)) for i in idx if scores[i] > 0]
    if merge_pieces:
        terms = merge_word_pieces(terms, vocab)
    return terms[:k]


def wordpiece_split(word: str, vocab: set[str]) -> list[str] | None:
    """Greedy longest-match-first WordPiece split of one word (``None`` if impossible)."""
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return None
        pieces.append(piece)
        start = end
    return pieces


def merge_word_pieces(terms: list[Term], vocab: list[str], max_tails: int = 3) -> list[Term]:
    """Join ``##`` continuation pieces among ``terms`` onto a head piece.

    A head and up to ``max_tails`` continuations merge into a word when the tokenizer
    would split that word into exactly those pieces ("gi ##raf ##fe" → "giraffe"), so a
    merge is never a guess the vocabulary contradicts. Heads are tried best first; the
    merged term keeps the head's index and the max weight of its pieces. Continuations
    that complete no head are dropped (on their own they are not words).
    """
    vocab_set = set(vocab)
    tails = [t for t in terms if t.token.startswith("##")][:12]
    used: set[int] = set()
    out: list[Term] = []
    for head in (t for t in terms if not t.token.startswith("##")):
        best: tuple[Term, ...] = ()
        for n in range(1, max_tails + 1):
            for combo in permutations([t for t in tails if t.index not in used], n):
                chain = [head.token, *(t.token for t in combo)]
                word = head.token + "".join(t.token[2:] for t in combo)
                if wordpiece_split(word, vocab_set) == chain:
                    best = combo
                    break
        if best:
            used.update(t.index for t in best)
            word = head.token + "".join(t.token[2:] for t in best)
            out.append(Term(word, max(head.weight, *(t.weight for t in best)), head.index))
        else:
            out.append(head)
    return sorted(out, key=lambda t: -t.weight)


def own_tokens(encoding: LexicalEncoding) -> set[str]:
    """The input's own token strings (bag of words); empty for images.

    Compared by string, since an output dimension's index is not always a token id (VDR
    drops the first 999 ids, or keeps a subset).
    """
    return set(encoding.units) if encoding.input_ids is not None else set()


def provenance(encoding: LexicalEncoding, terms: list[Term]) -> list[TermProvenance]:
    """For each term, the unit whose row won the max pool (argmax over units)."""
    if encoding.unit_weights is None:
        raise ValueError("this encoding was made without per-unit rows (keep_units=False)")
    own = own_tokens(encoding)
    rows = encoding.unit_weights
    out = []
    for term in terms:
        column = rows[:, term.index]
        unit = int(np.argmax(column))
        out.append(
            TermProvenance(term, unit, encoding.units[unit], float(column[unit]), term.token in own)
        )
    return out


def term_rows(
    encoding: LexicalEncoding,
    vocab: list[str],
    k: int = 20,
    *,
    weights: np.ndarray | None = None,
    merge_pieces: bool = False,
) -> list[dict]:
    """Top terms as table rows: token, weight, index, and for text the provenance.

    ``weights`` overrides the encoding's pooled vector (e.g. a patch group's); the
    ``from_unit`` column (the unit that won the max pool) is given for the encoding's own
    vector when per-unit rows were kept. ``in_input`` marks bag-of-words terms (the
    input's own token ids) against expansion terms.
    """
    own_vector = weights is None
    terms = top_terms(
        encoding.weights if own_vector else weights, vocab, k, merge_pieces=merge_pieces
    )
    rows = [t.to_dict() for t in terms]
    own = own_tokens(encoding)
    for row in rows:
        row["in_input"] = vocab[row["index"]] in own
    if own_vector and encoding.unit_weights is not None:
        for row, prov in zip(rows, provenance(encoding, terms), strict=True):
            row["from_unit"] = prov.unit
            row["from_unit_index"] = prov.unit_index
    return rows
