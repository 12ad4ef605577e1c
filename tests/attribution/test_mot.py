"""The MoT masking evaluation: protocol choices, statistics and outputs (analytic toy encoder)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lexlens.models import InputError
from tests.attribution.test_attr_toy import ToyEncoder
from tests.helpers import close_to

CORPUS = [
    "the red fox runs across the green field , quickly !",
    "a fox and a hound meet at dawn ; the hound barks .",
    "stock markets fell on monday after the bank report",
    "the quick brown fox jumps over the lazy dog",
    "markets rallied after the news of the merger",
    "a hound sleeps by the warm fire in winter",
    "rain falls on the old garden outside the window",
    "the chef cooks rice , beans and fresh bread",
]


@pytest.fixture(scope="module")
def toy():
    return ToyEncoder(m=4, k=2, dim=8)


@pytest.fixture(scope="module")
def result(toy):
    from lexlens.analysis.attribution.mot import mot_evaluate

    return mot_evaluate(toy, CORPUS, m_values=(2, 4), k=4, steps=3, limit=6, seed=1)


def test_table_statistics_and_outputs(result):
    from scipy.stats import false_discovery_control, wilcoxon

    from lexlens.analysis.attribution.mot_rankings import RANKINGS, REFERENCE_ROWS

    table = result.table
    assert list(table.index) == list(RANKINGS) + list(REFERENCE_ROWS)
    assert list(table.columns) == [2, 4]
    assert np.isfinite(table.to_numpy()).all() and (table.to_numpy() >= 0).all()
    assert result.settings["n_docs"] == 6 and result.settings["k"] == {"2": 4, "4": 4}
    for m in (2, 4):
        np.testing.assert_allclose(table[m], result.per_doc[m].mean())
    sig = result.significance
    assert len(sig) == 2 * 8 and set(sig["baseline"]) == set(RANKINGS) - {"MoT"}
    row = sig[(sig.m == 4) & (sig.baseline == "Head")].iloc[0]
    frame = result.per_doc[4]
    assert row.wilcoxon_p == pytest.approx(wilcoxon(frame["MoT"], frame["Head"]).pvalue)
    # q-values: Benjamini–Hochberg over all 16 comparisons, never below the p-value.
    np.testing.assert_allclose(sig["wilcoxon_q"], false_discovery_control(sig["wilcoxon_p"]))
    assert (sig["wilcoxon_q"] >= sig["wilcoxon_p"] - 1e-15).all()
    # Deltas at the steps used, one per document × sub-vector, and what completeness says.
    assert result.deltas[4].shape == (6, 4) and (result.steps[4] == 3).all()
    conv = result.convergence()
    assert list(conv["m"]) == [2, 4] and (conv["relative_delta_max"] < 1e-3).all()
    payload = result.to_dict()
    assert payload["table"]["4"]["MoT"] == pytest.approx(table.loc["MoT", 4])
    assert len(payload["per_m"]["4"]["delta"]) == 6


def test_pairwise_orderings_between_all_rankings(result):
    from scipy.stats import false_discovery_control, wilcoxon

    from lexlens.analysis.attribution.mot_stats import pairwise

    pairs = pairwise(result.per_doc)
    assert len(pairs) == 2 * 36  # 9 rankings: 36 pairs per M
    assert (pairs["mean_lower"] <= pairs["mean_higher"]).all()
    pair = ["Head", "Tail"]
    row = pairs[(pairs.m == 4) & pairs.lower.isin(pair) & pairs.higher.isin(pair)].iloc[0]
    frame = result.per_doc[4]
    diff = frame[row.lower] - frame[row.higher]
    assert row.wilcoxon_p == pytest.approx(wilcoxon(diff).pvalue)
    assert row.lower_share == pytest.approx((diff < 0).mean())
    np.testing.assert_allclose(pairs["wilcoxon_q"], false_discovery_control(pairs["wilcoxon_p"]))
    assert len(result.to_dict()["pairwise"]) == 72


def test_punctuation_is_never_kept_and_stop_words_are_candidates():
    from lexlens.analysis.attribution.mot_rankings import (
        candidates,
        idf_table,
        keep_count,
        ranking_sets,
    )

    words = ["the", ",", "cat", "!", "the", "sat", "-", "the", "mat", "."]
    cand = candidates(words)
    assert cand == [0, 2, 4, 5, 7, 8]
    idf = idf_table([words, ["a", "cat"]])
    assert "," not in idf and idf["cat"] == 0.0 and idf["the"] == pytest.approx(np.log(2))
    rng = np.random.default_rng(0)
    glob = np.array([0.0, 9.0, 1.0, 9.0, 0.0, 2.0, 9.0, 0.0, 3.0, 9.0])
    shared, mot = ranking_sets(words, glob[None], glob, idf, 0.5, rng)
    k = keep_count(len(cand), 0.5)
    assert k == 3
    for name, kept in shared.items():
        if not name.startswith("("):
            assert len(kept) == k and kept <= set(cand), name
    assert shared["TF"] == {0, 4, 7}  # "the" (3 times) tops TF: stop words stay candidates
    assert shared["GlobalT"] == mot[0] == {2, 5, 8}  # punctuation scored 9 yet never kept
    assert shared["Head"] == {0, 2, 4} and shared["Tail"] == {5, 7, 8}
    assert keep_count(10, 0.05) == 1 and keep_count(30, 0.05) == 2 and keep_count(50, 0.05) == 3
    assert keep_count(0, 0.05) == 0 and keep_count(3, 1.0) == 3


def test_masked_errors_match_an_independent_computation(toy, result):
    from lexlens.analysis.attribution.mot_rankings import candidates, keep_count
    from lexlens.analysis.core.words import group_word_pieces
    from lexlens.models.pq import ProductQuantizer

    m = 4
    pq = ProductQuantizer.fit(toy.embed_texts(CORPUS), m, 4, seed=1)
    frame = result.per_doc[m]
    doc = int(frame.index[0])
    text = CORPUS[doc]
    dhat = pq.decode(pq.encode(toy.embed_texts([text])))[0]

    def err(t: str):
        """The mean squared error over the sub-vectors, within the tolerance of the terms of
        f² − 2 f d̂ + d̂² (each ÷ M: a mean)."""
        f = pq.split(toy.embed_texts([t]))[0]
        squares = (np.abs(f) + np.abs(dhat)) ** 2 / m
        return close_to(float(((f - dhat) ** 2).sum(-1).mean()), terms=squares)

    words, groups = group_word_pieces(toy.tokenizer.tokenize(text))
    cand = candidates(words)
    head = set(cand[: keep_count(len(cand), 0.05)])
    masked = [w if j in head else " ".join(["[UNK]"] * len(groups[j])) for j, w in enumerate(words)]
    every = " ".join("[UNK]" for g in groups for _ in g)
    assert frame.loc[doc, "(none masked)"] == err(text)
    assert frame.loc[doc, "(all masked)"] == err(every)
    assert frame.loc[doc, "Head"] == err(" ".join(masked))


def test_masking_helpers():
    from lexlens.analysis.attribution.mot_rankings import masked_ids

    ids, groups = [101, 7, 8, 9, 102], [[1, 2], [3]]
    assert masked_ids(ids, groups, frozenset({1}), 100) == [101, 100, 100, 9, 102]
    assert masked_ids(ids, groups, frozenset({0}), None) == [101, 7, 8, 102]


def test_reused_attributions_equal_fresh_ones(toy):
    from lexlens.analysis.attribution.ig import attribute_texts
    from lexlens.analysis.attribution.mot import mot_evaluate

    texts = CORPUS[:4]
    attrs = attribute_texts(toy, texts, steps=2)
    reused = mot_evaluate(toy, texts, attributions=attrs, seed=2)
    fresh = mot_evaluate(toy, texts, own_codebook=True, steps=2, seed=2)
    assert list(reused.table.columns) == [4] and reused.settings["codebook"] == "encoder's own"
    np.testing.assert_allclose(reused.table.to_numpy(), fresh.table.to_numpy(), rtol=1e-6)
    with pytest.raises(InputError, match="every corpus text"):
        mot_evaluate(toy, texts, attributions=attrs[:2])


def test_display_tables_match_the_report():
    from lexlens.analysis.attribution.display import display_tables, format_p
    from lexlens.analysis.attribution.mot_result import MotResult

    assert format_p(3.0e-15) == "3.0e-15" and format_p(0.3412) == "0.341"
    table = pd.DataFrame({24: [1.0, 2.0]}, index=pd.Index(["MoT", "Head"], name="ranking"))
    rows = [
        {"m": 24, "baseline": b, "mot_lower_share": 0.9, "wilcoxon_p": 3e-15, "wilcoxon_q": 4e-15}
        for b in ("Tail", "Rand", "Head", "IDF", "TF", "TF-IDF", "RandT", "GlobalT")
    ]
    res = MotResult("x", table, pd.DataFrame(rows), {}, {}, {}, {})
    shown, tests = display_tables(res)
    assert list(shown.columns) == ["ranking", "M=24"] and list(shown["ranking"]) == ["MoT", "Head"]
    assert list(tests.columns) == ["baseline", "M=24 p", "M=24 q (FDR)", "M=24 MoT lower"]
    assert tests.iloc[0].tolist() == ["Tail", "3.0e-15", "4.0e-15", "90%"]


def test_bad_input_fails_before_any_model_runs(toy):
    """A corpus of one text, or of texts without a word to keep, is refused (every wrong
    option of ``mot_evaluate`` is refused in tests/attribution/test_api_checks.py)."""
    from lexlens.analysis.attribution.mot import mot_evaluate

    with pytest.raises(InputError, match="at least two"):
        mot_evaluate(toy, CORPUS[:1])
    with pytest.raises(InputError, match="word"):
        mot_evaluate(toy, ["!!", "?? ..", "a cat"], m_values=(4,), k=2)


def test_silent_wrong_mot_batch_size_reaches_the_corpus_embedding():
    """MotOptions.batch_size is the number of texts embedded at once to fit the codebooks
    (and IG's nodes per forward pass); it is passed on, not dropped."""
    from lexlens.analysis.attribution.mot import mot_evaluate

    class Spy(ToyEncoder):
        def embed_texts(self, texts, *, batch_size=None, progress=None):
            self.batch_sizes.append(batch_size)
            return super().embed_texts(texts, batch_size=batch_size, progress=progress)

    spy = Spy(m=4, k=2, dim=8)
    spy.batch_sizes = []
    given = mot_evaluate(spy, CORPUS[:4], m_values=(4,), k=2, steps=3, batch_size=3)
    assert spy.batch_sizes == [3]
    spy.batch_sizes = []
    default = mot_evaluate(spy, CORPUS[:4], m_values=(4,), k=2, steps=3)
    assert spy.batch_sizes == [None]  # None: the encoder's own batch
    np.testing.assert_allclose(given.table.to_numpy(), default.table.to_numpy(), rtol=1e-6)


def test_silent_wrong_mot_says_when_short_texts_keep_a_single_word(toy):
    """At keep 5 % every text of fewer than 30 words keeps one word: the result says how many,
    and names the rankings whose rows coincide (equal errors in every document)."""
    import re

    from lexlens.analysis.attribution.mot import mot_evaluate
    from lexlens.analysis.attribution.mot_rankings import RANKINGS

    # every word once in its text (TF = 1), so TF-IDF ranks as IDF does
    corpus = [CORPUS[0], "one fox and a hound meet at dawn ; it barks .", *CORPUS[2:]]
    result = mot_evaluate(toy, corpus, m_values=(4,), k=4, steps=3, seed=1, keep=0.05)
    words = [[w for w in t.split() if re.search(r"[^\W_]", w)] for t in corpus]
    assert all(len(w) < 30 for w in words)  # so floor(0.05 · n + 0.5) ≤ 1: one word kept
    n = result.settings["n_docs"]
    assert result.settings["single_word_docs"] == n == len(corpus)
    assert any(f"{n} texts of {n} keep a single word" in note for note in result.notes)
    errors = result.per_doc[4]
    equal = [
        (a, b)
        for i, a in enumerate(RANKINGS)
        for b in RANKINGS[i + 1 :]
        if np.array_equal(errors[a].to_numpy(), errors[b].to_numpy())
    ]
    assert ("IDF", "TF-IDF") in equal, equal  # the walk's case: one kept word, TF = 1
    for a, b in equal:
        assert any(f"M=4: {a} and {b} keep the same words" in note for note in result.notes)
    named = [note for note in result.notes if "keep the same words" in note]
    assert len(named) == len(equal)
    longer = mot_evaluate(toy, corpus, m_values=(4,), k=4, steps=3, seed=1, keep=0.5)
    assert longer.settings["single_word_docs"] == 0
    assert not any("single word" in note for note in longer.notes)
