"""BM25 as a system Lexlens computes itself, over a stored collection's item texts, with
every score decomposed into its query terms.

The scores are bm25s's (Lù, "BM25S: Orders of magnitude faster lexical search via eager
sparse scoring", 2024): the collection's texts tokenized by ``bm25s.tokenize`` (lower-cased,
words of two or more word characters — scikit-learn's ``(?u)\\b\\w\\w+\\b`` — bm25s's English
stop words removed, no stemming) and indexed by ``bm25s.BM25`` with the parameters of
:class:`Bm25Options` (``k1``, ``b``, the variant ``method`` as bm25s names them, after
Kamphuis et al., "Which BM25 do you mean?", 2020; ``delta`` of BM25L and BM25+ at bm25s's
default), in float64.

bm25s scores eagerly: its index holds, per vocabulary token, the term score of every item
that contains it (a sparse item × token matrix), and an item's score for a query is the sum
of the query tokens' columns at its row, each token counted as often as the query holds it
(BM25L and BM25+ add each token's score of an item that lacks it). So a query token's
*contribution* to an item is that stored term score (plus the non-occurrence score) times
its count in the query: the contributions sum to the score bm25s's ``get_scores`` gives.

An item is *retrieved* when it holds at least one query token (an item sharing no token with
the query has no rank, as in Lexlens's own rankings); the ranking is by score, ties by
collection row. A collection whose items keep no texts (images, features) is refused.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.options import Options, option
from lexlens.models.base import InputError

#: bm25s's variants (``method``).
METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")
#: bm25s's own defaults.
DEFAULT_K1, DEFAULT_B, DEFAULT_METHOD, DELTA = 1.5, 0.75, "lucene", 0.5
#: The stop-word list bm25s's tokenizer removes (its English list).
STOPWORDS = "en"
#: How the texts become tokens, in words (the JSON document and the notes say it).
TOKENIZER = (
    "bm25s.tokenize: lower-cased, words of 2+ word characters ((?u)\\b\\w\\w+\\b), "
    "bm25s's English stop words removed, no stemming"
)
#: BM25 indexes kept built (by collection and parameters): a comparison explains after it
#: evaluates, and both use one index.
KEPT = 2


@dataclass(frozen=True)
class Bm25Options(Options):
    """BM25's parameters, as bm25s names them (its defaults)."""

    what = "evaluate"

    bm25_k1: float = option(
        DEFAULT_K1,
        "BM25's term-frequency saturation k1 (bm25s)",
        low=0.0,
        high=100.0,
        label="BM25 k1",
        widget="number",
    )
    bm25_b: float = option(
        DEFAULT_B,
        "BM25's document-length normalisation b (bm25s)",
        low=0.0,
        high=1.0,
        label="BM25 b",
        widget="number",
    )
    bm25_method: str = option(
        DEFAULT_METHOD,
        "BM25's variant as bm25s names it (Kamphuis et al. 2020)",
        choices=METHODS,
        label="BM25 variant",
        widget="select",
    )

    @property
    def name(self) -> str:
        """The system's name, its parameters in it."""
        delta = f" delta={DELTA:g}" if self.bm25_method in ("bm25l", "bm25+") else ""
        return (
            f"bm25 (bm25s k1={self.bm25_k1:g} b={self.bm25_b:g} method={self.bm25_method}{delta})"
        )

    def parameters(self) -> dict[str, Any]:
        """What the system is, for the JSON document: library, parameters, tokenizer."""
        return {
            "library": "bm25s",
            "k1": self.bm25_k1,
            "b": self.bm25_b,
            "method": self.bm25_method,
            "delta": DELTA,
            "stopwords": STOPWORDS,
            "tokenizer": TOKENIZER,
        }

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, Any]) -> Bm25Options:
        """The options :meth:`parameters` described."""
        return cls(
            bm25_k1=parameters["k1"], bm25_b=parameters["b"], bm25_method=parameters["method"]
        )


def bm25s_module() -> Any:
    """The bm25s package; refused in one line when it is not installed."""
    try:
        import bm25s  # optional extra: bm25
    except ImportError:
        raise InputError(
            'BM25 (--bm25) needs the bm25s package: pip install "lexlens[bm25]"'
        ) from None
    return bm25s


def tokens_of(texts: Sequence[str]) -> list[list[str]]:
    """Each text's tokens as bm25s's tokenizer gives them (in order, repeats kept)."""
    bm25s = bm25s_module()
    if not texts:
        return []
    found = bm25s.tokenize(list(texts), stopwords=STOPWORDS, return_ids=False, show_progress=False)
    return [[t for t in tokens if t] for tokens in found]


@dataclass
class Bm25Index:
    """bm25s's index of a collection's item texts (rows in collection order)."""

    retriever: Any  # a bm25s.BM25
    ids: list[str]
    options: Bm25Options
    empty: int  # items whose text holds no token

    def known(self, text: str) -> list[str]:
        """The query's tokens the index knows, in order, repeats kept (bm25s drops the others)."""
        vocab = self.retriever.vocab_dict
        return [t for t in tokens_of([text])[0] if t in vocab]

    def _column(self, token: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, term scores) of the items holding ``token``: bm25s's stored column, its
        rows in increasing order (a CSC matrix's)."""
        t = self.retriever.vocab_dict[token]
        scores = self.retriever.scores
        start, end = int(scores["indptr"][t]), int(scores["indptr"][t + 1])
        return scores["indices"][start:end], scores["data"][start:end]

    def _held(self, token: str, row: int) -> float | None:
        """The term score bm25s stores for ``token`` in item ``row`` (``None``: it lacks it)."""
        rows, values = self._column(token)
        at = int(np.searchsorted(rows, row))
        return float(values[at]) if at < len(rows) and int(rows[at]) == row else None

    def _absent(self, token: str) -> float:
        """The score of ``token`` in an item that lacks it (BM25L, BM25+; else 0)."""
        missing = self.retriever.nonoccurrence_array
        return 0.0 if missing is None else float(missing[self.retriever.vocab_dict[token]])

    def scores(self, text: str) -> np.ndarray:
        """Every item's score for ``text``: bm25s's ``get_scores`` (0 for a query it knows no
        token of)."""
        known = self.known(text)
        if not known:
            return np.zeros(len(self.ids), np.float64)
        return np.asarray(self.retriever.get_scores(known), np.float64)

    def holding(self, text: str) -> list[int]:
        """The rows of the items holding at least one of the query's tokens, in order."""
        columns = [self._column(t)[0] for t in set(self.known(text))]
        return np.unique(np.concatenate(columns)).tolist() if columns else []

    def ranking(self, text: str, depth: int) -> list[tuple[str, float]]:
        """The top ``depth`` items holding a query token, by score (ties by row)."""
        rows = self.holding(text)
        if not rows:
            return []
        scores = self.scores(text)[rows]
        order = np.lexsort((np.asarray(rows), -scores))[:depth]
        return [(self.ids[rows[i]], float(scores[i])) for i in order]

    def terms(self, text: str, row: int) -> list[dict]:
        """Each query token's contribution to item ``row`` (count × its term score), largest
        first, tokens contributing 0 left out: they sum to the item's score."""
        counts = Counter(self.known(text))
        rows = []
        for token, count in counts.items():
            held = self._held(token, row)
            score = held + self._absent(token) if held is not None else self._absent(token)
            if score == 0.0:  # a token the item lacks (BM25L and BM25+ score it still)
                continue
            rows.append(
                {
                    "word": token,
                    "count": count,
                    "term_score": float(score),
                    "contribution": float(count * score),
                }
            )
        return sorted(rows, key=lambda r: (-r["contribution"], r["word"]))

    def score(self, text: str, row: int) -> float:
        """Item ``row``'s score: its terms' contributions summed."""
        return math.fsum(r["contribution"] for r in self.terms(text, row))


def check_texts(ix: StoredCollection) -> None:
    """Refuse, in one line naming it, a collection whose items are not texts (images,
    features): BM25 ranks item texts."""
    if ix.modality != "text":
        raise InputError(
            f"{ix.label}: its items are {ix.modality}s, not texts: BM25 (--bm25) ranks item "
            "texts (give a collection of texts)"
        )


def item_texts(ix: StoredCollection) -> list[str]:
    """The collection's item texts in row order; refused in one line when it keeps none."""
    check_texts(ix)
    texts = [str(t or "") for t in ix.column("text")]
    if not any(t.strip() for t in texts):
        raise InputError(f"{ix.label}: its items keep no texts: BM25 (--bm25) ranks item texts")
    return texts


_built: dict[tuple, Bm25Index] = {}


def bm25_index(ix: StoredCollection, options: Bm25Options | None = None) -> Bm25Index:
    """bm25s's index of ``ix``'s item texts with ``options`` (the last :data:`KEPT` built are
    kept, by collection and parameters)."""
    bm25s = bm25s_module()

    options = options or Bm25Options()
    if not isinstance(options, Bm25Options):
        raise InputError(f"bm25 must be Bm25Options, not {type(options).__name__}")
    key = (str(ix.path), ix.fingerprint, options)
    if key in _built:
        return _built[key]
    texts = item_texts(ix)
    tokens = tokens_of(texts)
    if not any(tokens):
        raise InputError(
            f"{ix.label}: no item text holds a word bm25s's tokenizer keeps (stop words "
            "only): BM25 (--bm25) has nothing to rank"
        )
    retriever = bm25s.BM25(
        k1=options.bm25_k1,
        b=options.bm25_b,
        method=options.bm25_method,
        delta=DELTA,
        dtype="float64",
    )
    retriever.index(tokens, show_progress=False)
    built = Bm25Index(retriever, [str(i) for i in ix.column("id")], options, tokens.count([]))
    while len(_built) >= KEPT:
        _built.pop(next(iter(_built)))
    _built[key] = built
    return built


def bm25_run(
    ix: StoredCollection, queries: Mapping[str, str], options: Bm25Options, depth: int
) -> tuple[dict[str, list[tuple[str, float]]], list[str]]:
    """BM25's ranking of every query ({query id: [(item id, score), …]}, top ``depth``) and
    the notes saying what the system is."""
    index = bm25_index(ix, options)
    run = {q: index.ranking(text, depth) for q, text in queries.items()}
    blank = sum(1 for q, text in queries.items() if not index.known(text))
    notes = [
        f"BM25 over the items' texts with bm25s, in float64 ({TOKENIZER}); each score is the "
        "sum of its query tokens' term scores"
    ]
    if index.empty:
        notes.append(f"{index.empty} items hold no token (BM25 never ranks them)")
    if blank:
        notes.append(
            f"{blank} queries hold no token the items' texts hold (BM25 retrieves nothing)"
        )
    return run, notes


@dataclass
class Bm25Query:
    """One query under BM25: any item's score, rank and terms."""

    index: Bm25Index
    text: str
    _scores: np.ndarray | None = field(default=None, repr=False)
    _held: dict[int, int] = field(default_factory=dict, repr=False)  # row → its rank

    def terms(self, row: int) -> list[dict]:
        """The query tokens' contributions to item ``row`` (:meth:`Bm25Index.terms`)."""
        return self.index.terms(self.text, row)

    def score(self, row: int) -> float:
        """Item ``row``'s score (its terms summed)."""
        return self.index.score(self.text, row)

    def rank(self, row: int) -> int | None:
        """Item ``row``'s 1-based rank at any depth (by score, ties by row); ``None`` when it
        holds no query token (not retrieved)."""
        if self._scores is None:
            self._scores = self.index.scores(self.text)
            rows = np.asarray(self.index.holding(self.text), np.int64)
            order = np.lexsort((rows, -self._scores[rows])) if len(rows) else []
            self._held = {int(rows[i]): rank for rank, i in enumerate(order, 1)}
        return self._held.get(int(row))
