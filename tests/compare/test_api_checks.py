"""compare, compare_encodings and compare_indexes refuse a wrong type or value of any argument
with one LexlensError that names the argument, before a model runs (never a TypeError or an
AttributeError from deep inside)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.compare.compare import compare, compare_encodings
from lexlens.analysis.compare.compare_collections import compare_indexes
from lexlens.analysis.compare.options import CompareIndexOptions, CompareOptions
from tests.helpers import refused

TEXT = "a dog on the beach"


@pytest.fixture(scope="module")
def pets_index(tmp_path_factory, splade) -> Path:
    folder = tmp_path_factory.mktemp("compare-api")
    source = folder / "pets.csv"
    source.write_text(
        "id,text,labels\na,a dog on the beach,dog\nb,a cat in the snow,cat\n", encoding="utf-8"
    )
    build_index(splade, source, folder / "pets", gate_k=768, encoder_spec="splade-tiny")
    return folder / "pets"


# (keyword arguments, what the message names) for the options every comparison shares
SHARED_OPTIONS = [
    ({"gate_k": "768"}, "gate_k"),
    ({"gate_k": -2}, "gate_k"),
    ({"gate_k": [768, 8, 3]}, "gate_k"),
    ({"gate_k": [768, True]}, "gate_k"),
    ({"gate_k": 2.5}, "gate_k"),
    ({"top": 0}, "top"),
    ({"top": "5"}, "top"),
    ({"top": None}, "top"),
    ({"topk": 8}, "'topk'"),
]


@pytest.mark.parametrize(
    ("given", "named"),
    [
        *SHARED_OPTIONS,
        ({"box": 5}, "box"),
        ({"box": "0,0,1,1"}, "box"),
        ({"box": ("a", 0, 1, 1)}, "box"),
        ({"box": (0, 0, 2, 1)}, "box"),
        ({"box": (0, 0, 1)}, "box"),
        ({"term": 5}, "term"),
        ({"options": "fast"}, "options"),
        ({"options": CompareIndexOptions()}, "options"),
    ],
)
def test_traceback_compare_options_are_refused_naming_them(splade, given, named):
    refused(lambda: compare(splade, image=b"not read", **given), named)


def test_traceback_compare_inputs_are_refused_naming_them(splade, effnet, tmp_path):
    refused(lambda: compare(5, text=TEXT), "encoder_a")
    refused(lambda: compare(None, text=TEXT), "encoder_a")
    refused(lambda: compare("", text=TEXT), "encoder_a")
    refused(lambda: compare(splade, 3.5, text=TEXT), "encoder_b")
    refused(lambda: compare(splade, text=5), "text")
    refused(lambda: compare(splade, text="   "), "text")
    refused(lambda: compare(splade), "text", "image")
    refused(lambda: compare(splade, text=TEXT, image=b"x"), "text", "image")
    refused(lambda: compare(effnet, image=5), "image")
    refused(lambda: compare(effnet, image=tmp_path / "missing.png"), "missing.png")
    refused(lambda: compare(effnet, image=b"not a picture"), "not an image")
    refused(lambda: compare(effnet, image=b"x", name=5), "name")
    refused(lambda: compare(splade, text=TEXT, name="photo.png"), "name")
    refused(lambda: compare(effnet, image=b"x", cells="r0c0"), "cells")
    refused(lambda: compare(effnet, image=b"x", cells=[0]), "cells")
    refused(lambda: compare(effnet, image=b"x", cells=[]), "cells")
    refused(lambda: compare(splade, text=TEXT, cells=["r0c0"]), "cells")
    refused(lambda: compare(splade, text=TEXT, box=(0, 0, 1, 1)), "box")
    refused(lambda: compare(splade, text=TEXT, term="dog"), "term")
    refused(lambda: compare(splade, text=TEXT, device=5), "device")
    refused(lambda: compare(splade, text=TEXT, device="tpu"), "device")
    refused(lambda: compare(splade, text=TEXT, gate_k=64), "same encoder", "gate k")


@pytest.fixture(scope="module")
def encodings(splade, effnet):
    from PIL import Image

    text = splade.encode_texts([TEXT])[0]
    image = effnet.encode_images([Image.new("RGB", (64, 48), "white")])[0]
    return text, image


def test_traceback_compare_encodings_refuses_each_argument(splade, effnet, encodings):
    text, image = encodings

    def call(**changed):
        arguments = {
            "encoder_a": splade,
            "encoding_a": text,
            "encoder_b": splade,
            "encoding_b": text,
            "gate_k": (768, 8),
        } | changed
        return lambda: compare_encodings(**arguments)

    call()()  # the unchanged call compares
    refused(call(encoder_a="splade-tiny"), "encoder_a")
    refused(call(encoder_b=None), "encoder_b")
    refused(call(encoding_a=text.weights), "encoding_a")
    refused(call(encoding_b=None), "encoding_b")
    refused(call(encoder_b=effnet, encoding_b=image), "same kind of input")
    refused(call(cells=("r0c0",)), "cells")
    refused(call(cells="r0c0"), "cells")
    refused(call(input_info="a dog"), "input_info")
    refused(call(options={"top": 3}), "options")
    refused(call(top=-1), "top")
    refused(call(gate_k=(768, -5)), "gate_k")
    refused(call(box=(0.5, 0.5, 0.5, 1)), "box")
    refused(call(term=["dog"]), "term")
    refused(call(colour="red"), "'colour'")
    # an encoding with fewer weights than its encoder's vocabulary has terms
    shorter = dataclasses.replace(text, weights=text.weights[:100])
    refused(call(encoding_b=shorter), "encoding_b", "vocabulary")
    # cells with an image: they name patches of its grid
    image_call = {
        "encoder_a": effnet,
        "encoding_a": image,
        "encoder_b": effnet,
        "encoding_b": image,
        "gate_k": (768, 64),
    }
    refused(lambda: compare_encodings(**image_call, cells=["r99c99"]), "r99c99")
    refused(lambda: compare_encodings(**image_call, cells=["r0c0"], box=(0, 0, 1, 1)), "box")


@pytest.mark.parametrize(
    ("given", "named"),
    [
        *SHARED_OPTIONS,
        ({"query": ""}, "query"),
        ({"query": 5}, "query"),
        ({"query_mode": "dense"}, "query_mode"),
        ({"k": 0}, "k must be"),
        ({"k": "20"}, "k must be"),
        ({"explain": -1}, "explain"),
        ({"box": (0, 0, 1, 1)}, "'box'"),
        ({"options": CompareOptions()}, "options"),
        ({"progress": 5}, "progress"),
        ({"device": 5}, "device"),
    ],
)
def test_traceback_compare_indexes_options_are_refused_naming_them(pets_index, given, named):
    refused(lambda: compare_indexes(pets_index, **given), named)


def test_traceback_compare_indexes_inputs_are_refused_naming_them(pets_index, splade, tmp_path):
    refused(lambda: compare_indexes(5), "index_a")
    refused(lambda: compare_indexes(None), "index_a")
    refused(lambda: compare_indexes(pets_index, 2.5), "index_b")
    refused(lambda: compare_indexes(tmp_path / "missing"), "missing", "not found")
    refused(lambda: compare_indexes(pets_index, encoder_a=5, gate_k=(768, 2)), "encoder_a")
    refused(
        lambda: compare_indexes(pets_index, encoder_a=splade, encoder_b=[], gate_k=(768, 2)),
        "encoder_b",
    )
    refused(lambda: compare_indexes(pets_index, encoder_a=splade, gate_k=768), "same index")
    refused(lambda: compare_indexes(pets_index, gate_k=(768, 1000)), "re-gate exactly")
    refused(
        lambda: compare_indexes(pets_index, encoder_a="efficientnet-lite0-lexical"),
        "'efficientnet-lite0-lexical'",
        "text",
    )
