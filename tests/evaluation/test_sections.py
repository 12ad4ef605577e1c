"""An evaluation's sections: faithfulness, counterfactuals and a comparison of systems each
added to one :class:`Evaluation`, on the collection it carries, with its document, files
and HTML block; ``evaluate_systems`` returns an Evaluation for one system or several."""

from __future__ import annotations

import json

import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import StoredIndex, open_index
from lexlens.analysis.counterfactual.evaluation import (
    EvaluationCounterfactuals,
    failures_counterfactuals,
    with_counterfactuals,
)
from lexlens.analysis.evaluation.evaluate import evaluate
from lexlens.analysis.evaluation.options import EvaluationOptions
from lexlens.analysis.evaluation.result import Evaluation
from lexlens.analysis.evaluation.sections import Section
from lexlens.analysis.faithfulness.benchmark import (
    FailuresFaithfulness,
    failures_faithfulness,
    with_faithfulness,
)
from lexlens.analysis.systems.comparison import evaluate_systems
from lexlens.analysis.systems.result import SystemsComparison
from lexlens.analysis.systems.systems import SystemsSpec
from lexlens.models.base import InputError
from tests.faithfulness.corpus import QRELS, QUERIES, TEXTS


@pytest.fixture(scope="module")
def index(tmp_path_factory, splade):
    folder = tmp_path_factory.mktemp("sections")
    (folder / "items.csv").write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in TEXTS.items()))
    build_index(splade, folder / "items.csv", folder / "ix")
    return folder / "ix"


@pytest.fixture(scope="module")
def evaluation(index, splade):
    return evaluate(index, QUERIES, QRELS, top=5, gate_k=64, query_encoder=splade)


@pytest.fixture(scope="module")
def faithful(evaluation):
    return with_faithfulness(evaluation, draws=1, curve_k=1)


@pytest.fixture(scope="module")
def both(faithful):
    return with_counterfactuals(faithful, max_edits=1, max_calls=8)


def test_an_evaluation_carries_its_collection_and_typed_options(index, evaluation):
    assert isinstance(evaluation.collection, StoredIndex)
    assert evaluation.collection.path == open_index(index).path
    assert evaluation.options == EvaluationOptions(top=5, gate_k=64)
    assert evaluation.sections == ()
    assert {"collection", "options", "sections"}.isdisjoint(evaluation.to_dict())


def test_a_section_is_measured_on_the_evaluations_own_collection(index, evaluation, faithful, both):
    section = faithful.section("faithfulness")
    assert isinstance(section, FailuresFaithfulness) and isinstance(section, Section)
    given = failures_faithfulness(index, evaluation, draws=1, curve_k=1)
    assert [f.to_dict() for f in section.failures] == [f.to_dict() for f in given.failures]
    assert section.settings["gate_k"] == 64  # the evaluation's typed options, not defaults
    counterfactuals = both.section("counterfactuals")
    assert isinstance(counterfactuals, EvaluationCounterfactuals)
    alone = failures_counterfactuals(index, evaluation, max_edits=1, max_calls=8)
    assert [(r.query_id, r.text.found) for r in counterfactuals.failures] == [
        (r.query_id, r.text.found) for r in alone.failures
    ]
    assert counterfactuals.settings["gate_k"] == 64
    assert [s.key for s in both.sections] == ["faithfulness", "counterfactuals"]
    assert evaluation.sections == () and faithful.sections == (section,)  # new ones returned


def test_the_document_files_and_report_hold_each_section_in_order(both):
    document = both.to_dict()
    assert list(document)[-3:] == ["notes", "faithfulness", "counterfactuals"]
    assert document["faithfulness"] == both.section("faithfulness").to_dict()
    files = both.files()
    assert json.loads(files["evaluation.json"]) == json.loads(json.dumps(document))
    assert files["faithfulness.csv"] == both.section("faithfulness").csv()
    assert files["counterfactuals.csv"] == both.section("counterfactuals").csv()
    page = files["evaluation.html"].decode()
    blocks = [s.html() for s in both.sections]
    at = [page.index(b) for b in blocks]
    assert at == sorted(at) and page.endswith(blocks[-1] + "</body></html>\n")
    assert page.count("</body>") == 1


def test_counterfactuals_alone_keep_the_layout_evaluation_json_had(evaluation):
    document = with_counterfactuals(evaluation, max_edits=1, max_calls=8).to_dict()
    keys = list(document)
    assert keys[-3:] == ["faithfulness", "counterfactuals", "notes"]
    assert document["faithfulness"] is None


def test_a_stored_state_keeps_the_sections_and_needs_the_index_again(index, both):
    rebuilt = Evaluation.from_state(json.loads(json.dumps(both.to_state())))
    assert rebuilt.to_dict() == both.to_dict()
    assert rebuilt.options == both.options and rebuilt.collection is None
    with pytest.raises(InputError, match=r"^faithfulness: this evaluation holds no opened"):
        with_faithfulness(rebuilt, draws=1, curve_k=1)
    again = with_faithfulness(rebuilt, index=index, draws=1, curve_k=1)
    assert [s.key for s in again.sections] == ["faithfulness", "counterfactuals"]


def test_evaluate_systems_returns_an_evaluation_for_one_or_several(index):
    one = evaluate_systems(SystemsSpec([index]), queries=QUERIES, qrels=QRELS)
    assert isinstance(one, Evaluation) and one.sections == () and one.reported() is one
    two = evaluate_systems(SystemsSpec([index], gate_ks=[768, 2]), queries=QUERIES, qrels=QRELS)
    assert isinstance(two, Evaluation)
    comparison = two.section("comparison")
    assert isinstance(comparison, SystemsComparison) and two.reported() is comparison
    assert two.settings["gate_k"] == 768 == two.options.gate_k  # the baseline's evaluation
    assert set(comparison.files()) <= set(two.files())
    assert two.latex() == comparison.files()["comparison.tex"].decode()
    with pytest.raises(InputError, match="compares two or more systems"):
        one.latex()


def test_evaluate_opens_the_collection_once(index, tmp_path, cli, monkeypatch):
    (tmp_path / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
    (tmp_path / "qrels.tsv").write_text(
        "".join(f"{q}\t0\t{d}\t{r}\n" for q, j in QRELS.items() for d, r in j.items())
    )
    opened = []
    real = StoredIndex.__init__

    def counted(self, path):
        opened.append(str(path))
        real(self, path)

    monkeypatch.setattr(StoredIndex, "__init__", counted)
    run = cli(
        "evaluate",
        "--index",
        index,
        "--queries",
        tmp_path / "queries.tsv",
        "--qrels",
        tmp_path / "qrels.tsv",
        "--faithfulness",
        "--draws",
        "1",
        "--counterfactuals",
        "--max-calls",
        "8",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    assert {"faithfulness", "counterfactuals"} <= set(run.json())
    assert opened == [str(index)]


def test_the_faithfulness_block_is_the_section_of_its_own_page(faithful):
    from lexlens.analysis.faithfulness.report import faithfulness_html

    section = faithful.section("faithfulness")
    page = faithfulness_html(section, collapsed=True)
    start = page.index("<!-- faithfulness section -->")
    end = page.index("<!-- end of the faithfulness section -->") + len(
        "<!-- end of the faithfulness section -->"
    )
    assert section.html() == page[start:end]
