"""The text-level search's "none" checked by an independent brute force: on a benchmark
built here (queries made of words of a relevant item and of another item), every failure
the search says has *none exists* is searched by this test over the whole edit space —
every set of query words deleted (one kept) with every ordered sequence of distinct
insertable words appended, up to 3 edits — each edited text encoded by the encoder
directly and every item ranked with plain numpy: no candidate may rank the target first.
A fix reported as the shortest has no success with fewer edits; for *none found*, the
space's size is this test's own count. The bench (``bench/counterfactual_space.py``) runs
the same check on a larger benchmark (≥ 500 queries, ≥ 300 failures)."""

from __future__ import annotations

import itertools
import json
import math
import random
import re

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.core.gating import gate
from lexlens.analysis.counterfactual.counterfactual import counterfactual
from lexlens.analysis.counterfactual.evaluation import failures_counterfactuals
from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
from lexlens.models.label_map import STOP_WORDS
from tests.helpers import ROOT

BEIR = ROOT / "data" / "benchmarks" / "imagenet_beir"
GATE_K = 768
#: A candidate within this share of the target's score of ranking first is re-encoded alone
#: (a batch's padding moves float32 activations by about 1e-7 of their size).
NEAR = 1e-4
PUNCTUATION = ".,;:!?\"'()"


def _content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]+", text.lower()) if w not in STOP_WORDS and len(w) > 2]


def built_benchmark(count: int, seed: int) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Queries of 1–3 words of one item's text (its relevant item) and 1–2 words of other
    items' texts, shuffled; seeded."""
    docs = [json.loads(line) for line in (BEIR / "corpus.jsonl").open()]
    rng = random.Random(seed)
    queries, qrels = {}, {}
    for n in range(count):
        doc = rng.choice(docs)
        own = list(dict.fromkeys(_content_words(doc["text"])))
        words = rng.sample(own, min(rng.randint(1, 3), len(own)))
        for _ in range(rng.randint(1, 2)):
            words.append(rng.choice(_content_words(rng.choice(docs)["text"])))
        words = list(dict.fromkeys(words))
        rng.shuffle(words)
        queries[f"b{n}"] = " ".join(words)
        qrels[f"b{n}"] = {doc["_id"]: 1}
    return queries, qrels


class BruteForce:
    """The edit space of one failure, enumerated and ranked by this test alone."""

    def __init__(self, encoder, dense: np.ndarray, gate_k: int = GATE_K) -> None:
        self.encoder, self.dense, self.gate_k = encoder, dense, gate_k

    def _vectors(self, texts: list[str], side: str) -> list[np.ndarray]:
        encs = self.encoder.encode_texts(texts, side=side, keep_units=False)
        return [gate(e, self.encoder.vocab, self.gate_k).astype(np.float64) for e in encs]

    @staticmethod
    def insertable(query: str, document: str) -> list[str]:
        have = {w.strip(PUNCTUATION).lower() for w in document.split()}
        out: list[str] = []
        for w in query.split():
            key = w.strip(PUNCTUATION).lower()
            if key and key not in STOP_WORDS and key not in have and key not in out:
                out.append(key)
        return out

    @staticmethod
    def candidates(n: int, words: list[str], most: int):
        for size in range(1, most + 1):
            for d in range(0, min(size, n - 1) + 1):
                for deleted in itertools.combinations(range(n), d):
                    for inserted in itertools.permutations(words, size - d):
                        yield size, frozenset(deleted), inserted

    @staticmethod
    def first(scores: np.ndarray, row: int, own: float) -> tuple[bool, float]:
        """Whether ``row`` scoring ``own`` ranks first (ties by row, > 0), and the lead of
        the best other item."""
        others = scores.copy()
        others[row] = -np.inf
        best = int(np.argmax(others))
        lead = float(others[best]) - own
        return own > 0 and (lead < 0 or (lead == 0 and best > row)), lead

    def successes(self, query: str, row: int, document: str, most: int, sizes=None):
        """Every candidate ranking the target first once encoded alone: (size, deleted,
        inserted); ``sizes``: only candidates of those sizes."""
        words = query.split()
        todo = [c for c in self.candidates(len(words), self.insertable(query, document), most)]
        todo = [c for c in todo if sizes is None or c[0] in sizes]
        q_texts = sorted({" ".join(w for j, w in enumerate(words) if j not in c[1]) for c in todo})
        d_texts = sorted({" ".join([document, *c[2]]) for c in todo if c[2]})
        qv = dict(zip(q_texts, self._vectors(q_texts, "query"), strict=True)) if q_texts else {}
        dv = dict(zip(d_texts, self._vectors(d_texts, "document"), strict=True)) if d_texts else {}
        scores = {t: self.dense @ v for t, v in qv.items()}
        found = []
        for size, deleted, inserted in todo:
            q_text = " ".join(w for j, w in enumerate(words) if j not in deleted)
            d_text = " ".join([document, *inserted]) if inserted else None
            own = float(scores[q_text][row]) if d_text is None else float(qv[q_text] @ dv[d_text])
            first, lead = self.first(scores[q_text], row, own)
            if first or lead <= NEAR * abs(own):  # decided by its encodings alone
                q = self._vectors([q_text], "query")[0]
                alone = self.dense @ q
                own = (
                    float(alone[row])
                    if d_text is None
                    else float(q @ self._vectors([d_text], "document")[0])
                )
                first, _ = self.first(alone, row, own)
            if first:
                found.append((size, deleted, inserted))
        return found

    @staticmethod
    def space_size(n: int, v: int, most: int) -> int:
        return sum(
            math.comb(n, d) * math.perm(v, size - d)
            for size in range(1, most + 1)
            for d in range(0, min(size, n - 1) + 1)
            if size - d <= v
        )


def check_failures(index, encoder, rows, most: int = 3) -> dict:
    """Every row's claim checked by the brute force: counts of the kinds and disagreements."""
    dense = index.rows(0, len(index)).toarray().astype(np.float64)
    brute = BruteForce(encoder, dense, index.gate_k)
    ids = [str(i) for i in index.column("id")]
    out = {"none exists": 0, "none found": 0, "found": 0, "disagreements": [], "checked": 0}
    for r in rows:
        t = r.text
        row = ids.index(r.target)
        document = str(index.meta([row])[0]["text"])
        words = brute.insertable(r.query, document)
        excluded = {e["word"].strip(PUNCTUATION).lower() for e in t.excluded}
        offered = [w.strip(PUNCTUATION).lower() for w in r.query.split()]
        assert set(words) == set(offered) - excluded, (r.query, t.excluded)
        size = brute.space_size(len(r.query.split()), len(words), most)
        assert t.space == size, (r.query, t.space, size)
        out[t.search] += 1
        if t.search == "none exists":
            assert t.searched == t.space and not t.found
            found = brute.successes(r.query, row, document, most)
            out["checked"] += 1
            if found:
                out["disagreements"].append((r.query, r.target, found[:3]))
        elif t.search == "none found":
            assert 0 < t.searched < t.space and not t.exhaustive and not t.found
        else:
            assert t.found and t.rank_after == 1
            if t.shortest and len(t.edits) > 1:
                shorter = brute.successes(
                    r.query, row, document, len(t.edits) - 1, set(range(1, len(t.edits)))
                )
                out["checked"] += 1
                if shorter:
                    out["disagreements"].append((r.query, r.target, shorter[:3]))
    return out


@pytest.fixture(scope="module")
def index(tmp_path_factory, splade):
    folder = tmp_path_factory.mktemp("space")
    build_index(splade, BEIR, folder / "ix")
    return open_index(folder / "ix")


def test_silent_wrong_none_exists_agrees_with_a_brute_force_over_the_edit_space(index, splade):
    queries, qrels = built_benchmark(40, seed=11)
    evaluation = evaluate_benchmark(index, queries=queries, qrels=qrels, query_encoder=splade)
    found = failures_counterfactuals(index, evaluation, query_encoder=splade)
    assert found.summary.tried >= 15
    checked = check_failures(index, splade, found.failures)
    assert checked["none exists"] >= 3 and checked["found"] >= 3, checked
    assert checked["disagreements"] == [], checked["disagreements"]
    s = found.summary
    assert s.none_exists == checked["none exists"] and s.found == checked["found"]
    assert s.flip_rate == s.found / s.tried
    assert s.flip_rate_upper == (s.found + s.none_found) / s.tried
    assert sum(s.by_side.values()) == s.found


def test_silent_wrong_insertions_are_ordered_and_a_small_budget_says_none_found(index, splade):
    """Two orders of two inserted words are two candidates; with a budget too small for the
    space the answer says how many of how many candidates it searched."""
    ids = [str(i) for i in index.column("id")]
    document = str(index.meta([0])[0]["text"])
    query = "bright wooden spoon kettle marble"
    result = counterfactual(
        index, query, ids[0], query_encoder=splade, side="document", max_edits=2, max_calls=3
    ).counterfactual
    words = BruteForce.insertable(query, document)
    assert result.space == len(words) + len(words) * (len(words) - 1)  # ordered pairs
    if not result.found:
        assert result.search == "none found" and 0 < result.searched < result.space
        assert any(n.startswith("none found: searched") for n in result.notes)


def test_silent_wrong_candidate_words_are_whole_words_a_person_would_insert(index, splade):
    """No punctuation-broken piece, no stop word (unless asked), no word the item holds;
    each left-out word listed with why."""
    ids = [str(i) for i in index.column("id")]
    document = str(index.meta([0])[0]["text"])
    held = document.split()[3].strip(PUNCTUATION)
    query = f"thread(s an {held} marble"
    answer = counterfactual(index, query, ids[0], query_encoder=splade, side="document")
    why = {e["word"]: e["why"] for e in answer.counterfactual.excluded}
    assert why["thread(s"] == "a piece broken by punctuation"
    assert why["an"].startswith("a stop word")
    assert why[held] == "already in the document"
    inserted = {e["word"] for e in answer.counterfactual.edits if e["op"] == "insert"}
    assert inserted <= {"marble"}
    allowed = counterfactual(
        index, query, ids[0], query_encoder=splade, side="document", allow_stop_words=True
    )
    assert "an" not in {e["word"] for e in allowed.counterfactual.excluded}


def test_silent_wrong_a_fix_only_one_order_of_insertions_makes_is_found(index, splade):
    """A failure of the built benchmark whose only fixes within 3 edits insert two words in
    one order (found by the brute force): the search finds a 3-edit fix, and the brute force
    agrees that no shorter one exists and that the reverse order fails."""
    query, target = "head muscular sized", "c57"
    ids = [str(i) for i in index.column("id")]
    row = ids.index(target)
    document = str(index.meta([row])[0]["text"])
    answer = counterfactual(index, query, target, query_encoder=splade).counterfactual
    assert answer.found and answer.shortest and len(answer.edits) == 3, answer.to_dict()
    dense = index.rows(0, len(index)).toarray().astype(np.float64)
    brute = BruteForce(splade, dense, index.gate_k)
    fixes = brute.successes(query, row, document, 3)
    assert fixes and min(size for size, _, _ in fixes) == 3
    inserted = tuple(e["word"] for e in answer.edits if e["op"] == "insert")
    deleted = frozenset(
        j
        for j, w in enumerate(query.split())
        for e in answer.edits
        if e["op"] == "delete" and e["word"] == w
    )
    assert (3, deleted, inserted) in fixes
    if len(inserted) == 2:
        assert (3, deleted, inserted[::-1]) not in fixes  # the other order does not rank first
