"""EfficientNet-Lite0: real ImageNet predictions, the lexical projection, loader errors."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from PIL import Image

from lexlens.analysis.core.words import top_terms
from lexlens.models.base import EncoderLoadError
from lexlens.models.efficientnet_lite import input_size
from lexlens.models.efficientnet_network import EfficientNetLite0, load_lite0_state
from lexlens.models.images import load_image
from lexlens.models.label_map import ImageNetClass, cached_class_vocab_map
from tests.helpers import skimage_path

CAT_CLASSES = {281, 282, 285}  # tabby, tiger cat, Egyptian cat
ESPRESSO = 967


@dataclass(frozen=True)
class PatchClass:
    """One ImageNet class and its probability (for a whole image or one patch)."""

    index: int
    label: str
    probability: float


def _top(effnet, probs: torch.Tensor, k: int) -> list[PatchClass]:
    values, indices = probs.topk(k)
    return [
        PatchClass(int(i), effnet.classes[int(i)].label, float(v))
        for v, i in zip(values.tolist(), indices.tolist(), strict=True)
    ]


@torch.inference_mode()
def classify(effnet, image, k: int) -> list[PatchClass]:
    """The standard (global-average-pooled) ImageNet top-``k`` of the encoder's network."""
    tensor, _ = effnet.preprocess(image)
    probs = torch.softmax(effnet.network(tensor[None].to(effnet.device)).float(), dim=-1)[0]
    return _top(effnet, probs, k)


@torch.inference_mode()
def patch_classes(effnet, image, k: int) -> list[list[PatchClass]]:
    """Top-``k`` ImageNet classes of every patch, in unit order (row-major)."""
    tensor, _ = effnet.preprocess(image)
    logits = effnet.network.patch_logits(tensor[None].to(effnet.device))
    probs = torch.softmax(logits.float(), dim=-1)[0]
    rows, cols, _ = probs.shape
    return [_top(effnet, probs[r, c], k) for r in range(rows) for c in range(cols)]


@pytest.fixture(scope="session")
def photos():
    return {n: load_image(skimage_path(f"{n}.png")) for n in ("chelsea", "coffee")}


def test_imagenet_predictions_on_real_photos(effnet, photos):
    cat = classify(effnet, photos["chelsea"], k=3)
    coffee = classify(effnet, photos["coffee"], k=3)
    assert cat[0].index in CAT_CLASSES and cat[0].probability > 0.2
    assert coffee[0].index == ESPRESSO and coffee[0].label == "espresso"
    assert coffee[0].probability > 0.5


def test_cat_and_coffee_terms_in_top5(effnet, photos):
    cat, coffee = effnet.encode_images([photos["chelsea"], photos["coffee"]])
    cat_top = [t.token for t in top_terms(cat.weights, effnet.vocab, k=5)]
    coffee_top = [t.token for t in top_terms(coffee.weights, effnet.vocab, k=5)]
    assert {"cat", "cats"} & set(cat_top), cat_top
    # "espresso" is not a bert-base-uncased token: SPLADE writes it "es ##press ##o".
    assert "coffee" in coffee_top or {"es", "##press"} <= set(coffee_top), coffee_top
    assert "cat" not in coffee_top and "coffee" not in cat_top


def test_rows_are_patch_probabilities_times_class_map(effnet, photos):
    """Recompute the lexical rows from the network's per-cell logits and the dense map."""
    image = photos["coffee"]
    enc = effnet.encode_images([image])[0]
    tensor, _ = effnet.preprocess(image)
    with torch.inference_mode():
        feats = effnet.network.features(tensor[None])[0]  # [1280, r, c]
        weight = effnet.network._fc.weight.double()
        bias = effnet.network._fc.bias.double()
        logits = torch.einsum("kc,crw->rwk", weight, feats.double()) + bias
        probs = torch.softmax(logits, dim=-1).reshape(-1, 1000).numpy()
    columns = effnet.class_map.columns
    expected = probs @ effnet.class_map.dense.astype(np.float64)  # the used columns
    assert enc.grid == tuple(feats.shape[1:]) == (7, 10)
    assert np.abs(enc.unit_weights[:, columns] - expected).max() < 1e-5
    assert np.abs(enc.weights[columns] - expected.max(axis=0)).max() < 1e-5
    unused = np.ones(len(effnet.vocab), dtype=bool)
    unused[columns] = False
    assert not enc.unit_weights[:, unused].any() and not enc.weights[unused].any()
    # global average pool of the per-cell logits is the standard classifier output
    with torch.inference_mode():
        standard = effnet.network(tensor[None])[0].double().numpy()
    assert np.abs(logits.mean(dim=(0, 1)).numpy() - standard).max() < 1e-4


def test_batched_equals_one_at_a_time(effnet, photos):
    """Mixed sizes in one call: grouped by size, returned in input order, same rows."""
    from PIL import ImageOps

    images = [
        photos["chelsea"],
        photos["coffee"].resize((200, 400)),
        ImageOps.mirror(photos["chelsea"]),
    ]
    batched = effnet.encode_images(images)
    assert [b.grid for b in batched] == [(7, 11), (14, 7), (7, 11)]
    for b, image in zip(batched[1:], images[1:], strict=True):
        single = effnet.encode_images([image])[0]
        assert np.abs(b.unit_weights - single.unit_weights).max() < 1e-4
    no_units = effnet.encode_images(images[:1], keep_units=False)[0]
    assert no_units.unit_weights is None
    assert np.abs(no_units.weights - batched[0].weights).max() < 1e-4
    assert np.abs(batched[0].weights - batched[2].weights).max() > 1e-3  # not one image twice


def test_class_map_names_cats_and_coffee(effnet):
    vocab = effnet.vocab
    full = effnet.class_map.full(len(vocab))
    assert full.shape == (1000, len(vocab)) and full.max() == pytest.approx(1.0)
    for cls in CAT_CLASSES:
        assert full[cls, vocab.index("cat")] > 0.3
    assert full[ESPRESSO, vocab.index("coffee")] > 0.3
    assert effnet.vocab is not None and len(vocab) == 30522


def test_class_map_cache_round_trip(splade, tmp_path):
    classes = [
        ImageNetClass(0, "tabby", ("tabby cat", "tabby"), "A domestic cat with stripes."),
        ImageNetClass(1, "espresso", ("espresso",), "A small serving of concentrated coffee."),
        ImageNetClass(2, "goldfish", ("goldfish",), "A small ornamental carp."),
    ]
    first = cached_class_vocab_map(splade, classes, 8, tmp_path)
    files = list(tmp_path.glob("*.npz"))
    assert len(files) == 1
    again = cached_class_vocab_map(splade, classes, 8, tmp_path)
    assert np.array_equal(first.columns, again.columns) and np.array_equal(first.dense, again.dense)
    cached_class_vocab_map(
        splade, [*classes[:2], classes[2].__class__(2, "tench", ("tench",), "")], 8, tmp_path
    )
    assert len(list(tmp_path.glob("*.npz"))) == 2  # other inputs, other key
    assert ((first.dense > 0).sum(axis=1) <= 8).all()
    # a damaged cache file is a miss: rebuilt, same map
    files[0].write_bytes(b"not an npz")
    rebuilt = cached_class_vocab_map(splade, classes, 8, tmp_path)
    assert np.array_equal(rebuilt.dense, first.dense)


def test_input_size_keeps_ratio():
    assert input_size(451, 300) == ((352, 224), False)
    assert input_size(300, 600) == ((224, 448), False)
    assert input_size(1, 1) == ((224, 224), False)
    assert input_size(2000, 100) == ((448, 224), True)


def test_loader_names_the_bad_key(tmp_path):
    state = EfficientNetLite0().state_dict()
    missing = dict(state)
    missing.pop("_blocks.7._depthwise_conv.weight")
    torch.save(missing, tmp_path / "missing.pth")
    with pytest.raises(EncoderLoadError, match=r"_blocks\.7\._depthwise_conv\.weight"):
        load_lite0_state(tmp_path / "missing.pth")
    wrong = dict(state)
    wrong["_fc.weight"] = torch.zeros(10, 1280)
    torch.save(wrong, tmp_path / "wrong.pth")
    with pytest.raises(EncoderLoadError, match=r"_fc\.weight.*\(10, 1280\)"):
        load_lite0_state(tmp_path / "wrong.pth")
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(EncoderLoadError, match="junk.pth"):
        load_lite0_state(tmp_path / "junk.pth")


def test_patch_classes_localise(effnet, photos):
    """The cat's patches name cat classes; a plain white margin does not."""
    canvas = Image.new("RGB", (600, 300), (255, 255, 255))
    canvas.paste(photos["chelsea"].resize((300, 300)), (0, 0))
    per_patch = patch_classes(effnet, canvas, k=1)
    rows, cols = 7, 14
    assert len(per_patch) == rows * cols
    centre = per_patch[3 * cols + 3][0]
    assert centre.index in CAT_CLASSES | {287}  # 287 = lynx, a frequent runner-up
    far_right = [per_patch[r * cols + cols - 1][0].index for r in range(rows)]
    assert not set(far_right) & CAT_CLASSES
