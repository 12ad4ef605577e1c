"""Where a query's relevant items are in the ranking evaluated, and why a query whose first
relevant item is not first fails: the highest-ranked non-relevant item and the best relevant
one the collection holds, both explained (:mod:`lexlens.analysis.evaluation.explain`).

A relevant item is *retrieved* when the ranking holds it; for Lexlens's own ranking, one
scoring above 0 below the top n has an exact rank (*beyond the top*), one scoring 0 or less
shares no term with the query and has none (*not retrieved*, as an item another system's
run omits).

Each failure is put under the causes that hold for it (``Failure.causes``, in the order of
:data:`CAUSES`). They are **not exclusive**: a query may lack a word of its relevant item
and lose on expansion terms too; the counts per cause may sum to more than the failures.

- *lexical mismatch*: a content word of the query (a word it spells that is not an English
  function word, models/data/stop_words.txt) is not among the words the best relevant item
  spells (its text, captions and labels) in any form: a word it spells with the same
  Snowball stem ("terminate", "terminates") is a variant, not missing
  (:mod:`lexlens.analysis.lexical.stems`); ``missing_words`` lists the missing ones. An item that spells
  no word (a bare image) is never called a mismatch: there is nothing to compare.
- *won on expansion terms*: the non-relevant item is above the relevant one (``gap > 0``)
  although, counting only the query's own terms (the word pieces of the words the query
  spells), the relevant item scores at least as much (``query_delta ≤ 0``): the terms the
  query does not spell put the wrong item first.
- *not retrieved*: the ranking does not hold the query's best relevant item at all (it
  scores 0 — no shared term — or another system's run omits it): ``relevant_status`` is
  *not retrieved*.
- *not in the collection*: no relevant item of the query is in the collection.
- *other*: none of the above (every content word of the query is in the relevant item and
  the wrong item leads on the query's own terms: their weights decide; or a tie).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lexlens.analysis.collections.stored import StoredCollection
from lexlens.analysis.core.words import Term, item_words, text_words
from lexlens.analysis.evaluation.explain import Failure, Gap, explain_item, gap_words, query_terms
from lexlens.analysis.lexical.highlight import content_words
from lexlens.analysis.lexical.stems import missing_and_variants
from lexlens.analysis.retrieval.scorer import QueryRanking, Scorer

#: Where a query's best relevant item is (``relevant_status``).
RETRIEVED = "retrieved"  # in the ranking evaluated (the top n, or the run)
BEYOND_TOP = "beyond the top"  # scores above 0 but ranks below the top n: its rank is exact
NOT_RETRIEVED = "not retrieved"  # scores 0 or less (shares no term), or the run omits it
NOT_HELD = "not in the collection"  # no relevant item of the query is in the collection
NONE_RELEVANT = "none judged relevant"  # every judgement of the query is 0 or below

#: Why a query fails (``Failure.causes``): see the module docstring; not exclusive.
LEXICAL_MISMATCH = "lexical mismatch"
EXPANSION_WIN = "won on expansion terms"
CAUSE_NOT_RETRIEVED = NOT_RETRIEVED
CAUSE_NOT_HELD = NOT_HELD
OTHER = "other"
CAUSES = (LEXICAL_MISMATCH, EXPANSION_WIN, CAUSE_NOT_RETRIEVED, CAUSE_NOT_HELD, OTHER)

#: (rank — ``None``: not retrieved —, row) of an item of the collection.
Placed = tuple[int | None, int]


def first_relevant(pairs: Sequence[tuple[str, float]], relevant: set[str]) -> int | None:
    """The 1-based rank of the first relevant item in a ranking, or ``None``."""
    return next((i + 1 for i, (d, _) in enumerate(pairs) if d in relevant), None)


def status(first: int | None, best: Placed | None, listed: int) -> str:
    """Where a query's relevant items are: ``first`` relevant rank in the ranking of
    ``listed`` items, or else its best relevant item the collection holds (``best``)."""
    if first is not None:
        return RETRIEVED
    if best is None:
        return NOT_HELD
    if best[0] is None:
        return NOT_RETRIEVED
    return RETRIEVED if best[0] <= listed else BEYOND_TOP


def query_length(text: str) -> int:
    """How many words a query spells (runs of letters and digits, as ``text_words`` reads)."""
    return len(re.findall(r"[^\W_]+", text))


def missing_words(query: str, meta: Mapping) -> list[str]:
    """The query's content words (not function words) that an item spells in no form, sorted
    (a word it spells with the same Snowball stem — "terminate", "terminates" — is not
    missing: :func:`word_variants` lists those); none for an item that spells no word."""
    return _missing(query, meta)[0]


def word_variants(query: str, meta: Mapping) -> list[str]:
    """The query's content words an item spells only in another form of the same Snowball
    stem, as ``"terminate ≈ terminates"`` (the query's word, then the item's), sorted."""
    return _missing(query, meta)[1]


def _missing(query: str, meta: Mapping) -> tuple[list[str], list[str]]:
    """(missing words, variants) of the query's content words against an item's words."""
    spelled = item_words(meta)
    if not spelled:
        return [], []
    return missing_and_variants(content_words(query), spelled)


def causes(why: str, missing: list[str], gap: float | None, split: Gap | None) -> list[str]:
    """A failure's causes (see the module docstring), in the order of :data:`CAUSES`."""
    found = []
    if missing:
        found.append(LEXICAL_MISMATCH)
    if gap is not None and split is not None and gap > 0 and split.query_delta <= 0:
        found.append(EXPANSION_WIN)
    if why in (NOT_RETRIEVED, NOT_HELD):
        found.append(why)
    return found or [OTHER]


@dataclass(frozen=True)
class Explainer:
    """What explaining a query's ranking needs: the collection, its item ids in row order and
    each one's row, the exact scorer, the depth evaluated and whether the ranking is another
    system's run."""

    index: StoredCollection
    ids: Sequence[str]
    row_of: Mapping[str, int]
    scorer: Scorer
    top: int
    from_run: bool

    def best_relevant(
        self,
        pairs: Sequence[tuple[str, float]],
        relevant: set[str],
        ranking: QueryRanking | None,
        vector: np.ndarray,
    ) -> Placed | None:
        """(rank, row) of the query's best relevant item the collection holds: the first in
        the ranking; else (Lexlens's ranking) the best exact rank of those scoring above 0;
        else the highest-scoring one (ties by row) with rank ``None`` (not retrieved).
        ``None`` when the collection holds none. Lexlens's ranks are the scorer's
        :meth:`~lexlens.analysis.retrieval.scorer.Scorer.rank_of`, the call a counterfactual
        places the item with before its edit."""
        row_of = self.row_of
        found = next(
            ((i + 1, row_of[d]) for i, (d, _) in enumerate(pairs) if d in relevant and d in row_of),
            None,
        )
        if found is not None and ranking is None:
            return found
        held = sorted(row_of[d] for d in relevant if d in row_of)
        if not held:
            return None
        if ranking is not None:  # the first in the ranking, else beyond the top n
            ranked = [
                (rank, row)
                for row in ([found[1]] if found is not None else held)
                if (rank := self.scorer.rank_of(vector, row, ranking)[0]) is not None
            ]
            if ranked:
                return min(ranked)
        scores = self.scorer.scores_of(np.array(held, np.int64), vector)
        return None, held[int(np.argmax(scores))]  # argmax: the first (lowest row) of a tie

    def note(self, why: str, best: Placed | None) -> str:
        """What a failure's status means for this query."""
        if why == NOT_HELD:
            return "no relevant item of this query is in the collection"
        if why == BEYOND_TOP and best is not None:
            return f"its best relevant item ranks {best[0]}, beyond the top {self.top} evaluated"
        if why == NOT_RETRIEVED:
            if self.from_run:
                return (
                    "the run does not list this relevant item: not retrieved (its q ⊙ d by "
                    "the query encoder shown)"
                )
            return "its relevant items score 0 (no shared term with the query): not retrieved"
        return ""

    def failure(
        self,
        q: str,
        text: str,
        vector: np.ndarray,
        pairs: Sequence[tuple[str, float]],
        relevant: set[str],
        best: Placed | None,
    ) -> Failure:
        """The failure of one query whose first relevant item is not first, explained (its
        ``relevant_status`` is the explained relevant item's)."""
        ix, row_of = self.index, self.row_of
        words = text_words(text)
        why = status(None, best, len(pairs))
        nonrelevant = next(
            (
                (i + 1, row_of[d])
                for i, (d, _) in enumerate(pairs)
                if d not in relevant and d in row_of
            ),
            None,
        )
        rows = [x[1] for x in (nonrelevant, best) if x]
        metas = dict(zip(rows, ix.meta(rows), strict=True))
        non_exp = rel_exp = None
        raw_n: list[dict] = []
        raw_r: list[dict] = []
        if nonrelevant is not None:
            rank, row = nonrelevant
            non_exp, raw_n = explain_item(vector, row, rank, False, ix, words, metas[row])
        if best is not None:
            rel_exp, raw_r = explain_item(vector, best[1], best[0], True, ix, words, metas[best[1]])
        gap = split = None
        if non_exp is not None and rel_exp is not None:
            gap = non_exp.score - rel_exp.score
            evidence = words | item_words(metas[nonrelevant[1]]) | item_words(metas[best[1]])
            split = gap_words(raw_n, raw_r, ix.vocab, evidence, query_terms(text, ix.vocab))
        missing = missing_words(text, metas[best[1]]) if best is not None else []
        return Failure(
            query_id=q,
            query=text,
            first_relevant_rank=first_relevant(pairs, relevant),
            nonrelevant=non_exp,
            relevant=rel_exp,
            gap=gap,
            decisive=split.decisive if split else [],
            note=self.note(why, best),
            relevant_status=why,
            favour_nonrelevant=split.favour_nonrelevant if split else None,
            favour_relevant=split.favour_relevant if split else None,
            query_delta=split.query_delta if split else None,
            expansion_delta=split.expansion_delta if split else None,
            causes=causes(why, missing, gap, split),
            query_length=query_length(text),
            missing_words=missing,
            pushing_words=split.pushing if split else [],
        )

    def mismatch(self, terms: list[Term], row: int) -> list[str]:
        """The query's top words (``terms``) that its relevant item lacks entirely (lexical
        mismatch)."""
        cols, _ = self.index.row(row)
        present = {int(c) for c in cols}
        return [t.token for t in terms if not set(t.columns) & present]
