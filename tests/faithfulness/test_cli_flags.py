"""A flag that tunes --faithfulness or --counterfactuals, given without it, is refused before
any work instead of being ignored; an addition that cannot run (its options out of range,
several systems, another engine's run) is refused before anything is evaluated, the work a
refusal wastes growing with the benchmark; the command adds what the API adds."""

from __future__ import annotations

import pytest

from tests.helpers import one_line_error


@pytest.mark.parametrize(
    ("flag", "value", "switch"),
    [
        ("--draws", "3", "--faithfulness"),
        ("--curve-k", "4", "--faithfulness"),
        ("--max-edits", "2", "--counterfactuals"),
        ("--max-calls", "50", "--counterfactuals"),
        ("--side", "query", "--counterfactuals"),
    ],
)
def test_silent_wrong_a_tuning_flag_without_its_switch_is_refused(
    cli, tmp_path, flag, value, switch
):
    run = cli("evaluate", "--index", str(tmp_path / "none"), flag, value)
    one_line_error(run, flag, switch)


QUERIES = {"q1": "apple pie", "q2": "rocket launch", "q3": "bakery bread"}
QRELS = {"q1": {"d-crumble": 1}, "q2": {"d-rocket": 1}, "q3": {"d-bread": 1}}
CORPUS = {
    "d-apple": "red apple pie with cinnamon",
    "d-crumble": "apple crumble",
    "d-rocket": "a rocket launching into the night sky",
    "d-bread": "fresh bread in a bakery window",
}


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory, splade):
    """A BEIR benchmark indexed twice (gate 768 and 16), and a run file over it."""
    from lexlens.analysis.collections.indexing import index_collection
    from tests.datasets.files import beir_of_tables

    folder = tmp_path_factory.mktemp("early")
    beir_of_tables(folder / "beir", CORPUS, QUERIES, QRELS)
    index_collection(splade, folder / "beir", folder / "ix")
    index_collection(splade, folder / "beir", folder / "ix16", gate_k=16)
    (folder / "bm25.trec").write_text("q1 Q0 d-apple 1 2.0 bm25\nq2 Q0 d-rocket 1 1.0 bm25\n")
    return folder


@pytest.fixture
def work(monkeypatch) -> list[str]:
    """A spy on what evaluates (one system's evaluation, each system of a comparison): the
    calls it saw, each passed through unchanged."""
    from lexlens.analysis.systems import comparison as compare

    seen: list[str] = []
    for name in ("evaluate_benchmark", "evaluate_each"):
        real = getattr(compare, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            seen.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(compare, name, spy)
    return seen


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        (["--faithfulness", "--draws", "0"], ["--draws", "1 to 1,000", "not 0"]),
        (["--faithfulness", "--curve-k", "101"], ["--curve-k", "1 to 100"]),
        (["--counterfactuals", "--max-edits", "11"], ["--max-edits", "1 to 10"]),
        (["--index", "ix16", "--counterfactuals"], ["counterfactuals", "2 systems", "ix16"]),
        (["--index", "ix16", "--faithfulness"], ["faithfulness", "2 systems", "ix16"]),
        (
            ["--index", "ix16", "--faithfulness", "--counterfactuals"],
            ["faithfulness and counterfactuals", "one system"],
        ),
        (["--run", "bm25.trec", "--faithfulness"], ["faithfulness", "another system's run"]),
        (["--run", "bm25.trec", "--counterfactuals"], ["counterfactuals", "system's run"]),
    ],
)
def test_unbounded_an_addition_that_cannot_run_is_refused_before_any_evaluation(
    cli, benchmark, work, flags, needles
):
    paths = [str(benchmark / f) if f in ("ix16", "bm25.trec") else f for f in flags]
    run = cli("evaluate", "--index", str(benchmark / "ix"), *paths)
    one_line_error(run, *needles)
    assert work == []  # nothing was evaluated before the refusal


def test_unbounded_the_api_refuses_an_addition_before_any_evaluation(benchmark, work):
    from lexlens.analysis.counterfactual.options import CounterfactualOptions
    from lexlens.analysis.systems.comparison import evaluate_systems
    from lexlens.analysis.systems.systems import SystemsSpec
    from lexlens.models.base import InputError

    two = SystemsSpec([benchmark / "ix", benchmark / "ix16"])
    with pytest.raises(InputError, match=r"^counterfactuals test one system's failures: 2"):
        evaluate_systems(two, counterfactuals=CounterfactualOptions())
    with pytest.raises(InputError, match=r"^faithfulness must be FaithfulnessOptions"):
        evaluate_systems(SystemsSpec([benchmark / "ix"]), faithfulness={"draws": 3})
    assert work == []


def test_silent_wrong_the_command_adds_what_the_api_adds(cli, benchmark, splade):
    from lexlens.analysis.counterfactual.evaluation import with_counterfactuals
    from lexlens.analysis.evaluation.evaluate import evaluate_benchmark
    from lexlens.analysis.faithfulness.benchmark import with_faithfulness

    ix = benchmark / "ix"
    flags = ["--faithfulness", "--draws", "2", "--curve-k", "2", "--counterfactuals"]
    run = cli("evaluate", "--index", ix, *flags, "--max-calls", "20", "--json")
    assert run.returncode == 0, run.stderr
    document = run.json()
    api = with_counterfactuals(
        with_faithfulness(evaluate_benchmark(ix, query_encoder=splade), draws=2, curve_k=2),
        max_calls=20,
    ).to_dict()

    def timeless(value):
        if isinstance(value, dict):
            return {k: timeless(v) for k, v in value.items() if "seconds" not in k}
        if isinstance(value, list):
            return [timeless(v) for v in value]
        return value

    assert document["faithfulness"]["summary"]["failures"] >= 1
    assert document["counterfactuals"]["summary"]["tried"] >= 1
    assert timeless(document) == timeless(api)
