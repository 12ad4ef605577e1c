"""``lexlens.attribute``, ``lexlens.mot_evaluate`` and the report use cases
(``attribution_report``, ``build_report``) refuse a wrong type or value of every argument
with one :class:`LexlensError` line naming it, before the model runs (the encoder here
raises if any forward pass is asked of it)."""

from __future__ import annotations

import numpy as np
import pytest

import lexlens
from lexlens.analysis.attribution.options import AttributeOptions, ReportOptions
from lexlens.analysis.attribution.report import attribution_report, build_report
from lexlens.analysis.core.outputs import json_text
from tests.attribution.test_attr_toy import ToyEncoder
from tests.helpers import refused

TEXTS = ["a cat sleeps on the mat", "rockets launch at dawn"]


class Untouched(ToyEncoder):
    """The toy encoder (M=4 sub-vectors of an 8-d embedding) whose model must not run."""

    def forward_embeds(self, inputs_embeds, attention_mask):
        raise AssertionError("the model ran before the arguments were checked")

    def embed_texts(self, texts, *, batch_size=None, progress=None):
        raise AssertionError("the model ran before the arguments were checked")


@pytest.fixture(scope="module")
def untouched() -> Untouched:
    return Untouched()


#: Wrong IG options: one declaration refuses them through every use case that runs IG.
WRONG_IG = [
    ("steps type", {"steps": "8"}, "steps must be auto or an integer from 2 to 1,000"),
    (
        "steps low",
        {"steps": 1},
        "steps must be auto or an integer from 2 to 1,000 (or none), not 1",
    ),
    ("steps high", {"steps": 1001}, "steps must be auto or an integer from 2 to 1,000"),
    ("steps float", {"steps": 2.5}, "steps must be auto or an integer"),
    ("steps bool", {"steps": True}, "steps must be auto or an integer"),
    ("tolerance zero", {"tolerance": 0}, "tolerance must be a fraction in (0, 1), not 0.0"),
    ("tolerance one", {"tolerance": 1}, "tolerance must be a fraction in (0, 1), not 1.0"),
    ("tolerance type", {"tolerance": "1%"}, "tolerance must be a fraction in (0, 1), not '1%'"),
    ("tolerance nan", {"tolerance": float("nan")}, "tolerance must be a fraction in (0, 1)"),
    ("max_steps low", {"max_steps": 4}, "max_steps must be an integer from 9 to 1,000, not 4"),
    ("max_steps type", {"max_steps": 9.5}, "max_steps must be an integer from 9 to 1,000"),
    ("batch_size zero", {"batch_size": 0}, "batch_size must be an integer from 1 to 4,096"),
    ("batch_size type", {"batch_size": "8"}, "batch_size must be an integer from 1 to 4,096"),
    ("seed negative", {"seed": -1}, "seed must be an integer from 0 to 2,147,483,647, not -1"),
    ("seed large", {"seed": 2**31}, "seed must be an integer from 0 to 2,147,483,647"),
    ("seed float", {"seed": 1.5}, "seed must be an integer from 0 to 2,147,483,647"),
    ("progress type", {"progress": 5}, "progress must be a function of (fraction, message)"),
]
#: Wrong options of the attribution (also the report's).
WRONG_ATTRIBUTE = [
    ("method value", {"method": "simpson"}, "method must be one of gausslegendre, clenshaw-curtis"),
    ("method type", {"method": 1}, "method must be one of gausslegendre, clenshaw-curtis"),
    ("method and even steps", {"method": "clenshaw-curtis", "steps": 8}, "steps must be odd"),
    ("baseline value", {"baseline": "zeros"}, "baseline must be one of unk, pad, not 'zeros'"),
    ("baseline none", {"baseline": None}, "baseline must be one of unk, pad, not None"),
    ("subvectors int", {"subvectors": 3}, "subvectors must be distinct sub-vector indices"),
    ("subvectors repeat", {"subvectors": [1, 1]}, "subvectors must be distinct"),
    ("subvectors negative", {"subvectors": [-1]}, "subvectors must be distinct"),
    ("subvectors text", {"subvectors": ["a"]}, "subvectors must be distinct"),
    ("subvectors empty", {"subvectors": []}, "subvectors must be distinct"),
    ("subvectors beyond M", {"subvectors": [4]}, "subvectors holds 4, out of range 0..3"),
    ("m low", {"m": 1}, "m must be an integer ≥ 2 (or none), not 1"),
    ("m type", {"m": "12"}, "m must be an integer ≥ 2 (or none), not '12'"),
    ("m not dividing", {"m": 3}, "m=3: M=3 sub-vectors does not divide the embedding dimension 8"),
    ("options type", {"options": {"steps": 8}}, "options must be AttributeOptions, not dict"),
    ("unknown keyword", {"stepz": 8}, "'stepz' is not an option of attribute"),
    ("old keyword", {"n_steps": 8}, "'n_steps' is not an option of attribute"),
]
#: Wrong inputs (the texts and the encoder).
WRONG_INPUTS = [
    ("encoder type", {"encoder": 5}, "encoder must be an encoder, a registry name"),
    ("encoder value", {"encoder": "no-such-encoder"}, "unknown encoder 'no-such-encoder'"),
    ("texts type", {"texts": 5}, "texts must be a text or a list of texts, not int"),
    ("texts item", {"texts": ["a cat", None]}, "texts[1] must be text, not NoneType"),
    ("texts bytes", {"texts": b"a cat"}, "texts must be a text or a list of texts, not bytes"),
    ("texts none", {"texts": []}, "texts holds no text: give at least one"),
    ("texts blank", {"texts": ["a cat", "  "]}, "texts[1] is empty: type some words"),
]


@pytest.mark.parametrize(
    ("what", "wrong", "message"),
    WRONG_IG + WRONG_ATTRIBUTE + WRONG_INPUTS,
    ids=[w[0] for w in WRONG_IG + WRONG_ATTRIBUTE + WRONG_INPUTS],
)
def test_traceback_attribute_refuses_each_wrong_argument_naming_it(untouched, what, wrong, message):
    arguments = {"encoder": untouched, "texts": TEXTS, **wrong}
    refused(lambda: lexlens.attribute(**arguments), message)


def test_traceback_attribute_refuses_a_missing_argument_and_takes_right_ones(untouched):
    refused(lambda: lexlens.attribute(untouched), "missing a required argument: 'texts'")
    refused(lambda: lexlens.attribute(untouched, TEXTS, AttributeOptions()), "positional")
    # The same checks pass the right arguments through (the model runs: the toy answers).
    toy = ToyEncoder()
    options = AttributeOptions(steps=3, subvectors=(2, 0), batch_size=2)
    result = lexlens.attribute(toy, TEXTS[0], options=options, progress=lambda f, m: None)
    (a,) = result.texts
    assert a.subvectors == [2, 0] and a.steps == 3 and result.settings["steps"] == 3
    by_keywords = lexlens.attribute(toy, TEXTS[0], steps=3, subvectors=[2, 0], batch_size=2)
    assert json_text(by_keywords) == json_text(result)


WRONG_MOT = [
    ("m_values one", {"m_values": (1,)}, "m_values must be distinct integers, each at least 2"),
    ("m_values repeat", {"m_values": (4, 4)}, "m_values must be distinct integers"),
    ("m_values empty", {"m_values": ()}, "m_values must be distinct integers"),
    ("m_values text", {"m_values": "12"}, "m_values must be distinct integers"),
    ("m_values int", {"m_values": 12}, "m_values must be distinct integers"),
    ("m_values not dividing", {"m_values": (4, 3)}, "m_values holds 3: M=3 sub-vectors does not"),
    ("keep zero", {"keep": 0}, "keep must be a fraction in (0, 1], not 0.0"),
    ("keep above one", {"keep": 1.5}, "keep must be a fraction in (0, 1], not 1.5"),
    ("keep type", {"keep": "5%"}, "keep must be a fraction in (0, 1], not '5%'"),
    ("k not a power of two", {"k": 3}, "k must be a power of two from 2 to 65,536, not 3"),
    ("k zero", {"k": 0}, "k must be a power of two from 2 to 65,536, not 0"),
    ("k type", {"k": 4.0}, "k must be a power of two from 2 to 65,536"),
    ("limit one", {"limit": 1}, "limit must be an integer ≥ 2 (or none), not 1"),
    ("limit type", {"limit": "2"}, "limit must be an integer ≥ 2 (or none)"),
    ("mask value", {"mask": "blank"}, "mask must be one of unk, mask, delete, not 'blank'"),
    ("own_codebook type", {"own_codebook": "yes"}, "own_codebook must be true or false"),
    ("options type", {"options": AttributeOptions()}, "options must be MotOptions, not Attribu"),
    ("unknown keyword", {"subvectors": [1]}, "'subvectors' is not an option of mot_evaluate"),
    ("encoder type", {"encoder": 5}, "encoder must be an encoder, a registry name"),
    ("corpus type", {"corpus": 5}, "corpus must be a text or a list of texts, not int"),
    ("corpus item", {"corpus": ["a cat", 5]}, "corpus[1] must be text, not int"),
    ("corpus blank", {"corpus": ["a cat", " ", "a dog"]}, "corpus[1] is empty"),
    ("corpus one text", {"corpus": ["a cat"]}, "corpus holds 1 text: the masking evaluation"),
    ("source type", {"source": 5}, "source must be text"),
    ("attributions type", {"attributions": 5}, "attributions must be a list of SubvectorAttri"),
    ("attributions item", {"attributions": [5, 6]}, "attributions must be a list of Subvector"),
]


@pytest.mark.parametrize(
    ("what", "wrong", "message"), WRONG_IG + WRONG_MOT, ids=[w[0] for w in WRONG_IG + WRONG_MOT]
)
def test_traceback_mot_evaluate_refuses_each_wrong_argument_naming_it(
    untouched, what, wrong, message
):
    arguments = {"encoder": untouched, "corpus": TEXTS, "m_values": (4,), "k": 2, **wrong}
    refused(lambda: lexlens.mot_evaluate(**arguments), message)


def test_traceback_mot_evaluate_refuses_attributions_of_other_texts(untouched):
    from lexlens.analysis.attribution.ig import attribute_texts

    attributions = attribute_texts(ToyEncoder(), TEXTS[:1], steps=2)
    refused(
        lambda: lexlens.mot_evaluate(untouched, TEXTS, attributions=attributions),
        "attributions must be given for every corpus text, in order",
    )
    refused(lambda: lexlens.mot_evaluate(untouched), "missing a required argument: 'corpus'")


WRONG_REPORT = [
    ("mot type", {"mot": 1}, "mot must be true or false, not 1"),
    ("mot with one text", {"mot": True, "texts": TEXTS[:1]}, "needs at least two texts"),
    ("mot with subvectors", {"mot": True, "subvectors": [0]}, "subvectors must be none with mot"),
    ("keep zero", {"keep": 0}, "keep must be a fraction in (0, 1], not 0.0"),
    ("top zero", {"top": 0}, "top must be an integer from 1 to 10,000, not 0"),
    ("top type", {"top": "30"}, "top must be an integer from 1 to 10,000, not '30'"),
    ("source type", {"source": None}, "source must be text (where the texts came from)"),
    ("options type", {"options": AttributeOptions()}, "options must be ReportOptions, not Attri"),
    ("unknown keyword", {"k": 4}, "'k' is not an option of the report"),
]
REPORT_CASES = WRONG_IG + WRONG_ATTRIBUTE[:-3] + WRONG_INPUTS + WRONG_REPORT


@pytest.mark.parametrize("use_case", [attribution_report, build_report], ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("what", "wrong", "message"), REPORT_CASES, ids=[w[0] for w in REPORT_CASES]
)
def test_traceback_the_report_refuses_each_wrong_argument_naming_it(
    untouched, use_case, what, wrong, message
):
    arguments = {"encoder": untouched, "texts": TEXTS, **wrong}
    refused(lambda: use_case(**arguments), message)


def test_traceback_the_report_takes_its_options_as_a_type_or_keywords():
    toy = ToyEncoder()
    options = ReportOptions(steps=3, mot=True, keep=0.5)
    by_type = attribution_report(toy, TEXTS, options=options, source="two texts")
    by_keywords = build_report(toy, TEXTS, steps=3, mot=True, keep=0.5, source="two texts")
    assert by_type.files()["report.json"] == by_keywords.files()["report.json"]
    assert by_type.mot is not None and by_type.mot.settings["keep"] == 0.5
    assert np.isfinite(by_type.mot.table.to_numpy()).all()
