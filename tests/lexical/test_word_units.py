"""The one notion of an input word, shared by the faithfulness checks and the counterfactual
search: the words typed between spaces, each holding the tokens of its characters, and the
query terms each produced (the max-pool winners), checked against the tokenizer run on each
word alone and a numpy argmax."""

from __future__ import annotations

import numpy as np

from lexlens.analysis.collections.memory import encode_collection
from lexlens.analysis.core.gating import gate
from lexlens.analysis.counterfactual.counterfactual import counterfactual
from lexlens.analysis.lexical.word_units import text_words, word_terms

TEXT = "Owl-like bird's  huge, colourful beak!  naïve 42"


def _units_per_word(splade, words: list[str]) -> list[int]:
    """How many tokens each word makes alone (WordPiece splits on spaces first, so a word's
    tokens in the text are its tokens alone)."""
    return [len(splade.tokenizer.tokenize(w)) for w in words]


def test_silent_wrong_input_words_are_the_typed_words_holding_their_own_tokens(splade):
    enc = splade.encode_texts([TEXT], keep_units=True)[0]
    words = text_words(splade, TEXT, enc.units)
    assert words.words == TEXT.split()
    held = [len(words.units_of(j)) for j in range(len(words.words))]
    assert held == _units_per_word(splade, words.words)
    # units in text order: each word's tokens follow the previous word's
    order = [w for w in words.unit_word if w is not None]
    assert order == sorted(order)
    assert words.unit_word[0] is None and words.unit_word[-1] is None  # [CLS], [SEP]
    assert words.deletable == [0, 1, 2, 3, 4, 5, 6]
    assert words.without([0, 3]) == "bird's huge, beak! naïve 42"


def test_silent_wrong_each_words_terms_are_the_max_pool_winners_of_its_tokens(splade):
    enc = splade.encode_texts([TEXT], keep_units=True)[0]
    q = gate(enc, splade.vocab, 768)
    words = text_words(splade, TEXT, enc.units)
    found = word_terms(words, enc, q)
    # by hand: the word of each token from the per-word token counts, then an argmax
    counts = _units_per_word(splade, TEXT.split())
    word_of = [None] + [j for j, c in enumerate(counts) for _ in range(c)] + [None]
    expected: list[set[int]] = [set() for _ in counts]
    for term in np.flatnonzero(q):
        winner = int(np.argmax(enc.unit_weights[:, term]))
        if word_of[winner] is not None:
            expected[word_of[winner]].add(int(term))
    assert found == expected
    assert sum(len(s) for s in found) > 10


def test_silent_wrong_counterfactual_deletes_the_same_words(splade):
    """The counterfactual's query edits delete the shared input words (the edited query is
    the other typed words, punctuation kept with its word)."""
    texts = ["a huge colourful beak of a toucan", "a huge owl-like bird, sleeping", "a red cup"]
    collection = encode_collection(splade, texts, ids=["a", "b", "c"])
    result = counterfactual(
        collection,
        "huge owl-like bird, beak",
        "a",
        query_encoder=splade,
        side="query",
        max_calls=30,
    )
    answer = result.counterfactual
    kept = ["huge", "owl-like", "bird,", "beak"]
    for edit in answer.edits:
        kept.remove(edit["word"])
    assert answer.edited_query == " ".join(kept)
