"""The Text page's merged terms read as the input's words: a word made of pieces is one the
text spells, and a continuation piece of exactly one of the text's words is shown as that
word ("##keeper" of "beekeeper"), checked on the packaged ImageNet BEIR texts against the
tokenizer's own split of each word of the text."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest

from lexlens.analysis.core.samples import sample_path


def _texts(n: int) -> list[str]:
    path = sample_path("benchmarks/imagenet_beir/corpus.jsonl")
    docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:n]]
    return [f"{d['title']} {d['text']}" for d in docs]


@pytest.fixture(scope="module")
def merged(splade):
    from lexlens.analysis.lexical.terms import encode_text, terms_of_encoding

    out = []
    for text in _texts(40):
        result = terms_of_encoding(splade, encode_text(splade, text), top=60)
        out.append((text, result.merged_terms))
    return out


def _pieces_by_word(tokenizer, text: str) -> dict[str, set[str]]:
    """Each continuation piece → the words of ``text`` whose tokenization holds it."""
    owners: dict[str, set[str]] = defaultdict(set)
    for word in set(re.findall(r"[^\W_]+", text.casefold())):
        for piece in tokenizer.tokenize(word):
            if piece.startswith("##"):
                owners[piece].add(word)
    return owners


def test_silent_wrong_merged_words_are_the_texts_own(splade, merged):
    vocab = set(splade.vocab)
    for text, rows in merged:
        folded = text.casefold()
        for row in rows:
            word = row["token"]
            if word not in vocab:
                assert re.search(rf"(?<![^\W_]){re.escape(word)}(?![^\W_])", folded), word


def test_silent_wrong_a_piece_of_one_input_word_is_shown_as_that_word(splade, merged):
    raw = []
    for text, rows in merged:
        owners = _pieces_by_word(splade.tokenizer, text)
        raw += [(r["token"], owners[r["token"]]) for r in rows if len(owners[r["token"]]) == 1]
    assert raw == []


def test_silent_wrong_a_lone_piece_names_its_word_only_when_one_word_spells_it(splade):
    from lexlens.analysis.core.words import Term, merge_word_pieces

    vocab = splade.vocab
    col = {t: vocab.index(t) for t in ("honey", "##keeper")}
    terms = [Term("honey", 0.9, col["honey"]), Term("##keeper", 0.5, col["##keeper"])]
    one = merge_word_pieces(terms, vocab, {"beekeeper", "honey"})  # bee ##keeper
    assert [(t.token, t.weight) for t in one] == [("honey", 0.9), ("beekeeper", 0.5)]
    two = merge_word_pieces(terms, vocab, {"beekeeper", "zookeeper"})
    assert [t.token for t in two] == ["honey", "##keeper"]  # which one? shown as it is
    collection = merge_word_pieces(terms, vocab, {"beekeeper"}, lone_pieces=False)
    assert [t.token for t in collection] == ["honey", "##keeper"]
