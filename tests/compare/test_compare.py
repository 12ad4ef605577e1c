"""Compare two encoders (or one at two gate k) on a text, an image and stored collections.

The second encoders are built here once per session: a splade-tiny variant (its config,
tokenizer and weights with a perturbed MLM head, saved as a local masked-LM directory) and
a tiny random VDR cross-modal checkpoint (another vocabulary, another patch grid). Every
reference below is computed independently of ``analysis.compare``: gates by sorting,
Spearman by ranking with pandas, rankings by brute-force dense products.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.store import open_index
from lexlens.analysis.compare.compare import compare, compare_encodings
from lexlens.analysis.compare.compare_collections import compare_indexes
from lexlens.analysis.compare.regate import regated_index
from lexlens.analysis.core.outputs import json_text
from lexlens.analysis.core.vocabulary import is_special_token
from lexlens.analysis.deviation.deviation import deviation_of_index
from lexlens.models import InputError, ModalityError, load_encoder
from tests.helpers import close_to, formula_cells, model_tolerance

TEXT = "a dog running on the beach at sunset"
QUERY = "dog"  # also a label of the sample texts: both rankings get IR metrics
TEXTS = [
    ("a", "a dog running on the beach", "dog|beach"),
    ("b", "a dog sleeping in the park", "dog|park"),
    ("c", "a cat on the beach", "cat|beach"),
    ("d", "a cat in the snow", "cat|snow"),
    ("e", "two dogs playing with a ball on the grass", "dog|park"),
]


# ----------------------------------------------------------------------------- models
def build_variant(root: Path) -> Path:
    """splade-tiny with a perturbed MLM head (transform and bias), as a local directory."""
    import torch
    from safetensors.torch import load_file, save_file

    from lexlens.models.packaged import splade_tiny_dir

    out = root / "splade-variant"
    if (out / "model.safetensors").exists():
        return out
    src = splade_tiny_dir()
    out.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(src / name, out / name)
    state = load_file(str(src / "model.safetensors"))
    g = torch.Generator().manual_seed(0)
    w = state["cls.predictions.transform.dense.weight"]
    state["cls.predictions.transform.dense.weight"] = w + 0.5 * w.std() * torch.randn(
        w.shape, generator=g
    )
    b = state["cls.predictions.bias"]
    state["cls.predictions.bias"] = b + 0.5 * torch.randn(b.shape, generator=g)
    save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"))
    return out


def build_vdr(root: Path) -> Path:
    """A tiny random VDR cross-modal checkpoint (27,623 terms, a 4×4 patch grid)."""
    from tests.models.test_vdr import TINY_VIT, bert_tower, text_cfg, vit_tower, write_checkpoint

    out = root / "vdr-crossmodal"
    if (out / "config.json").exists():
        return out
    config = {
        "encoder_q": text_cfg("vdr_crossmodal_text", max_len=32),
        "encoder_p": {
            "type": "vdr_crossmodal_image",
            "tokenizer_id": "bert-base-uncased",
            "topk": 768,
            **TINY_VIT,
        },
        "shared_encoder": False,
        "max_len": 512,
    }
    towers = {"encoder_q": bert_tower(11), "encoder_p": vit_tower(12)}
    return write_checkpoint(out, config, towers, "safetensors")


def thumbnail(root: Path, name: str = "coffee.png", size: int = 160) -> Path:
    """A small copy of a scikit-image photo (fast to encode)."""
    from PIL import Image

    from tests.helpers import skimage_path

    out = root / f"{Path(name).stem}_small.png"
    if not out.exists():
        image = Image.open(skimage_path(name)).convert("RGB")
        image.thumbnail((size, size))
        image.save(out)
    return out


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "compare-models"


@pytest.fixture(scope="session")
def variant_dir(models_dir) -> Path:
    return build_variant(models_dir)


@pytest.fixture(scope="session")
def variant(variant_dir):
    return load_encoder(str(variant_dir), device="cpu")


@pytest.fixture(scope="session")
def vdr_dir(models_dir) -> Path:
    return build_vdr(models_dir)


@pytest.fixture(scope="session")
def vdr(vdr_dir):
    return load_encoder(str(vdr_dir), device="cpu")


@pytest.fixture(scope="session")
def photo(models_dir) -> Path:
    models_dir.mkdir(parents=True, exist_ok=True)
    return thumbnail(models_dir)


@pytest.fixture(scope="session")
def text_source(models_dir) -> Path:
    models_dir.mkdir(parents=True, exist_ok=True)
    path = models_dir / "texts.csv"
    lines = ["id,text,labels"] + [f"{i},{t},{lab}" for i, t, lab in TEXTS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def text_indexes(models_dir, text_source, splade, variant) -> dict[str, Path]:
    """The same texts indexed by splade-tiny (gate 768 and 3) and by the variant (768)."""
    out = {}
    specs = {"a": "splade-tiny", "b": str(variant.source), "a3": "splade-tiny"}
    for name, encoder, k in (("a", splade, 768), ("b", variant, 768), ("a3", splade, 3)):
        path = models_dir / f"texts-{name}"
        build_index(encoder, text_source, path, gate_k=k, encoder_spec=specs[name])
        out[name] = path
    return out


# ----------------------------------------------------------------------------- references
def ref_gate(weights: np.ndarray, own: set[int], k: int) -> np.ndarray:
    """E = V ⊙ G by sorting: the k largest weights and the input's own token ids."""
    keep = np.zeros(weights.shape[0], dtype=bool)
    if k < 0:
        keep[:] = True
    else:
        keep[np.argsort(-weights, kind="stable")[:k]] = True
        keep[list(own)] = True
    return np.where(keep, weights, 0).astype(np.float32)


def own_ids(encoding, vocab: list[str]) -> set[int]:
    tokens = {u for u in encoding.units if not is_special_token(u)}
    return {i for i, t in enumerate(vocab) if t in tokens}


def active(gated: np.ndarray, vocab: list[str]) -> dict[str, float]:
    return {
        vocab[i]: float(gated[i])
        for i in np.flatnonzero(gated > 0)
        if not is_special_token(vocab[i])
    }


def ref_spearman(a: list[float], b: list[float]) -> float:
    ranks = pd.DataFrame({"a": a, "b": b}).rank(method="average")
    return float(np.corrcoef(ranks["a"], ranks["b"])[0, 1])


def ref_text_sides(encoders, ks, text=TEXT):
    out = []
    for encoder, k in zip(encoders, ks, strict=True):
        enc = encoder.encode_texts([text])[0]
        out.append(active(ref_gate(enc.weights, own_ids(enc, encoder.vocab), k), encoder.vocab))
    return out


def brute_force(ix, q: np.ndarray, n: int) -> list[tuple[str, float]]:
    ids = [str(x) for x in ix.column("id")]
    scores = [
        float(np.dot(q.astype(np.float64), ix.vector(i).astype(np.float64))) for i in range(len(ix))
    ]
    order = sorted((i for i in range(len(ids)) if scores[i] != 0), key=lambda i: (-scores[i], i))
    return [(ids[i], scores[i]) for i in order[:n]]


def brute_scores(expected: list[tuple[str, float]]):
    """The brute-force scores as the hits may equal them: the products of non-negative
    weights, so a score is its own Σ|terms| (the list shares its largest's tolerance)."""
    scores = [x for _, x in expected]
    return close_to(scores, terms=max(scores, default=0.0))


def query_vector(encoder, k: int, text: str = QUERY) -> np.ndarray:
    enc = encoder.encode_texts([text])[0]
    return ref_gate(enc.weights, own_ids(enc, encoder.vocab), k)


# ----------------------------------------------------------------------------- one text
def test_text_two_encoders_match_an_independent_reference(splade, variant, cli, variant_dir):
    result = compare(splade, variant, text=TEXT, top=200)
    wa, wb = ref_text_sides([splade, variant], [768, 768])
    terms = result.terms
    shared = {r["token"]: (r["weight_a"], r["weight_b"]) for r in terms.shared}
    assert set(shared) == wa.keys() & wb.keys()
    assert {r["token"] for r in terms.only_a} == wa.keys() - wb.keys()
    assert {r["token"] for r in terms.only_b} == wb.keys() - wa.keys()
    assert terms.only_a and terms.only_b  # the variant really differs
    top_a, top_b = max(wa.values()), max(wb.values())  # each weight's scale (model_tolerance)
    for token, (x, y) in shared.items():
        assert x == close_to(wa[token], terms=top_a) and y == close_to(wb[token], terms=top_b)
    tokens = sorted(shared)
    rho = ref_spearman([wa[t] for t in tokens], [wb[t] for t in tokens])
    assert terms.rank_correlation["rho"] == pytest.approx(rho, abs=1e-9)
    assert terms.rank_correlation["n"] == len(tokens) and rho < 0.999
    assert terms.counts == {
        "active_a": len(wa),
        "active_b": len(wb),
        "shared": len(tokens),
        "only_a": len(wa) - len(tokens),
        "only_b": len(wb) - len(tokens),
        "only_a_no_counterpart": 0,
        "only_b_no_counterpart": 0,
    }
    assert result.vocabulary["same"] and result.notes == []
    # The merged view joins pieces into words; "beach" is shared and weighs what it weighs raw.
    merged = {r["token"]: r for r in terms.merged["shared"]}
    assert merged["beach"]["weight_a"] == close_to(wa["beach"], terms=top_a)
    # The CLI prints exactly this document.
    run = cli(
        "compare",
        "--encoder",
        "splade-tiny",
        "--encoder",
        variant_dir,
        "--text",
        TEXT,
        "--top",
        "200",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == json_text(result) + "\n"


def test_one_encoder_at_two_gate_k(splade):
    result = compare(splade, text=TEXT, gate_k=[768, 3], top=200)
    wa, wb = ref_text_sides([splade, splade], [768, 3])
    assert {r["token"] for r in result.terms.shared} == set(wb) and len(wb) < len(wa)
    assert result.terms.only_b == []
    for row in result.terms.only_a:  # gated out of B, not absent from it
        assert row["weight_b"] == 0.0 and row["ungated_weight_b"] == pytest.approx(row["weight_a"])
        assert row["in_vocab_b"] and row["rank_a"] > 3
    assert result.terms.rank_correlation["rho"] == pytest.approx(1.0)
    assert (result.a["gate_k"], result.b["gate_k"]) == (768, 3)


def test_fewer_than_two_shared_terms_give_null_and_a_note(splade):
    # gate 0 keeps the text's own tokens only: one word, one term on side B.
    result = compare(splade, text="cat", gate_k=[768, 0])
    rc = result.terms.rank_correlation
    assert result.terms.counts["shared"] <= 1
    assert rc["rho"] is None and rc["p_value"] is None and "at least two" in rc["note"]
    assert any(n.startswith("rank correlation:") for n in result.notes)
    assert "NaN" not in json_text(result)
    # Two or more shared terms give ρ; under five, with a note that it rests on few points.
    few = compare(splade, text="cat", gate_k=[768, 2]).terms.rank_correlation
    assert few["n"] == 2 and abs(few["rho"]) == pytest.approx(1.0)
    assert "very few points" in few["note"]


def test_different_vocabularies_are_compared_on_shared_tokens(splade, vdr):
    text = "the ° symbol and ½ cup"  # two tokens VDR's vocabulary leaves out
    result = compare(splade, vdr, text=text, gate_k=[768, 40], top=500)
    v = result.vocabulary
    sa, sb = set(splade.vocab), set(vdr.vocab)
    assert v == {
        "same": False,
        "size_a": 30522,
        "size_b": len(vdr.vocab),
        "shared": len(sa & sb),
        "only_a": len(sa - sb),
        "only_b": len(sb - sa),
    }
    assert len(vdr.vocab) == 27623 and v["only_a"] > 0
    assert any("different vocabularies" in n and f"{v['only_a']:,}" in n for n in result.notes)
    wa, wb = ref_text_sides([splade, vdr], [768, 40], text)
    terms = result.terms
    assert {r["token"] for r in terms.shared} == wa.keys() & wb.keys()
    missing = [r for r in terms.only_a if r["token"] not in sb]
    assert terms.counts["only_a_no_counterpart"] == len(missing) == 2
    assert {r["token"] for r in missing} == {"°", "½"}
    assert all(r["weight_b"] is None and not r["in_vocab_b"] for r in missing)
    tokens = sorted(wa.keys() & wb.keys())
    if len(tokens) >= 2:
        rho = ref_spearman([wa[t] for t in tokens], [wb[t] for t in tokens])
        assert terms.rank_correlation["rho"] == pytest.approx(rho, abs=1e-9)


# ----------------------------------------------------------------------------- one image
@pytest.fixture(scope="module")
def coffee(effnet, photo):
    """The photo through efficientnet-lite0-lexical (encoded once for this module)."""
    return effnet.encode_images([Image.open(photo)])[0]


def test_image_two_gate_k_group_and_heatmap(effnet, photo, coffee):
    from lexlens.analysis.lexical.patches import box_to_patches

    box = (0.5, 0.0, 1.0, 1.0)
    result = compare(
        effnet, image=photo, name="coffee_small.png", gate_k=[768, 64], box=box, top=64
    )
    enc = coffee
    weights = np.sort(enc.weights[enc.weights > 0])[::-1]
    assert result.terms.counts["active_a"] == min(768, weights.size)
    assert result.terms.counts["active_b"] == 64 and result.terms.counts["only_b"] == 0
    assert result.a["grid"] == result.b["grid"] == list(enc.grid)
    # The patch group: the cells under the box, pooled by max, gated at each side's k.
    cells = box_to_patches(enc.grid, box, crop_box=enc.crop_box)
    pooled = enc.unit_weights[cells].max(axis=0)
    group = result.group
    assert group["cells_a"] == group["cells_b"] == [enc.units[i] for i in cells]
    shared = sorted((r["weight_b"] for r in group["terms"].shared), reverse=True)
    assert group["terms"].counts["active_b"] == 64
    assert np.allclose(
        shared, np.sort(pooled)[::-1][:64], rtol=0, atol=model_tolerance(pooled.max())
    )
    # B keeps a subset of A's terms: no word is B's alone in the merged view either, even
    # where B keeps a piece of a word A spells whole.
    assert group["terms"].merged["only_b"] == [] == result.terms.merged["only_b"]
    # The heatmap: the same term on both sides, per-patch weights before pooling.
    heat = result.heatmap
    assert heat["a"]["term"] == heat["b"]["term"]
    assert heat["word"] == result.terms.merged["shared"][0]["token"]
    index = {t: i for i, t in enumerate(effnet.vocab)}
    columns = [index[c] for c in heat["a"]["columns"]]
    expected = enc.unit_weights[:, columns].max(axis=1).reshape(enc.grid)
    scale = enc.unit_weights.max()
    assert np.allclose(heat["a"]["values"], expected, rtol=0, atol=model_tolerance(scale))
    assert heat["a"]["grid"] == list(enc.grid)


def test_image_two_encoders_with_different_grids(effnet, vdr, photo, coffee):
    result = compare(
        effnet, vdr, image=photo, name="coffee_small.png", box=(0, 0, 0.5, 0.5), term="cup"
    )
    assert result.a["grid"] != result.b["grid"] and result.b["grid"] == [4, 4]
    assert not result.vocabulary["same"]
    g = result.group
    assert g["cells_b"] == ["r0c0", "r0c1", "r1c0", "r1c1"]
    assert len(g["cells_a"]) != len(g["cells_b"])
    heat = result.heatmap
    assert heat["word"] == "cup" and heat["a"]["term"] == heat["b"]["term"] == "cup"
    assert np.asarray(heat["b"]["values"]).shape == (4, 4)
    vdr_coffee = vdr.encode_images([Image.open(photo)])[0]
    with pytest.raises(InputError, match="grid"):
        compare_encodings(effnet, coffee, vdr, vdr_coffee, cells=["r0c0"])


# ----------------------------------------------------------------------------- collections
def _summary(part) -> dict:
    return {
        "exact": part.exact,
        "semantic": part.semantic,
        "flops": part.flops,
        "dims": part.mean_active_dims,
        "n": part.n,
    }


def _summary_of(d: dict) -> dict:
    return {
        "exact": d["exact_at_k"],
        "semantic": d["semantic_at_k"],
        "flops": d["flops"],
        "dims": d["mean_active_dims"],
        "n": d["n"],
    }


@pytest.fixture(scope="module")
def two_indexes(splade, variant, text_indexes):
    """splade-tiny's index against the variant's, both of the same texts."""
    return compare_indexes(
        text_indexes["a"],
        text_indexes["b"],
        encoder_a=splade,
        encoder_b=variant,
        query=QUERY,
        top=3,
    )


@pytest.fixture(scope="module")
def regated(splade, text_indexes):
    """splade-tiny's index at its own gate k (768) against itself re-gated at 3."""
    return compare_indexes(text_indexes["a"], encoder_a=splade, gate_k=[768, 3], query=QUERY, top=3)


def test_two_indexes_side_by_side(two_indexes, splade, variant, text_indexes, cli):
    col = two_indexes.collection
    ref = deviation_of_index(text_indexes["b"], variant, max_rows=0)
    assert _summary_of(col["deviation"]["b"]["sets"]["texts"]) == _summary(ref.captions)
    for s, name, encoder in (("a", "a", splade), ("b", "b", variant)):
        hits = col["search"][f"hits_{s}"]
        expected = brute_force(open_index(text_indexes[name]), query_vector(encoder, 768), 3)
        assert [h["id"] for h in hits] == [i for i, _ in expected]
        assert [h["score"] for h in hits] == brute_scores(expected)
    search = col["search"]
    assert {h["id"] for h in search["hits"]} == {
        h["id"] for h in search["hits_a"] + search["hits_b"]
    }
    for hit in search["hits"]:
        for s in ("a", "b"):  # every side's contributions sum to its score
            total = sum(c["contribution"] for c in hit[f"contributions_{s}"])
            assert total == pytest.approx(hit[f"score_{s}"], rel=1e-9, abs=1e-12)
        changes = sum(c["change"] for c in hit["changed_terms"]) + hit["other_change"]
        assert changes == pytest.approx(hit["score_b"] - hit["score_a"], abs=1e-9)
        assert all(c["change"] != 0 for c in hit["changed_terms"])
        words = hit["changed_words"]  # the same changes read as words, largest first
        assert [abs(w["change"]) for w in words] == sorted(
            (abs(w["change"]) for w in words), reverse=True
        )
        assert len(words) <= len(hit["changed_terms"]) or hit["other_change"] != 0
        in_a = hit["rank_a"] is not None and hit["rank_a"] <= 3
        in_b = hit["rank_b"] is not None and hit["rank_b"] <= 3
        expected_status = (
            ("same" if hit["rank_a"] == hit["rank_b"] else "moved")
            if in_a and in_b
            else ("left" if in_a else "entered")
        )
        assert hit["status"] == expected_status
    # "dog" is a label of the texts: both rankings get the IR metrics, as ir-measures gives
    # them for each side's top 10 against the three items labelled dog.
    import ir_measures
    from ir_measures import AP, RR, nDCG

    assert search["metrics"]["relevant"] == 3
    qrels = {"q": {i: 1 for i, _, labels in TEXTS if "dog" in labels.split("|")}}
    for s, name, encoder in (("a", "a", splade), ("b", "b", variant)):
        top10 = brute_force(open_index(text_indexes[name]), query_vector(encoder, 768), 10)
        run = {"q": {i: float(10 - r) for r, (i, _) in enumerate(top10)}}
        measures = {"RR@1": RR @ 1, "RR@10": RR @ 10, "nDCG@10": nDCG @ 10, "AP@10": AP @ 10}
        expected = ir_measures.calc_aggregate(list(measures.values()), qrels, run)
        assert search["metrics"][s] == pytest.approx(
            {label: expected[m] for label, m in measures.items()}, abs=1e-12
        )
    top_a = {t["token"] for t in col["vocabulary"]["top_terms"] if t["top_a"]}
    assert "dog" in top_a
    # The CLI prints the same document (default text encoders: each index's own).
    run = cli(
        "compare",
        "--index",
        text_indexes["a"],
        "--index",
        text_indexes["b"],
        "--query",
        QUERY,
        "--top",
        "3",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == json_text(two_indexes) + "\n"


def test_regated_index_equals_one_built_at_that_k(regated, splade, text_indexes):
    base, direct = open_index(text_indexes["a"]), open_index(text_indexes["a3"])
    view = regated_index(base, 3, splade)
    for i in range(len(base)):
        assert np.array_equal(view.vector(i), direct.vector(i))
    assert np.allclose(view.norms, direct.norms)
    ref = deviation_of_index(direct, splade, max_rows=0)
    dev = regated.collection["deviation"]["b"]["sets"]["texts"]
    assert _summary_of(dev) == _summary(ref.captions)
    hits = regated.collection["search"]["hits_b"]
    expected = brute_force(direct, query_vector(splade, 3), 3)
    assert [h["id"] for h in hits] == [i for i, _ in expected]
    assert [h["score"] for h in hits] == brute_scores(expected)
    assert regated.b["regated"] and not regated.a["regated"]
    assert any("re-gated at k = 3" in n for n in regated.notes)


def test_regated_image_index(effnet, splade, models_dir, photo, coffee):
    """Images have no own tokens: their re-gated vectors are the 32 largest weights of V."""
    names = [photo.name, thumbnail(models_dir, "chelsea.png", size=96).name]
    captions = ["a cup of coffee on a saucer", "a cat looking up"]
    source = models_dir / "photos.csv"
    source.write_text(
        "id,image,caption\n"
        + "".join(f"{Path(n).stem},{n},{c}\n" for n, c in zip(names, captions, strict=True)),
        encoding="utf-8",
    )
    build_index(effnet, source, models_dir / "photos-768", gate_k=768)
    base = open_index(models_dir / "photos-768")
    view = regated_index(base, 32)
    _, vals = view.row(0)
    top = np.sort(coffee.weights)[::-1][:32]
    assert np.allclose(np.sort(vals)[::-1], top, rtol=0, atol=model_tolerance(top[0]))
    result = compare_indexes(base, encoder_a=splade, gate_k=[768, 32], query="coffee", top=2)
    dev = result.collection["deviation"]["b"]
    assert dev["gate_k"] == 32 and dev["sets"]["images"]["mean_active_dims"] == 32
    assert dev["sets"]["captions"]["n"] == 2 and dev["flops_captions_images"] is not None
    assert result.collection["search"]["hits_b"][0]["id"] == "coffee_small"
    assert any("images have no own tokens" in n for n in result.notes)


# ----------------------------------------------------------------------------- bad input
def test_an_encoder_that_cannot_take_the_input_is_one_line_before_any_encoding(
    cli, photo, monkeypatch
):
    from lexlens.models.splade import SpladeEncoder

    calls = []
    original = SpladeEncoder.encode_texts
    monkeypatch.setattr(
        SpladeEncoder,
        "encode_texts",
        lambda self, *a, **k: calls.append(1) or original(self, *a, **k),
    )
    run = cli("compare", "--encoder", "splade-tiny", "--encoder", "minilm-pq", "--text", TEXT)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1
    assert run.stderr.startswith("lexlens compare: error: comparing encoders on a text needs")
    assert "'minilm-pq'" in run.stderr and calls == []
    run = cli(
        "compare",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--encoder",
        "splade-tiny",
        "--image",
        photo,
    )
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert "comparing encoders on an image needs an encoder with image" in run.stderr
    assert "'splade-tiny'" in run.stderr


def test_a_loaded_encoder_without_the_modality_is_refused(splade, variant, photo):
    with pytest.raises(ModalityError, match="on an image"):
        compare(variant, splade, image=photo)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--encoder", "splade-tiny", "--text", TEXT, "--gate-k", "64"],
            "same encoder ('splade-tiny') at the same gate k",
        ),
        (
            ["--encoder", "splade-tiny", "--text", TEXT, "--box", "0,0,1,1"],
            "--box applies to --image",
        ),
        (["--encoder", "splade-tiny", "--text", "  ", "--gate-k", "3"], "the text is empty"),
        (["--encoder", "a", "--encoder", "b", "--encoder", "c", "--text", TEXT], "at most twice"),
        (["--encoder", "splade-tiny", "--text", TEXT, "--gate-k", "-2"], "--gate-k must be"),
        (
            ["--encoder", "splade-tiny", "--text", TEXT, "--query", "x"],
            "--query applies to --index",
        ),
    ],
)
def test_bad_options_are_one_line(cli, args, message):
    run = cli("compare", *args)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and message in run.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--top", "0"], "--top must be an integer from 1 to 10,000, not 0"),
        (["--gate-k", "x"], "--gate-k must be -1 (every dimension)"),
        (
            ["--gate-k", "768", "--gate-k", "8", "--gate-k", "3"],
            "--gate-k must be one gate k for both sides or two (A's, B's), not 3 values",
        ),
        (["--topk", "8"], "--topk is now --gate-k"),
        (["--k", "5"], "--k applies to --index only"),
        (["--query-mode", "bow"], "--query-mode applies to --index only"),
        (["--term", "dog"], "--term applies to --image only"),
    ],
)
def test_traceback_flags_are_checked_by_their_declarations(cli, args, message):
    run = cli("compare", "--encoder", "splade-tiny", "--text", TEXT, *args)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and message in run.stderr, run.stderr


def test_traceback_index_flags_are_checked_by_their_declarations(cli, text_indexes):
    for args, message in (
        (["--k", "0"], "--k must be an integer from 1 to 1,000, not 0"),
        (["--query-mode", "dense"], "--query-mode must be one of parametric, bow, not 'dense'"),
        (["--query", " "], "--query is empty"),
        (["--box", "0,0,1,1"], "--box applies to --image only"),
    ):
        run = cli(
            "compare", "--index", text_indexes["a"], "--gate-k", "768", "--gate-k", "3", *args
        )
        assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
        assert message in run.stderr, run.stderr


def test_silent_wrong_bow_queries_are_the_bag_of_their_tokens_on_both_sides(splade, text_indexes):
    """Query mode bow: each side searches VDR's binary bag of the query's own tokens (not
    gated), against its own documents (B's re-gated at 3, as an index built at 3)."""
    result = compare_indexes(
        text_indexes["a"], encoder_a=splade, gate_k=[768, 3], query=QUERY, query_mode="bow", top=3
    )
    encoding = splade.encode_texts([QUERY])[0]
    bag = np.zeros(len(splade.vocab), dtype=np.float32)
    bag[sorted(own_ids(encoding, splade.vocab))] = 1.0
    if splade.bow_normalize:
        bag /= np.linalg.norm(bag)
    search = result.collection["search"]
    for s, name in (("a", "a"), ("b", "a3")):
        expected = brute_force(open_index(text_indexes[name]), bag, 3)
        assert [h["id"] for h in search[f"hits_{s}"]] == [i for i, _ in expected]
        assert [h["score"] for h in search[f"hits_{s}"]] == brute_scores(expected)
    parametric = compare_indexes(
        text_indexes["a"], encoder_a=splade, gate_k=[768, 3], query=QUERY, top=3
    ).collection["search"]
    assert [h["score"] for h in parametric["hits_a"]] != [h["score"] for h in search["hits_a"]]
    assert any("query mode bow" in n for n in result.notes)


def test_bad_indexes_are_one_line(cli, text_indexes, models_dir, splade):
    other = models_dir / "other.csv"
    other.write_text("id,text\nx,a red bus\ny,a green tram\n", encoding="utf-8")
    build_index(splade, other, models_dir / "other-index", gate_k=768)
    cases = [
        (["--index", text_indexes["a"], "--index", models_dir / "other-index"], "same source"),
        (
            ["--index", text_indexes["a3"], "--gate-k", "3", "--gate-k", "10"],
            "re-gate exactly only",
        ),
        (["--index", text_indexes["a"], "--gate-k", "768"], "same index"),
        (
            [
                "--index",
                text_indexes["a"],
                "--gate-k",
                "3",
                "--encoder",
                "efficientnet-lite0-lexical",
            ],
            "comparing encoders on a stored collection needs",
        ),
        (["--index", models_dir / "missing", "--gate-k", "3"], "not found"),
    ]
    for args, message in cases:
        run = cli("compare", *args)
        assert run.returncode == 2, args
        assert run.stderr.count("\n") == 1 and message in run.stderr, run.stderr


# ----------------------------------------------------------------------------- report
def test_report_files_hold_the_same_numbers(cli, tmp_path, splade):
    text = "=SUM(A1) a giraffe on the beach"
    run = cli(
        "compare",
        "--encoder",
        "splade-tiny",
        "--text",
        text,
        "--gate-k",
        "768",
        "--gate-k",
        "4",
        "--out",
        tmp_path,
        "--json",
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "compare.json").read_text(encoding="utf-8") == run.stdout
    document = run.json()
    html = (tmp_path / "compare.html").read_text(encoding="utf-8")
    from lexlens.analysis.render.html import num

    rho = document["terms"]["rank_correlation"]["rho"]
    assert f"<b>{num(rho)}</b>" in html
    counts = document["terms"]["counts"]
    assert f'<td class="num">{counts["shared"]}</td>' in html
    for row in document["terms"]["merged"]["shared"]:
        if row["token"].isalpha():
            assert f"<td>{row['token']}</td>" in html
    assert "<script" not in html and "<td>giraffe</td>" in html
    with open(tmp_path / "compare_terms.csv", encoding="utf-8", newline="") as handle:
        cells = [c for row in csv.reader(handle) for c in row]
    assert "giraffe" in cells
    assert not formula_cells(cells)


def test_index_report_renders(regated):
    files = regated.files()
    assert set(files) == {
        "compare.html",
        "compare.json",
        "compare_deviation.csv",
        "compare_vocabulary.csv",
        "compare_hits.csv",
    }
    html = files["compare.html"].decode()
    from lexlens.analysis.render.html import num

    exact = regated.collection["deviation"]["b"]["sets"]["texts"]["exact_at_k"]
    assert f'<td class="num">{num(exact)}</td>' in html and 'id="moved"' in html


def test_one_encoder_without_gates_compares_the_default_against_a_smaller_gate(cli, splade):
    """The page and the command share one rule: A at 768, B at 8 terms for a text."""
    from lexlens.analysis.compare.options import SAME_ENCODER_GATE_B, default_gates

    assert default_gates("text", True) == (768, SAME_ENCODER_GATE_B["text"]) == (768, 8)
    assert default_gates("image", True) == (768, 64)
    assert default_gates("text", False) == (768, 768)
    assert default_gates("index", True, (768, 768), mean_active=41.0) == (768, 20)
    assert default_gates("index", True, (10, 10), mean_active=41.0) == (10, 10)
    assert default_gates("index", False, (768, 30)) == (768, 30)
    run = cli("compare", "--encoder", "splade-tiny", "--text", TEXT, "--json")
    doc = json.loads(run.stdout)
    assert (doc["a"]["gate_k"], doc["b"]["gate_k"]) == (768, 8)
    assert doc["terms"]["counts"]["active_b"] <= 8 < doc["terms"]["counts"]["active_a"]


def test_a_checkpoint_folder_says_where_it_came_from(tmp_path):
    """A local directory's encoder is named with its folder and the path it was read from
    (a folder called "model" alone says nothing); registry encoders carry no path."""
    import shutil

    from lexlens.analysis.compare.compare import compare
    from lexlens.app.views.compare import side_title
    from lexlens.models.packaged import splade_tiny_dir

    folder = tmp_path / "runs" / "model"
    shutil.copytree(splade_tiny_dir(), folder)
    result = compare("splade-tiny", str(folder), text="a dog on a beach")
    assert "source" not in result.a and result.b["source"] == str(folder)
    assert side_title(result, "b") == f"B: model (from {folder}), gate k {result.b['gate_k']}"
