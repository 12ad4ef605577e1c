"""The page checks — the Query ⊙ Document deletion curve, the Text provenance check, the
Images occlusion check, the Integrated Gradients curves — each point checked against the
model run on the edited input directly (numpy for the scores), never the decomposition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lexlens.analysis.core.gating import gate
from lexlens.analysis.core.grid import patch_boxes
from lexlens.analysis.core.vocabulary import token_positions
from lexlens.analysis.faithfulness.contrib import contrib_faithfulness
from lexlens.analysis.faithfulness.occlusion import occluded, occlusion_faithfulness
from lexlens.analysis.faithfulness.provenance import provenance_faithfulness
from tests.helpers import close_to


def test_silent_wrong_deletion_curve_points_are_the_encoders_scores(splade):
    found = contrib_faithfulness(
        splade,
        query="cat sleeping on a book",
        doc="a kitten sleeping on an old novel",
        draws=3,
        curve_k=4,
    )
    d = gate(splade.encode_texts(["a kitten sleeping on an old novel"])[0], splade.vocab, 768)
    d = d.astype(np.float64)
    for text, score in zip(found.edited_queries, found.curve.explained, strict=True):
        q = gate(splade.encode_texts([text], keep_units=False)[0], splade.vocab, 768)
        terms = q.astype(np.float64) * d
        assert score == close_to(float(terms.sum()), terms=terms)
    # the order: words by their summed contributions, largest first
    shares = [w["contribution"] for w in found.words]
    assert shares == sorted(shares, reverse=True)
    assert found.curve.parts == [w["word"] for w in found.words[:4]]
    assert found.edited_queries[1] == " ".join(
        w for w in ["cat", "sleeping", "on", "a", "book"] if w != found.curve.parts[0]
    )
    drops = [found.curve.explained[0] - s for s in found.curve.explained]
    assert found.curve.aopc == pytest.approx(sum(drops) / len(drops))
    assert found.measured_by == "re-encoding" and found.curve.draws == 3


def test_silent_wrong_provenance_check_reads_the_reencoded_weight(splade):
    text = "a giraffe eating leaves from a tall tree"
    found = provenance_faithfulness(splade, text, top=12, merged=False)
    positions = token_positions(splade.vocab)
    tested = [t for t in found.terms if "weight_after" in t]
    assert tested and found.tested == len(tested)
    for term in tested:
        assert term["from_word"] not in term["edited_text"].split()
        weights = splade.encode_texts([term["edited_text"]], keep_units=False)[0].weights
        column = positions[term["token"]][0]
        assert term["weight_after"] == close_to(float(weights[column]), terms=weights.max())
    by_hand = np.mean([t["weight_after"] <= 0.5 * t["weight"] for t in tested])
    assert found.dropped_share == pytest.approx(by_hand)


@pytest.fixture(scope="module")
def photo():
    from PIL import Image

    skimage = pytest.importorskip("skimage")
    image = Image.open(Path(skimage.__file__).parent / "data" / "chelsea.png").convert("RGB")
    image.thumbnail((224, 224))
    return image


def test_silent_wrong_occlusion_fills_the_cells_and_reencodes(effnet, photo):
    found = occlusion_faithfulness(effnet, photo, box="0.5,0,1,1", draws=3, top=5)
    encoding = effnet.encode_images([photo])[0]
    units = [encoding.units.index(c) for c in found.cells]
    edited = occluded(photo, encoding, units, found.fill)
    pixels, original = np.asarray(edited), np.asarray(photo)
    fill = np.round(255 * np.asarray(found.fill)).astype(np.uint8)
    height, width = original.shape[:2]
    inside = np.zeros((height, width), bool)  # pixels well inside an occluded cell
    near = np.zeros((height, width), bool)  # pixels of an occluded cell, edges included
    for x0, y0, x1, y1 in (patch_boxes(encoding.grid, encoding.crop_box)[u] for u in units):
        inside[
            int(y0 * height) + 1 : int(y1 * height) - 1, int(x0 * width) + 1 : int(x1 * width) - 1
        ] = True
        near[
            max(0, int(y0 * height) - 1) : int(y1 * height) + 2,
            max(0, int(x0 * width) - 1) : int(x1 * width) + 2,
        ] = True
    assert inside.any() and (pixels[inside] == fill).all()
    assert (pixels[~near] == original[~near]).all()
    after = effnet.encode_images([edited], keep_units=False)[0].weights
    positions = token_positions(effnet.vocab)
    for term in found.terms:
        if term["token"] in positions:
            column = positions[term["token"]][0]
            assert term["after"] == close_to(float(after[column]), terms=after.max())
            before = encoding.weights
            assert term["before"] == close_to(float(before[column]), terms=before.max())
    assert found.measured_by == "re-encoding" and found.draws == 3


@pytest.fixture(scope="module")
def minilm():
    from lexlens.models import load_encoder

    return load_encoder("minilm-pq", device="cpu")


def test_silent_wrong_ig_deletion_curve_is_the_models_objective(minilm):
    """MoT's deletion curve point k: for every sub-vector its own top-k words replaced by
    [UNK] by hand, the model run, F_i = −||d̂_i − f_i||², averaged over the sub-vectors."""
    import torch

    from lexlens.analysis.attribution.attribution import attribute
    from lexlens.analysis.attribution.ig_curves import ig_faithfulness

    result = attribute(minilm, ["a cat sleeping on a book"], steps=16)
    curves = ig_faithfulness(minilm, result, 0, k=2)
    a = result.texts[0]
    tok = minilm.tokenizer
    ids = tok.convert_tokens_to_ids(a.tokens)
    unk = tok.unk_token_id
    centroids = np.asarray(minilm.centroids, np.float64)
    dhat = centroids[np.arange(a.m), np.asarray(a.codes)]
    credited = [w for w, word in enumerate(a.words) if word in curves.words]
    for k in range(curves.k + 1):
        values, squares = [], []  # each F_i; the |terms| of d̂² − 2 d̂ f + f², over M
        for i in range(a.m):
            top = sorted(credited, key=lambda w: (-a.attributions[i][w], w))[:k]
            drop = {j for w in top for j in a.word_groups[w]}
            seq = [unk if j in drop else t for j, t in enumerate(ids)]
            with torch.no_grad():
                f = minilm.forward_ids(
                    torch.tensor([seq]), torch.ones((1, len(seq)), dtype=torch.long)
                )
            sub = minilm.split_torch(f).double().numpy()[0]
            values.append(-((sub[i] - dhat[i]) ** 2).sum())
            squares.append((np.abs(sub[i]) + np.abs(dhat[i])) ** 2 / a.m)
        assert curves.deletion["MoT"][k] == close_to(np.mean(values), terms=squares)
    assert set(curves.deletion) == {"MoT", "RandT", "GlobalT"}
