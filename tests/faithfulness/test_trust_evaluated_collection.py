"""What adds to an evaluation (faithfulness, counterfactuals) re-scores its failures on the
collection it is given: a collection other than the one evaluated is refused in one line
naming both, never paired silently with the evaluation's failures. A copy of the collection
evaluated is the same collection (its fingerprint is what it holds)."""

from __future__ import annotations

import shutil

import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.counterfactual.evaluation import (
    failures_counterfactuals,
    with_counterfactuals,
)
from lexlens.analysis.evaluation.evaluate import evaluate
from lexlens.analysis.faithfulness.benchmark import failures_faithfulness, with_faithfulness
from lexlens.models.base import InputError

from .corpus import QRELS, QUERIES, TEXTS

ADDITIONS = {
    "faithfulness": [
        lambda ix, ev: failures_faithfulness(ix, ev, draws=1, curve_k=1),
        lambda ix, ev: with_faithfulness(ev, index=ix, draws=1, curve_k=1),
    ],
    "counterfactuals": [
        lambda ix, ev: failures_counterfactuals(ix, ev, max_edits=1, max_calls=8),
        lambda ix, ev: with_counterfactuals(ev, index=ix, max_edits=1, max_calls=8),
    ],
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory, splade):
    """``ix`` and ``ix16`` (the same items at gate 16), ``other/ix`` (a folder of the same
    name holding one item fewer) and ``copy/ix`` (a copy of ``ix``)."""
    root = tmp_path_factory.mktemp("evaluated")
    source = root / "items.csv"
    source.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in TEXTS.items()))
    fewer = root / "fewer.csv"
    fewer.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in list(TEXTS.items())[:-1]))
    build_index(splade, source, root / "ix")
    build_index(splade, source, root / "ix16", gate_k=16)
    build_index(splade, fewer, root / "other" / "ix")
    shutil.copytree(root / "ix", root / "copy" / "ix")
    return root


@pytest.fixture(scope="module")
def evaluation(folders, splade):
    return evaluate(folders / "ix", QUERIES, QRELS, top=5, query_encoder=splade)


@pytest.mark.parametrize("what", sorted(ADDITIONS))
@pytest.mark.parametrize("other", ["ix16", "other/ix"])
def test_silent_wrong_an_addition_refuses_a_collection_other_than_the_one_evaluated(
    folders, evaluation, what, other
):
    assert evaluation.failures  # there is something to pair
    for call in ADDITIONS[what]:
        with pytest.raises(InputError) as refused:
            call(folders / other, evaluation)
        message = str(refused.value)
        recorded = evaluation.index["fingerprint"]
        given = open_index(folders / other).fingerprint
        assert "\n" not in message and message.startswith(f"{what}: the index ")
        assert str(folders / other) in message and "not the collection the evaluation" in message
        assert recorded in message and given in message  # both collections named


def test_silent_wrong_a_copy_of_the_collection_evaluated_is_the_same_collection(
    folders, evaluation, splade
):
    same = failures_faithfulness(folders / "ix", evaluation, query_encoder=splade, draws=2)
    copied = failures_faithfulness(
        folders / "copy" / "ix", evaluation, query_encoder=splade, draws=2
    )
    assert open_index(folders / "copy" / "ix").fingerprint == evaluation.index["fingerprint"]
    assert copied.summary.comprehensiveness == same.summary.comprehensiveness
    assert [f.to_dict() for f in copied.failures] == [f.to_dict() for f in same.failures]
