"""Terms of a vocabulary vector and the one rule that joins word pieces into words.

A lexical vector's dimensions are vocabulary tokens, word pieces among them ("gi", "##raf",
"##fe"); VDR's appendix shows a word cloud losing "giraffe" that way. Every display of
Lexlens reads words, not pieces: :func:`merge_word_pieces` joins the pieces of a word into
that word when there is evidence that they belong together (the input's own words, or the
words an encoder knows it expresses) — never from the vocabulary alone, which would glue
unrelated pieces ("domestic ##lis"), nor from tokens side by side in a ranking ("and ##x"):
a piece no input spelled into a word is shown as it is.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lexlens.analysis.core.results import Record, internal
from lexlens.analysis.core.vocabulary import (
    is_frame_token,
    is_special_token,
    special_mask,
    token_positions,
)
from lexlens.models.wordpiece import wordpiece_split


@dataclass(frozen=True)
class Term(Record):
    """One output dimension: its token string, weight and index in the vocabulary.

    A word merged from pieces keeps its first piece's ``index``; ``pieces`` holds the
    vocabulary indices whose largest weight is the word's weight (its heatmap is the max
    over these columns). Empty for a plain vocabulary token.
    """

    token: str
    weight: float
    index: int
    pieces: tuple[int, ...] = internal(default=())

    @property
    def columns(self) -> tuple[int, ...]:
        """The vocabulary columns this term stands for (its pieces, or its own index)."""
        return self.pieces or (self.index,)


def group_word_pieces(units: Sequence[str]) -> tuple[list[str], list[list[int]]]:
    """The words of a tokenised text and the units of each: the one word-piece rule.

    A WordPiece continuation (``##…``) joins the word right before it (``gi ##raf ##fe`` →
    giraffe); frame tokens ([CLS], [SEP], [PAD]) belong to no word, and no piece joins a
    special token. Returns ``(words, groups)``, ``groups[w]`` the unit indices of word ``w``.
    """
    words: list[str] = []
    groups: list[list[int]] = []
    for j, unit in enumerate(units):
        if is_frame_token(unit):
            continue
        if (
            unit.startswith("##")
            and groups
            and groups[-1][-1] == j - 1
            and not is_special_token(words[-1])
        ):
            words[-1] += unit[2:]
            groups[-1].append(j)
        else:
            words.append(unit)
            groups.append([j])
    return words, groups


def input_words(units: list[str]) -> set[str]:
    """Whole words spelled by runs of word pieces in a text's units (``gi ##raf ##fe``); a
    special token ([UNK], [MASK]…) spells none."""
    return {w for w in group_word_pieces(units)[0] if w and not is_special_token(w)}


def unit_words(units: Sequence[str]) -> list[str]:
    """The whole word each unit of a text belongs to (``gi`` of ``gi ##raf ##fe`` →
    giraffe), in one pass over the units; a special token is its own word."""
    out = list(units)
    words, groups = group_word_pieces(units)
    for word, group in zip(words, groups, strict=True):
        for i in group:
            if not is_special_token(units[i]):
                out[i] = word
    return out


def top_terms(
    weights: np.ndarray,
    vocab: list[str],
    k: int = 20,
    *,
    merge_pieces: bool = False,
    words: set[str] | None = None,
    exclude_special: bool = True,
    lone_pieces: bool = True,
) -> list[Term]:
    """The ``k`` highest-weighted terms (positive weights only), best first.

    With ``merge_pieces``, word pieces among the top terms are joined into the ``words``
    they spell ("gi ##raf ##fe" → "giraffe"), a display choice for the word-piece failure
    VDR App. F describes; see :func:`merge_word_pieces` (``lone_pieces`` off when ``words``
    are a whole collection's).
    """
    if k <= 0:
        return []
    if weights.shape[0] != len(vocab):
        raise ValueError(
            f"weights have {weights.shape[0]} dims but the vocabulary has {len(vocab)}"
        )
    scores = np.asarray(weights, dtype=np.float32)
    # Pull a generous candidate pool, so merging and filtering still leave k terms; special
    # tokens are dropped from the pool (widened until enough remain: checking the pool is
    # far cheaper than matching all |V| tokens on every call).
    want = min(len(scores), max(4 * k, k + 64))
    size = want
    while True:
        idx = np.argpartition(-scores, size - 1)[:size]
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        if exclude_special:
            idx = (
                idx[~special_mask(vocab)[idx]]
                if isinstance(vocab, list)
                else np.array([i for i in idx if not is_special_token(vocab[i])], dtype=np.int64)
            )
        if len(idx) >= want or size == len(scores):
            break
        size = min(len(scores), 2 * size)
    idx = idx[:want]
    terms = [Term(vocab[i], float(scores[i]), int(i)) for i in idx if scores[i] > 0]
    if merge_pieces:
        terms = merge_word_pieces(terms, vocab, words or set(), lone_pieces=lone_pieces)
    return terms[:k]


def merge_word_pieces(
    terms: list[Term], vocab: list[str], words: set[str], *, lone_pieces: bool = True
) -> list[Term]:
    """Join the pieces of each of ``words`` among ``terms`` into one term for the word.

    Merging needs evidence that the pieces belong together: ``words`` are words an input
    spelled — a text's own words (:func:`input_words` of its units in order, or
    :func:`text_words` of the text) — or words an encoder knows it can express (e.g. the
    ImageNet class words of the label-space image encoder). Guessing from the vocabulary,
    or from tokens that merely sit side by side in a ranking, glues unrelated pieces
    ("domestic ##lis", "and ##x"), so it is not done: a piece no evidence word explains is
    shown as it is.

    - When every piece of a word is among ``terms``, its continuation pieces (``##…``) are
      absorbed into the word; so is the first piece, unless it is one of ``words`` itself
      and weighs more than the merged word ("cat" of "catamount" stays a term of its own
      and lends the word no weight).
    - With ``lone_pieces`` (the evidence is one input's words), a continuation piece whose
      word lacks other pieces among ``terms`` is shown as that word when exactly one
      evidence word spells it ("##keeper" of a text saying "goalkeeper" → goalkeeper); a
      first piece stays itself (it reads as a word). Leave it off when the evidence is the
      words of a whole collection, where a piece's weight comes from many items.
    - A merged word's weight is the largest weight among the pieces that lend it weight
      and belong to no other merged word ("##er" of both "blower" and "loudspeaker" lends
      to neither); when every piece is shared, the smallest of its pieces' weights (that
      piece alone is its column: a word never takes the weight of a piece another word
      shares, "##o" of "espresso" never weighs for "cro").
    """
    vocab_set = token_positions(vocab) if isinstance(vocab, list) else set(vocab)
    by_token = {t.token: t for t in terms}
    whole: list[tuple[str, list[Term], list[Term]]] = []
    partial: list[tuple[str, list[Term]]] = []
    for word in sorted(words):
        pieces = wordpiece_split(word, vocab_set)
        if not pieces or len(pieces) < 2:
            continue
        present = [by_token[p] for p in pieces if p in by_token]
        if len(present) == len(pieces):
            lenders = present[1:] if present[0].token in words else present
            whole.append((word, present, lenders))
        elif lone_pieces and present:
            partial.append((word, [p for p in present if p.token.startswith("##")]))
    claims = Counter(p.index for _, _, lenders in whole for p in lenders)
    absorbed = {p.index for _, _, lenders in whole for p in lenders}
    merged = []
    for word, parts, lenders in whole:
        exclusive = [p for p in lenders if claims[p.index] == 1]
        if exclusive:
            weight = max(p.weight for p in exclusive)
            columns = tuple(p.index for p in exclusive)
        else:  # the weakest piece alone: no piece shared with another word lends it more
            weakest = min(parts, key=lambda p: p.weight)
            weight, columns = weakest.weight, (weakest.index,)
        head = parts[0]
        if head not in lenders and head.weight <= weight:
            absorbed.add(head.index)  # nothing but this word explains the head's weight
        merged.append(Term(word, weight, head.index, columns))
    lone = Counter(p.index for _, pieces in partial for p in pieces if p.index not in claims)
    for word, pieces in partial:
        own = [p for p in pieces if p.index not in claims and lone[p.index] == 1]
        if own:
            absorbed.update(p.index for p in own)
            merged.append(
                Term(word, max(p.weight for p in own), own[0].index, tuple(p.index for p in own))
            )
    out = [t for t in terms if t.index not in absorbed] + merged
    return sorted(out, key=lambda t: -t.weight)


def spelling(term: Term, vocab: list[str]) -> list[str]:
    """How a term is spelled in the vocabulary: every piece of a merged word (``cat ##amo
    ##unt``, also those that lend it no weight), else nothing."""
    if not term.pieces:
        return []
    return wordpiece_split(term.token, token_positions(vocab)) or [vocab[i] for i in term.pieces]


def text_words(text: str) -> set[str]:
    """The lower-cased words a text spells (runs of letters and digits): the evidence that
    pieces of a vocabulary belong together when only the text is at hand."""
    return set(re.findall(r"[^\W_]+", text.casefold()))


def merge_contributions(
    rows: Sequence[Mapping[str, Any]], vocab: Sequence[str] | set[str], words: set[str]
) -> list[dict]:
    """Contribution rows (``token``, ``contribution`` …) with the pieces of each evidence word
    joined into one row for the word.

    The word's contribution is the *sum* of its pieces' contributions, so the rows still sum
    to the score (weights, by contrast, merge by the max: :func:`merge_word_pieces`). A word
    is joined only when every one of its pieces has a row; its first piece stays a row of its
    own when it is an evidence word itself ("cat" of "catamount"). Each piece joins at most
    one word, longer words first. A joined row has ``pieces`` (the tokens) and no
    per-side weights; the rest keep their fields. Largest contribution first.
    """
    vocab_set = token_positions(vocab) if isinstance(vocab, list) else set(vocab)
    by_token = {str(r["token"]): dict(r) for r in rows}
    used: set[str] = set()
    merged: list[dict] = []
    spelled = [(w, wordpiece_split(w, vocab_set)) for w in words]
    candidates = [(w, p) for w, p in spelled if p and len(p) > 1]
    for word, pieces in sorted(candidates, key=lambda wp: (-len(wp[1]), wp[0])):
        joined = pieces[1:] if pieces[0] in words else pieces
        if not all(p in by_token for p in pieces) or any(p in used for p in joined):
            continue
        used.update(joined)
        merged.append(
            {
                "token": word,
                "index": by_token[joined[0]].get("index"),
                "contribution": float(sum(by_token[p]["contribution"] for p in joined)),
                "pieces": list(joined),
            }
        )
    out = [r for t, r in by_token.items() if t not in used] + merged
    return sorted(out, key=lambda r: -r["contribution"])


def words_of_tokens(tokens: Sequence[str], vocab: Sequence[str], words: set[str]) -> list[str]:
    """A list of vocabulary tokens (a set of dimensions, strongest first) read as words: the
    pieces of each evidence word that are all in the list become that word, at the place of
    its first piece; other tokens stay as they are."""
    vocab_set = token_positions(vocab) if isinstance(vocab, list) else set(vocab)
    place = {t: n for n, t in enumerate(tokens)}
    joined: dict[str, tuple[int, str]] = {}  # piece → (place of the word, word)
    spelled = ((w, wordpiece_split(w, vocab_set)) for w in words)
    for word, pieces in sorted(
        ((w, p) for w, p in spelled if p and len(p) > 1), key=lambda wp: (-len(wp[1]), wp[0])
    ):
        if all(p in place for p in pieces) and not any(p in joined for p in pieces):
            at = min(place[p] for p in pieces)
            for p in pieces:
                joined[p] = (at, word)
    out: list[tuple[int, str]] = []
    seen: set[str] = set()
    for n, token in enumerate(tokens):
        at, word = joined.get(token, (n, token))
        if word not in seen:
            seen.add(word)
            out.append((at, word))
    return [w for _, w in sorted(out, key=lambda x: x[0])]


def item_words(meta: Mapping) -> set[str]:
    """The words an item spells: its text, captions and labels."""
    parts = [str(meta.get("text") or "")]
    parts += [str(c) for c in meta.get("captions") or []]
    parts += [str(lab) for lab in meta.get("labels") or []]
    return text_words(" ".join(parts))


@dataclass(frozen=True)
class Reading(Record):
    """How one entry of a display (a vocabulary token, or a word merged from pieces) reads
    against the words of the text(s) it explains.

    A *piece* is not a whole word of the text: a WordPiece continuation (``##ome``), or the
    start of a longer word of the text that is not a word itself (``dr`` of "dromedary",
    ``terri`` of "terrier"). A piece is shown marked (:attr:`label`), never as a word;
    ``of`` is the one word of the text it belongs to, when exactly one is.
    """

    text: str
    piece: bool = False
    of: str | None = None

    @property
    def label(self) -> str:
        """The entry as a display shows it: ``dromedary``, ``##ome (piece of dromedary)``,
        ``##r (piece)``."""
        if not self.piece:
            return self.text
        return f"{self.text} (piece of {self.of})" if self.of else f"{self.text} (piece)"


class WordReader:
    """The one rule for "whole word of this text" against "piece", for a set of evidence
    words (a text's own words, an item's, or a collection's, with the words an encoder
    knows it expresses).

    An entry that is one of the evidence words is a whole word; a ``##`` continuation is
    always a piece; any other vocabulary token is a piece when it is the first of the
    pieces of a longer evidence word (``h`` of ``h ##yen ##a``) and a whole token otherwise
    (an expansion term such as "dogs" for a text that says "dog").
    """

    def __init__(self, words: set[str] | frozenset[str], vocab: Sequence[str] | set[str]):
        self.words = frozenset(w for w in words if w and not is_special_token(w))
        self._vocab = token_positions(vocab) if isinstance(vocab, list) else set(vocab)
        self._read: dict[str, Reading] = {}
        self._spelled: dict[str, list[str]] = {}

    def read(self, entry: str) -> Reading:
        """How ``entry`` reads: a whole word, or a piece (of which word, when one)."""
        if entry not in self._read:
            self._read[entry] = self._reading(entry)
        return self._read[entry]

    def _reading(self, entry: str) -> Reading:
        if entry in self.words or is_special_token(entry):
            return Reading(entry)
        continuation = entry.startswith("##")
        core = entry[2:] if continuation else entry
        if not core:
            return Reading(entry)
        owners = []
        for word in self.words:
            if len(word) <= len(core) or (
                core not in word if continuation else not word.startswith(core)
            ):
                continue
            if word not in self._spelled:
                self._spelled[word] = wordpiece_split(word, self._vocab) or []
            pieces = self._spelled[word]
            if entry in (pieces[1:] if continuation else pieces[:1]) and len(pieces) > 1:
                owners.append(word)
        if not owners and not continuation:
            return Reading(entry)
        return Reading(entry, True, owners[0] if len(owners) == 1 else None)

    def label(self, entry: str) -> str:
        """``entry`` as a display shows it (:attr:`Reading.label`)."""
        return self.read(entry).label

    def mark(self, rows: Sequence[Mapping[str, Any]], key: str) -> list[dict]:
        """Rows (each names its entry under ``key``) with the marker: ``piece`` (true for a
        piece) and, for a piece of one known word, ``piece_of``."""
        out = []
        for row in rows:
            reading = self.read(str(row[key]))
            marked = dict(row) | {"piece": reading.piece}
            if reading.of:
                marked["piece_of"] = reading.of
            out.append(marked)
        return out

    def pieces(self, entries: Sequence[str]) -> dict[str, str | None]:
        """The entries that are pieces, each with the word it belongs to (``None``: none
        known, or several)."""
        return {e: r.of for e in entries if (r := self.read(e)).piece}


def entry_label(row: Mapping[str, Any], key: str = "word") -> str:
    """A marked row's entry as a display shows it (:attr:`Reading.label`)."""
    return Reading(str(row[key]), bool(row.get("piece")), row.get("piece_of")).label
