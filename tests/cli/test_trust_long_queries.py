"""A query longer than the encoder's token limit is cut; every command that encodes one says so
in its notes (the JSON document's too), naming the query and how many of its tokens were kept
out of how many — as ``terms`` says it of a text.

References: the kept count by hand (the limit less [CLS] and [SEP]); the total from
transformers' tokenizer of the encoder's own folder on the whole text at once (no pieces)."""

from __future__ import annotations

import pytest

#: 10,002 words: far beyond splade-tiny's 512 tokens.
LONG = " ".join(["rocket"] + [f"w{i % 300}" for i in range(10_001)])


@pytest.fixture(scope="module")
def expected(splade) -> str:
    """What the notice says of a long query: kept and total counted independently."""
    whole = splade.tokenizer.transformers_tokenizer()(LONG, add_special_tokens=False)
    total = len(whole["input_ids"])
    kept = splade.max_length - 2  # [CLS] and [SEP] take two of the window
    assert total > 20_000
    return f"truncated to the encoder's limit of 512 tokens: {kept:,} of its {total:,} tokens kept"


def _named(notes: list[str], name: str, expected: str) -> list[str]:
    return [n for n in notes if n.startswith(name) and n.endswith(expected)]


def test_silent_wrong_search_names_a_long_query_and_the_tokens_kept(
    cli, three_texts_index, expected
):
    run = cli("search", "--index", three_texts_index, "--query", LONG, "--json")
    assert run.returncode == 0, run.stderr
    assert _named(run.json()["notes"], "query 'rocket w0 w1 w2 w3 w4 …' ", expected)
    short = cli("search", "--index", three_texts_index, "--query", "rocket", "--json")
    assert not [n for n in short.json()["notes"] if "truncated" in n]


def test_silent_wrong_evaluate_names_each_long_query_and_the_tokens_kept(
    cli, three_texts_index, expected, tmp_path
):
    queries = tmp_path / "queries.tsv"
    qrels = tmp_path / "qrels.trec"
    ids = [f"long{i}" for i in range(12)]
    queries.write_text("".join(f"{q}\t{LONG}\n" for q in ids) + "short\ta rocket\n")
    qrels.write_text("".join(f"{q} 0 d3 1\n" for q in [*ids, "short"]))
    files = ["--queries", queries, "--qrels", qrels]
    run = cli("evaluate", "--index", three_texts_index, *files, "--json")
    assert run.returncode == 0, run.stderr
    notes = run.json()["notes"]
    for q in ids[:10]:
        assert len(_named(notes, f"query {q} ", expected)) == 1, notes
    assert "2 more queries truncated to the encoder's limit likewise" in notes
    assert not [n for n in notes if n.startswith("query short")]


def test_silent_wrong_counterfactual_names_a_long_query_and_the_tokens_kept(
    cli, three_texts_index, expected
):
    budget = ["--max-edits", "1", "--max-calls", "5"]
    run = cli(
        "counterfactual",
        "--index",
        three_texts_index,
        "--query",
        LONG,
        "--target",
        "d2",
        *budget,
        "--json",
    )
    assert run.returncode == 0, run.stderr
    assert _named(run.json()["notes"], "query 'rocket w0 w1 w2 w3 w4 …' ", expected)


def test_silent_wrong_tokens_counted_in_pieces_are_the_whole_texts(splade):
    from lexlens.models.text_io import MAX_CHARS, count_tokens, load_bert_tokenizer

    text = "\n".join(
        [LONG, "x" * (3 * MAX_CHARS), "tab\tseparated\u3000words, punctuation!", LONG[:MAX_CHARS]]
    )
    assert len(text) > 4 * MAX_CHARS  # counted in several pieces
    transformers = load_bert_tokenizer()
    for counted, reference in (
        (splade.tokenizer, splade.tokenizer.transformers_tokenizer()),  # tokenizers' pipeline
        (transformers, transformers),  # transformers' own tokenizer, piece by piece
    ):
        whole = len(reference(text, add_special_tokens=False)["input_ids"])
        assert count_tokens(counted, text) == whole
