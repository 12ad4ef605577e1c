"""D2S heads (lsr-multimodal's layout) over dense feature files: the forward pass against an
independent one written here with plain tensor ops, terms of one vector, deviation of
stored dense features with captions, and bad heads and feature files.

The heads are random, in the published key names, with a small hidden size (32, the
published heads have 768) and 16-d features (published: 256).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from lexlens.analysis.datasets.feature_files import read_features
from lexlens.models import Capability, EncoderLoadError, InputError, load_encoder
from lexlens.models.text_io import load_bert_tokenizer
from tests.helpers import (
    app_page,
    click_and_wait,
    close_to,
    model_tolerance,
    one_line_error,
    page_result,
)

HIDDEN, DENSE, VOCAB = 32, 16, 30522
IDS = ["img-7", "img-9", "cap-3", "cap-4", "x"]


def head_state(seed: int = 0) -> dict[str, torch.Tensor]:
    """Random D2S weights; the projector bias pushes most scores below 0 (a sparse output)."""
    g = torch.Generator().manual_seed(seed)
    return {
        "proj.weight": torch.randn(HIDDEN, DENSE, generator=g) * 0.4,
        "proj.bias": torch.randn(HIDDEN, generator=g) * 0.1,
        "vocab_layer_norm.weight": 1 + 0.2 * torch.randn(HIDDEN, generator=g),
        "vocab_layer_norm.bias": 0.2 * torch.randn(HIDDEN, generator=g),
        "vocab_projector.weight": torch.randn(VOCAB, HIDDEN, generator=g) * 0.15,
        "vocab_projector.bias": torch.randn(VOCAB, generator=g) * 0.2 - 2.0,
    }


def write_head(path: Path, state=None, *, fmt: str = "safetensors", config: dict | None = None):
    """A head directory as ``save_pretrained`` writes it (``model.pt``: the older code)."""
    path.mkdir(parents=True, exist_ok=True)
    state = head_state() if state is None else state
    if fmt != "pt":
        cfg = {
            "architectures": ["D2SModel"],
            "model_type": "d2s",
            "dense_size": DENSE,
            "mlm_head": "distilbert-base-uncased",
            "torch_dtype": "float32",
            "transformers_version": "4.36.2",
        }
        (path / "config.json").write_text(json.dumps(cfg | (config or {})))
    if fmt == "safetensors":
        save_file({k: v.contiguous() for k, v in state.items()}, str(path / "model.safetensors"))
    elif fmt == "bin":
        torch.save(state, path / "pytorch_model.bin")
    else:
        torch.save(state, path / "model.pt")
    return path


def reference(state: dict[str, torch.Tensor], z: np.ndarray) -> np.ndarray:
    """log(1 + relu(W2 · LN(W1 z + b1) + b2)), LayerNorm written out (eps 1e-12)."""
    z = torch.as_tensor(z, dtype=torch.float64)
    s = {k: v.double() for k, v in state.items()}
    h = z @ s["proj.weight"].T + s["proj.bias"]
    mean = h.mean(dim=-1, keepdim=True)
    var = ((h - mean) ** 2).mean(dim=-1, keepdim=True)
    h = (h - mean) / torch.sqrt(var + 1e-12) * s["vocab_layer_norm.weight"]
    h = h + s["vocab_layer_norm.bias"]
    logits = h @ s["vocab_projector.weight"].T + s["vocab_projector.bias"]
    return torch.log1p(torch.clamp(logits, min=0)).numpy()


def reference_terms(state: dict[str, torch.Tensor], z: np.ndarray) -> np.ndarray:
    """The terms of each logit ``[n, VOCAB, HIDDEN + 1]`` (``h_j W2_ij`` and ``b2_i``): a
    weight ``log(1 + relu(logit))`` moves at most as far as its logit (slope ≤ 1)."""
    z = torch.as_tensor(z, dtype=torch.float64)
    s = {k: v.double() for k, v in state.items()}
    h = torch.nn.functional.layer_norm(
        z @ s["proj.weight"].T + s["proj.bias"],
        (HIDDEN,),
        s["vocab_layer_norm.weight"],
        s["vocab_layer_norm.bias"],
        eps=1e-12,
    )
    products = h[:, None, :] * s["vocab_projector.weight"][None]
    bias = s["vocab_projector.bias"].expand(len(z), -1)[..., None]
    return torch.cat([products, bias], dim=-1).numpy()


@pytest.fixture(scope="module")
def features() -> np.ndarray:
    return np.random.default_rng(3).standard_normal((len(IDS), DENSE)).astype(np.float32)


@pytest.fixture(scope="module")
def head_dir(tmp_path_factory) -> Path:
    return write_head(tmp_path_factory.mktemp("d2s") / "d2s-tiny")


@pytest.fixture(scope="module")
def head(head_dir):
    return load_encoder(str(head_dir), device="cpu")


@pytest.fixture(scope="module")
def tokenizer():
    return load_bert_tokenizer()


@pytest.fixture(scope="module")
def feature_files(tmp_path_factory, features) -> dict[str, Path]:
    """The same vectors as .npy (+ ids sidecar), .safetensors (+ ids) and published .parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("features")
    np.save(root / "feats.npy", features)
    (root / "feats.ids.txt").write_text("\n".join(IDS) + "\n")
    save_file({"image_embeds": torch.from_numpy(features)}, str(root / "vectors.safetensors"))
    (root / "ids.txt").write_text("\n".join(IDS))
    table = pa.table({"id": IDS, "emb": [row.astype(np.float64).tolist() for row in features]})
    pq.write_table(table, root / "img_embs.parquet")
    return {
        "npy": root / "feats.npy",
        "safetensors": root / "vectors.safetensors",
        "ids": root / "ids.txt",
        "parquet": root / "img_embs.parquet",
    }


# --- the head -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["safetensors", "bin", "pt"])
def test_forward_matches_an_independent_one(tmp_path, features, fmt):
    state = head_state(seed=1)
    enc = load_encoder(str(write_head(tmp_path / fmt, state, fmt=fmt)), device="cpu")
    assert enc.capabilities == frozenset({Capability.FEATURE_LEXICAL})
    assert enc.modalities == frozenset({"features"})
    assert enc.feature_dim == DENSE and len(enc.vocab) == VOCAB
    assert enc.vocab[2003] == "is" and enc.vocab[101] == "[CLS]"  # id i is WordPiece id i
    encodings = enc.encode_features(features)
    ours = np.stack([e.weights for e in encodings])
    want = reference(state, features)
    tolerance = model_tolerance(reference_terms(state, features), axis=-1)
    assert (np.abs(ours - want) <= tolerance).all()
    assert (want > 0).sum(axis=1).min() > 0 and (want > 0).mean() < 0.5  # sparse, not empty
    first = encodings[0]
    assert first.unit_weights.shape == (1, VOCAB) and first.units == ["vector"]
    assert first.input_ids is None and first.grid is None
    np.testing.assert_array_equal(first.unit_weights[0], first.weights)
    pooled = enc.encode_features(features[:2], keep_units=False)
    assert pooled[0].unit_weights is None
    assert (np.abs(pooled[1].weights - encodings[1].weights) <= tolerance[1]).all()


def test_static_embeddings_are_the_projector_rows(head, head_dir):
    table, tokens = head.static_embeddings()
    np.testing.assert_array_equal(table, head_state()["vocab_projector.weight"].numpy())
    assert tokens == head.vocab


def test_tokenize_texts_gives_the_bag_of_words(head, tokenizer):
    (enc,) = head.tokenize_texts(["A dog on a skateboard"])
    assert enc.units == tokenizer.convert_ids_to_tokens(
        tokenizer("A dog on a skateboard")["input_ids"]
    )
    assert enc.input_ids[0] == 101 and not enc.weights.any()


# --- terms --------------------------------------------------------------------------------


def _top_tokens(vector: np.ndarray, vocab: list[str], k: int) -> list[str]:
    special = {i for i, t in enumerate(vocab) if t.startswith("[") and t.endswith("]")}
    order = [int(i) for i in np.argsort(-vector, kind="stable") if int(i) not in special]
    return [vocab[i] for i in order[:k] if vector[i] > 0]


@pytest.mark.parametrize("kind", ["npy", "safetensors", "parquet"])
def test_terms_of_one_vector(cli, head_dir, head, feature_files, features, kind):
    args = ["terms", "--encoder", head_dir, "--features", feature_files[kind]]
    if kind == "safetensors":
        args += ["--ids", feature_files["ids"]]
    run = cli(*args, "--item", "cap-3", "--top", "6", "--json")
    assert run.returncode == 0, run.stderr
    out = run.json()
    assert out["input"] == {"features": feature_files[kind].name, "item": "cap-3"}
    assert out["encoder"] == "d2s-tiny"
    item = features[IDS.index("cap-3")][None]
    want, terms = reference(head_state(), item)[0], reference_terms(head_state(), item)[0]
    assert [t["token"] for t in out["terms"]] == _top_tokens(want, head.vocab, 6)
    index_of = {t: i for i, t in enumerate(head.vocab)}
    for t in out["terms"]:
        column = index_of[t["token"]]
        assert t["weight"] == close_to(want[column], terms=terms[column])
    assert all(t["from_unit"] == "vector" and not t["in_input"] for t in out["terms"])


def test_terms_use_case_same_as_cli(cli, head_dir, head, feature_files):
    from lexlens.analysis.core.outputs import json_text
    from lexlens.analysis.lexical.terms import terms

    run = cli(
        "terms", "--encoder", head_dir, "--features", feature_files["npy"], "--item", "x", "--json"
    )
    result = terms(head, features=str(feature_files["npy"]), item="x")
    assert json_text(result) + "\n" == run.stdout
    # Without an ids file (none beside it, none given) the row numbers stand in.
    table = read_features(feature_files["safetensors"])
    assert table.ids == ["0", "1", "2", "3", "4"] and table.id_source == "row numbers"
    assert read_features(feature_files["npy"]).id_source == "feats.ids.txt"


# --- deviation on stored dense features --------------------------------------------------


def _captions_for(head, features) -> list[str]:
    """Captions that share some, not all, of each vector's top terms."""
    captions = []
    for i, row in enumerate(reference(head_state(), features)):
        words = [t for t in _top_tokens(row, head.vocab, 30) if t.isalpha()][:3]
        captions.append(" ".join(["a photo of", *words, "and", "more"]) if i != 4 else "")
    return captions


@pytest.fixture(scope="module")
def feature_index(tmp_path_factory, head_dir, head, features, feature_files):
    """``lexlens index`` of the dense features (kind "features") with paired captions."""
    from lexlens.app.cli import main

    captions = _captions_for(head, features)
    root = tmp_path_factory.mktemp("ix")
    lines = ["id,caption"] + [f"{i},{c}" for i, c in zip(IDS, captions, strict=True) if c]
    (root / "captions.csv").write_text("\n".join(lines) + "\n")
    out = root / "feature-index"
    args = [
        "index",
        "--encoder",
        head_dir,
        "--source",
        feature_files["npy"],
        "--out",
        out,
        "--captions",
        root / "captions.csv",
        "--json",
    ]
    assert main([str(a) for a in args]) == 0
    return out, captions, root / "captions.csv"


def test_stored_features_index(head, feature_index, features, feature_files, tmp_path):
    from lexlens.analysis.collections.features_index import build_features_index
    from lexlens.analysis.collections.store import open_index

    index, captions, captions_file = feature_index
    ix = open_index(index)
    assert ix.modality == "features" and len(ix) == 5 and ix.vocab == head.vocab
    assert ix.manifest.source.kind == "features" and ix.manifest.gate_k == 768
    assert ix.manifest.encoder.capabilities == ("feature-lexical",)
    meta = ix.meta(range(5))
    assert [m["id"] for m in meta] == IDS and {m["kind"] for m in meta} == {"features"}
    assert [m["captions"] for m in meta] == [[c] if c else [] for c in captions]
    want = reference(head_state(), features)
    for i in range(5):  # fewer than 768 positive terms: the gate keeps them all
        assert np.abs(ix.vector(i) - want[i]).max() < 1e-5
    assert [m["text"] for m in meta] == captions  # the first caption (none for "x")
    again = build_features_index(
        head, feature_files["npy"], index, captions=captions_file, encoder_spec="d2s-tiny"
    )
    assert again.up_to_date and again.encoded == 0
    np.save(tmp_path / "f8.npy", np.ones((2, 8), np.float32))
    with pytest.raises(InputError, match="holds 8-d vectors but the head 'd2s-tiny' expects 16-d"):
        build_features_index(head, tmp_path / "f8.npy", tmp_path / "ix8")
    assert not (tmp_path / "ix8").exists()


def test_bag_of_words_search_on_stored_features(cli, feature_index, head, tokenizer, features):
    index, captions, _ = feature_index
    query = captions[1].split()[-3]  # one of item img-9's top terms
    run = cli("search", "--index", index, "--query", query, "--query-mode", "bow", "--json")
    assert run.returncode == 0, run.stderr
    out = run.json()
    assert out["settings"]["query_encoder"] == "d2s-tiny"  # the index's own head, no backbone
    # By hand: a binary bag of the query's tokens · each stored vector.
    ids = [head.vocab.index(t) for t in dict.fromkeys(tokenizer.tokenize(query))]
    scores = reference(head_state(), features)[:, ids].sum(axis=1)
    ranked = [IDS[i] for i in np.argsort(-scores, kind="stable") if scores[i] > 0]
    assert [h["id"] for h in out["results"]] == ranked[: len(out["results"])]
    best = int(np.argmax(scores))  # its score: the bag's weights, each as far as its logit
    terms = reference_terms(head_state(), features[best][None])[0, ids]
    assert out["results"][0]["score"] == close_to(scores.max(), terms=terms)
    assert out["results"][0]["text"] == captions[IDS.index(ranked[0])]
    run = cli("search", "--index", index, "--query", query)  # parametric: no text tower
    assert run.returncode == 2 and "--query-mode bow" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_deviation_of_stored_dense_features(
    cli, head_dir, head, feature_index, features, tokenizer
):
    index, captions, _ = feature_index
    run = cli("deviation", "--index", index, "--encoder", head_dir, "--k", "10", "--json")
    assert run.returncode == 0, run.stderr
    out = run.json()
    part = out["captions"]
    assert part["kind"] == "features" and part["n"] == 5 and part["n_measured"] == 4
    assert part["skipped"][0]["id"] == "x" and out["images"] is None
    # Independent Exact@10 / Semantic@10: top-10 non-special terms of the stored (gated)
    # vector against the caption's WordPiece tokens; static vectors = projector rows.
    table = head_state()["vocab_projector.weight"].double().numpy()
    table /= np.linalg.norm(table, axis=1, keepdims=True)
    index_of = {t: i for i, t in enumerate(head.vocab)}
    exact, semantic = [], []
    for row, item in zip(part["rows"], IDS[:4], strict=True):
        assert row["id"] == item
        vector = reference(head_state(), features[IDS.index(item)][None])[0]
        top = _top_tokens(vector, head.vocab, 10)
        caption = IDS.index(item)
        tokens = [t for t in tokenizer.tokenize(captions[caption])]
        tokens = list(dict.fromkeys(tokens))
        assert row["top_terms"] == top and row["caption_tokens"] == tokens
        exact.append(sum(t in tokens for t in top) / 10)
        sims = table[[index_of[t] for t in top]] @ table[[index_of[t] for t in tokens]].T
        semantic.append(sims.max(axis=1).sum() / 10)
        assert row["exact_at_k"] == pytest.approx(exact[-1])
        # cosines of unit vectors, each one's |products| adding up to at most 1, ÷ k
        assert row["semantic_at_k"] == close_to(semantic[-1], terms=1.0)
    assert min(exact) >= 0.3  # each caption holds three of its vector's top terms
    assert part["exact_at_k"] == pytest.approx(np.mean(exact))
    assert part["semantic_at_k"] == close_to(np.mean(semantic), terms=1.0)
    # FLOPs between different vectors, from the stored activations.
    active = [set(np.flatnonzero(reference(head_state(), f[None])[0])) for f in features]
    pairs = [len(a & b) for i, a in enumerate(active) for j, b in enumerate(active) if i != j]
    assert part["flops"] == pytest.approx(np.mean(pairs))


def test_deviation_of_features_needs_the_head(cli, feature_index):
    index, *_ = feature_index
    run = cli("deviation", "--index", index, "--encoder", "splade-tiny")
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
    assert "dense features" in run.stderr


def _page_on_stored(feature_index, tmp_path, monkeypatch, page: str, head_dir: Path):
    """A page on the stored features index, copied into a fresh workspace; the head's
    folder is a data root (a page reads typed server paths only inside those)."""
    import shutil

    from lexlens.app.runtime.access import ROOTS_ENV

    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    monkeypatch.setenv(ROOTS_ENV, str(head_dir.parent))
    shutil.copytree(feature_index[0], home / "collections" / "feats")
    return app_page(page)


def _pick_directory(at, key: str, path: Path) -> None:
    from lexlens.app.runtime.state import CUSTOM

    at.selectbox(key=key).set_value(CUSTOM).run()
    at.text_input(key=f"{key}_dir").set_value(str(path)).run()


def test_search_page_offers_the_head_for_bag_of_words_queries(
    cli, feature_index, head_dir, captions_query, tmp_path, monkeypatch
):
    at = _page_on_stored(feature_index, tmp_path, monkeypatch, "app_pages/search.py", head_dir)
    at.text_input(key="search_query").set_value(captions_query)
    at.text_input(key="search_exclude").set_value("")
    at.radio(key="search_mode").set_value("bow").run()
    _pick_directory(at, "search_query_encoder_text_bow", head_dir)
    assert not at.exception and not at.error
    run = cli(
        "search",
        "--index",
        feature_index[0],
        "--query",
        captions_query,
        "--query-mode",
        "bow",
        "--encoder",
        head_dir,
        "--json",
    )
    want = [(h["id"], h["score"]) for h in run.json()["results"]]
    assert [(h.id, h.score) for h in at.session_state["search_result"].results] == want
    # Parametric queries need a text tower: the same head is refused there.
    at.radio(key="search_mode").set_value("parametric").run()
    _pick_directory(at, "search_query_encoder_text", head_dir)
    assert any("text" in e.value for e in at.error)


def test_deviation_page_takes_the_head_on_stored_features(
    cli, feature_index, head_dir, tmp_path, monkeypatch
):
    at = _page_on_stored(feature_index, tmp_path, monkeypatch, "app_pages/deviation.py", head_dir)
    at.radio(key="dev_source").set_value("Stored collection").run()
    _pick_directory(at, "dev_encoder", head_dir)
    assert not at.exception and not at.error
    click_and_wait(at, next(b for b in at.button if b.label == "Measure the collection").click)
    assert not at.exception and not at.error
    run = cli("deviation", "--index", feature_index[0], "--encoder", head_dir, "--json")
    assert page_result(at).to_dict()["captions"] == run.json()["captions"]


@pytest.fixture
def captions_query(feature_index) -> str:
    return feature_index[1][1].split()[-3]


# --- bad heads and bad feature files -----------------------------------------------------


def _drop(key):
    def edit(state):
        del state[key]

    return edit


def _reshape(state):
    state["vocab_projector.weight"] = state["vocab_projector.weight"][:, :16].contiguous()


def _poison(state):
    state["proj.weight"][3, 4] = float("nan")


@pytest.mark.parametrize(
    ("edit", "needles"),
    [
        (_drop("vocab_layer_norm.bias"), ["missing tensor 'vocab_layer_norm.bias'"]),
        (_reshape, ["'vocab_projector.weight' has shape (30522, 16)", "(30522, 32)"]),
        (_poison, ["'proj.weight' holds NaN or Inf"]),
    ],
)
def test_corrupt_heads_are_refused(cli, tmp_path, feature_files, edit, needles):
    state = head_state()
    edit(state)
    path = write_head(tmp_path / "bad", state)
    run = cli("terms", "--encoder", path, "--features", feature_files["npy"], "--item", "x")
    one_line_error(run, "model.safetensors", *needles)


def test_truncated_head_and_wrong_dense_size(cli, tmp_path, feature_files):
    path = write_head(tmp_path / "trunc")
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])
    run = cli("terms", "--encoder", path, "--features", feature_files["npy"], "--item", "x")
    one_line_error(run, "model.safetensors")
    other = write_head(tmp_path / "dense", config={"dense_size": 256})
    with pytest.raises(
        EncoderLoadError, match=r"\(32, 16\), but config.json says dense_size = 256"
    ):
        load_encoder(str(other), device="cpu")
    legacy = tmp_path / "legacy-vocab"
    state = head_state()
    state["vocab_projector.weight"] = state["vocab_projector.weight"][:100]
    state["vocab_projector.bias"] = state["vocab_projector.bias"][:100]
    write_head(legacy, state)
    with pytest.raises(EncoderLoadError, match="has 100 rows"):
        load_encoder(str(legacy), device="cpu")


def test_features_of_another_dimension(cli, head_dir, tmp_path, head):
    np.save(tmp_path / "f8.npy", np.ones((3, 8), np.float32))
    run = cli("terms", "--encoder", head_dir, "--features", tmp_path / "f8.npy", "--item", "1")
    one_line_error(run, "f8.npy holds 8-d vectors but the head 'd2s-tiny' expects 16-d")
    with pytest.raises(InputError, match="8-d but the D2S head 'd2s-tiny' expects 16-d"):
        head.encode_features(np.ones((2, 8), np.float32))


def _parquet(path, table):
    import pyarrow.parquet as pq

    pq.write_table(table, path)
    return path


def test_bad_feature_files(cli, head_dir, tmp_path, feature_files):
    import pyarrow as pa

    cases = []
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    cases.append((tmp_path / "obj.npy", [], "Python objects"))
    np.save(tmp_path / "cube.npy", np.zeros((2, 3, 4), np.float32))
    cases.append((tmp_path / "cube.npy", [], "shape (2, 3, 4)"))
    nan = np.ones((4, DENSE), np.float32)
    nan[2, 1] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    cases.append((tmp_path / "nan.npy", [], "vector 2 holds NaN"))
    (tmp_path / "junk.npy").write_bytes(b"\x93NUMPY garbage")
    cases.append((tmp_path / "junk.npy", [], "not a readable .npy"))
    _parquet(tmp_path / "noemb.parquet", pa.table({"id": [1], "vec": [[1.0]]}))
    cases.append((tmp_path / "noemb.parquet", [], "no 'emb' column"))
    _parquet(tmp_path / "ragged.parquet", pa.table({"id": [1, 2], "emb": [[1.0, 2.0], [1.0]]}))
    cases.append((tmp_path / "ragged.parquet", [], "row 1 of 'emb' has 1 numbers"))
    (tmp_path / "two.ids").write_text("a\nb\n")
    cases.append((feature_files["npy"], ["--ids", tmp_path / "two.ids"], "2 ids for the 5"))
    cases.append((feature_files["npy"], ["--item", "nope"], "item 'nope' is not in"))
    cases.append((tmp_path / "absent.npy", [], "not found"))
    (tmp_path / "f.txt").write_text("1 2 3")
    cases.append((tmp_path / "f.txt", [], ".npy, .safetensors, .parquet"))
    for path, extra, needle in cases:
        run = cli("terms", "--encoder", head_dir, "--features", path, *extra)
        one_line_error(run, needle)
        if not extra:
            assert path.name in run.stderr
    run = cli("terms", "--encoder", head_dir, "--features", feature_files["npy"])
    one_line_error(run, "holds 5 vectors: pick one by its id (e.g. img-7")
    run = cli("terms", "--encoder", head_dir, "--text", "a dog")
    one_line_error(run, "terms of a text needs", "dense features → vocabulary weights")
    run = cli(
        "terms", "--encoder", "splade-tiny", "--features", feature_files["npy"], "--item", "x"
    )
    one_line_error(run, "terms of dense features needs")


def test_captions_pair_with_ids(tmp_path, feature_files):
    (tmp_path / "caps.csv").write_text(
        "id,caption,caption_2\nimg-7,a dog,a brown dog\ncap-3,a cat,\nzz,lost,\n"
    )
    table = read_features(feature_files["npy"], captions=tmp_path / "caps.csv")
    assert table.captions[0] == ["a dog", "a brown dog"] and table.captions[2] == ["a cat"]
    assert table.captions[1] == [] and any("1 caption id" in n for n in table.notes)
    (tmp_path / "caps.jsonl").write_text(
        '{"id": "img-9", "captions": ["one", "two"]}\n{"id": "img-9", "caption": "three"}\n'
    )
    table = read_features(feature_files["parquet"], captions=tmp_path / "caps.jsonl")
    assert table.captions[1] == ["one", "two", "three"]
    (tmp_path / "none.csv").write_text("id,caption\nq,nothing\n")
    with pytest.raises(InputError, match="no id of none.csv"):
        read_features(feature_files["npy"], captions=tmp_path / "none.csv")


def test_index_options_for_features(cli, head_dir, tmp_path, feature_files):
    np.save(tmp_path / "f8.npy", np.ones((3, 8), np.float32))
    run = cli(
        "index", "--encoder", head_dir, "--source", tmp_path / "f8.npy", "--out", tmp_path / "ix"
    )
    one_line_error(run, "f8.npy holds 8-d vectors", "expects 16-d")
    assert not (tmp_path / "ix").exists()
    (tmp_path / "texts.txt").write_text("a dog\na cat\n")
    run = cli(
        "index",
        "--encoder",
        "splade-tiny",
        "--source",
        tmp_path / "texts.txt",
        "--out",
        tmp_path / "ix",
        "--captions",
        tmp_path / "texts.txt",
    )
    one_line_error(run, "--captions and --ids apply to a dense features source")
    run = cli(
        "index",
        "--encoder",
        head_dir,
        "--source",
        feature_files["npy"],
        "--out",
        tmp_path / "ix",
        "--ray",
    )
    one_line_error(run, "--ray encodes images and texts")
    run = cli(
        "index",
        "--encoder",
        "splade-tiny",
        "--source",
        feature_files["npy"],
        "--out",
        tmp_path / "ix",
    )
    one_line_error(run, "a stored collection of dense features needs")
