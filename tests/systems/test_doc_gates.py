"""Document gates and efficiency in a comparison, on real splade-tiny indexes: a system at
``doc_gate_k`` ranks a collection equal to one indexed at that gate (vectors, rankings and
measures), a k above the stored gate is refused in one line, and each system's FLOPs,
postings per query and index bytes equal a brute force over every query–item pair and the
files on disk."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.evaluation.evaluate import evaluate
from lexlens.analysis.retrieval.queries import QuerySpec, query_encoder_for
from lexlens.analysis.systems.comparison import evaluate_systems
from lexlens.analysis.systems.systems import (
    LEXLENS,
    System,
    SystemsSpec,
    system_collection,
    systems_of,
)
from lexlens.app.cli import build_parser
from lexlens.models.base import InputError
from tests.systems.test_comparison import QRELS, QUERIES, TEXTS

#: The stored gate and the smaller gates re-gated from it.
STORED = 24
SMALLER = (6, 1, 0)
VECTOR_FILES = ("indptr.npy", "indices.npy", "data.npy", "norms.npy")


@pytest.fixture(scope="module")
def indexes(tmp_path_factory, splade):
    """The texts indexed at the stored gate and, for reference, at each smaller one."""
    folder = tmp_path_factory.mktemp("docgates")
    source = folder / "items.csv"
    source.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in TEXTS.items()))
    built = {}
    for k in (STORED, *SMALLER):
        build_index(splade, source, folder / f"ix{k}", gate_k=k)
        built[k] = folder / f"ix{k}"
    return built


@pytest.mark.parametrize("k", SMALLER)
def test_silent_wrong_a_regated_collection_equals_indexing_at_that_gate(indexes, k):
    stored = str(indexes[STORED])
    system = System(f"doc {k}", LEXLENS, stored, 768, doc_gate_k=k)
    regated = system_collection(system, {})
    reindexed = open_index(indexes[k])
    a, b = regated.matrix(), reindexed.matrix()
    assert regated.gate_k == reindexed.gate_k == k
    assert np.array_equal(a.indptr, b.indptr)
    assert np.array_equal(a.indices, b.indices)
    assert np.array_equal(a.data, b.data)  # the same weights, not re-encoded: bit for bit
    assert np.array_equal(regated.norms, reindexed.norms)
    # and the same ranking and measures as evaluating the re-indexed collection
    first = evaluate(regated, QUERIES, QRELS)
    second = evaluate(reindexed, QUERIES, QRELS)
    assert first.run == second.run
    assert first.metrics["per_query"] == second.metrics["per_query"]


def test_silent_wrong_a_doc_gate_above_the_stored_one_is_refused_in_one_line(indexes):
    spec = SystemsSpec([indexes[6]], doc_gate_ks=[6, 24])
    with pytest.raises(InputError) as refused:
        systems_of(spec, 768)
    message = str(refused.value)
    assert "\n" not in message
    assert "k = 6" in message and "not at 24" in message
    with pytest.raises(InputError, match="doc gate k must be"):
        systems_of(SystemsSpec([indexes[6]], doc_gate_ks=[-2]), 768)
    with pytest.raises(InputError, match="--doc-gate-k and --gate-k|--gate-k and --doc-gate-k"):
        systems_of(SystemsSpec([indexes[6]], gate_ks=[1, 2], doc_gate_ks=[1, 2]), 768)


@pytest.fixture(scope="module")
def swept(indexes):
    spec = SystemsSpec([indexes[STORED]], doc_gate_ks=[STORED, *SMALLER])
    return evaluate_systems(spec, queries=QUERIES, qrels=QRELS).section("comparison")


def test_silent_wrong_systems_are_named_by_the_document_gate(swept):
    names = [s.name for s in swept.systems]
    assert names == [f"ix{STORED} doc gate k={k}" for k in (STORED, *SMALLER)]
    assert [s.doc_gate_k for s in swept.systems] == [STORED, *SMALLER]


def _brute_force(queries: list[set[int]], items: list[set[int]]) -> tuple[float, float]:
    """(mean shared terms over every query × item pair, mean postings of each query's
    terms), counted one pair and one term at a time."""
    shared = [len(q & d) for q in queries for d in items]
    postings = [sum(1 for t in q for d in items if t in d) for q in queries]
    return sum(shared) / len(shared), sum(postings) / len(postings)


def test_silent_wrong_flops_and_postings_equal_a_brute_force(swept, indexes, splade):
    order = [q["id"] for q in swept.per_query]
    for system in swept.systems:
        ix = open_index(indexes[system.doc_gate_k])  # the re-indexed twin: independent
        items = [set(ix.row(i)[0].tolist()) for i in range(len(ix))]
        encoder = query_encoder_for(ix, None, None)
        vectors = QuerySpec(encoder, "model", system.gate_k).vectors([QUERIES[q] for q in order])
        queries = [set(np.flatnonzero(v).tolist()) for v in vectors]
        flops, postings = _brute_force(queries, items)
        found = swept.efficiency[system.name]
        # sums of at most 8 × 12 integer counts divided once: exact up to float rounding
        assert found["flops"] == pytest.approx(flops, rel=1e-12)
        assert found["postings_per_query"] == pytest.approx(postings, rel=1e-12)
        assert found["postings_per_query"] == pytest.approx(found["flops"] * len(ix), rel=1e-12)
        assert found["latency_ms"] > 0


def test_silent_wrong_index_bytes_are_the_files_on_disk(swept, indexes):
    stored = indexes[STORED]
    on_disk = sum(p.stat().st_size for p in stored.iterdir() if p.is_file())
    efficiency = swept.efficiency
    assert efficiency[f"ix{STORED} doc gate k={STORED}"]["index_bytes"] == on_disk
    for k in SMALLER:
        twin = indexes[k]  # indexing at k writes these vector files; the rest are the same
        vectors = sum((twin / name).stat().st_size for name in VECTOR_FILES)
        stored_vectors = sum((stored / name).stat().st_size for name in VECTOR_FILES)
        assert efficiency[f"ix{STORED} doc gate k={k}"]["index_bytes"] == (
            on_disk - stored_vectors + vectors
        )


def test_silent_wrong_the_table_and_csv_carry_efficiency_beside_the_means(swept):
    rows = list(csv.DictReader(io.StringIO(swept.files()["comparison.csv"].decode())))
    row = next(r for r in rows if r["measure"] == "nDCG@10")
    a, b = swept.efficiency[row["system_a"]], swept.efficiency[row["system_b"]]
    assert float(row["flops_a"]) == pytest.approx(a["flops"], rel=1e-9)
    assert float(row["flops_b"]) == pytest.approx(b["flops"], rel=1e-9)
    assert int(row["index_bytes_b"]) == b["index_bytes"]
    assert swept.efficiency[swept.systems[-1].name]["flops"] < a["flops"]  # gate 0 < 24
    html = swept.files()["comparison.html"].decode()
    assert "<script" not in html and html.count("<circle") == 2 * len(swept.systems)
    assert 'id="effectiveness-efficiency"' in html


def test_silent_wrong_the_command_names_both_gates_and_refuses_in_one_line(cli, indexes):
    refused = cli("evaluate", "--index", indexes[6], "--doc-gate-k", "6", "--doc-gate-k", "24")
    assert refused.returncode == 2
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "not at 24" in lines[0], refused.stderr
    wrong = cli("evaluate", "--index", indexes[6], "--doc-gate-k", "six")
    assert wrong.returncode == 2 and "--doc-gate-k must be an integer" in wrong.stderr
    commands = next(a for a in build_parser("evaluate")._actions if a.dest == "command")
    shown = commands.choices["evaluate"].format_help()
    assert "the query's gate k" in " ".join(shown.split())
    assert "--doc-gate-k K" in shown


def test_silent_wrong_one_document_gate_evaluates_the_regated_collection(indexes):
    one = evaluate_systems(
        SystemsSpec([indexes[STORED]], doc_gate_ks=[6]), queries=QUERIES, qrels=QRELS
    )
    reindexed = evaluate(open_index(indexes[6]), QUERIES, QRELS)
    assert one.run == reindexed.run
    assert one.metrics == reindexed.metrics
