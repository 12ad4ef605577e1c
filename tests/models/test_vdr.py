"""Published VDR checkpoints: small random checkpoints in the jzhoubu/VDR layout.

Every reference forward here is written with plain tensor ops from the saved state dict
(BERT's body is ``transformers.BertModel``, the published base model; the VDR heads and the
whole ViT are written out below), never by calling ``models.vdr``.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from safetensors.torch import save_file

from lexlens.models import load_encoder
from lexlens.models.base import EncoderLoadError, LexlensError, ModalityError, pool_units
from lexlens.models.text_io import load_bert_tokenizer
from tests.helpers import model_tolerance

TINY_BERT = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "vocab_size": 30522,
    "max_position_embeddings": 64,
}
TINY_VIT = {"resolution": 64, "patch_size": 16, "width": 32, "layers": 2, "heads": 2}
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

# The 93 ids the published cross-modal VDR model leaves out besides three ranges, written out
# here independently of models/vdr_config.py.
_EXCLUDED = """3186 6362 7030 7737 8157 8229 10260 10325 10701 11622 11722 11871 12744 13714
14150 14157 14241 14498 14534 14608 15290 15297 15394 15414 15915 16177 16198 16415 16856
17004 17110 17149 17432 17499 17814 18107 18199 18511 18728 18818 18947 19109 19110 19259
19310 19433 19579 19704 19865 20190 21853 21932 22192 22543 22646 22919 22972 23305 23432
23483 23673 23742 23925 24102 24824 24830 24833 24967 25160 25529 25573 25799 26133 26306
26444 26789 26812 27392 27432 27688 27708 27807 27813 27904 27944 28182 28598 28995 29113
29128 29155 29275 29436"""
EXCLUDED = {int(x) for x in _EXCLUDED.split()}
REF_VALID_IDS = [
    i
    for i in range(30522)
    if not (i <= 998 or 1067 <= i <= 1995 or i >= 29644) and i not in EXCLUDED
]

TEXTS = [
    "a cat sleeping on a book",
    "Who first proposed the theory of relativity? Albert Einstein did, in 1905 and 1915.",
    "tiny",
]


@pytest.fixture(scope="module")
def tokenizer():
    return load_bert_tokenizer()


# --- building checkpoints ---------------------------------------------------------------


_TOWERS: dict[int, dict[str, torch.Tensor]] = {}
_REFERENCE_BERTS: dict[int, torch.nn.Module] = {}


def bert_tower(seed: int) -> dict[str, torch.Tensor]:
    """A random text tower: ``ln.*`` + ``bert_model.*`` (BertModel names, no pooler)."""
    if seed not in _TOWERS:
        _TOWERS[seed] = _make_bert_tower(seed)
    return dict(_TOWERS[seed])  # callers may edit the dict, never the tensors


def _make_bert_tower(seed: int) -> dict[str, torch.Tensor]:
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    model = BertModel(BertConfig(**TINY_BERT), add_pooling_layer=False)
    state = {f"bert_model.{k}": v.clone() for k, v in model.state_dict().items()}
    # Wide word embeddings so the vocabulary scores spread out (catches wrong slices).
    state["bert_model.embeddings.word_embeddings.weight"] = torch.randn(30522, 32)
    state["ln.weight"] = 1 + 0.3 * torch.randn(32)
    state["ln.bias"] = 0.3 * torch.randn(32)
    return state


def vit_tower(seed: int) -> dict[str, torch.Tensor]:
    """A random CLIP-style ViT in the published key names (no class token)."""
    g = torch.Generator().manual_seed(seed)
    w, p = TINY_VIT["width"], TINY_VIT["patch_size"]
    grid = TINY_VIT["resolution"] // p

    def rnd(*shape, scale=None):
        scale = scale if scale is not None else shape[-1] ** -0.5
        return torch.randn(*shape, generator=g) * scale

    state = {
        "conv1.weight": rnd(w, 3, p, p, scale=(3 * p * p) ** -0.5),
        "positional_embedding": rnd(grid * grid, w, scale=0.5),
        "ln_pre.weight": 1 + 0.2 * rnd(w, scale=1),
        "ln_pre.bias": 0.2 * rnd(w, scale=1),
        "ln_post.weight": 1 + 0.2 * rnd(w, scale=1),
        "ln_post.bias": 0.2 * rnd(w, scale=1),
        "proj": rnd(27623, w, scale=1.0),
    }
    for i in range(TINY_VIT["layers"]):
        b = f"transformer.resblocks.{i}."
        state |= {
            b + "attn.in_proj_weight": rnd(3 * w, w),
            b + "attn.in_proj_bias": 0.1 * rnd(3 * w, scale=1),
            b + "attn.out_proj.weight": rnd(w, w),
            b + "attn.out_proj.bias": 0.1 * rnd(w, scale=1),
            b + "ln_1.weight": 1 + 0.2 * rnd(w, scale=1),
            b + "ln_1.bias": 0.2 * rnd(w, scale=1),
            b + "mlp.c_fc.weight": rnd(4 * w, w),
            b + "mlp.c_fc.bias": 0.1 * rnd(4 * w, scale=1),
            b + "mlp.c_proj.weight": rnd(w, 4 * w),
            b + "mlp.c_proj.bias": 0.1 * rnd(w, scale=1),
            b + "ln_2.weight": 1 + 0.2 * rnd(w, scale=1),
            b + "ln_2.bias": 0.2 * rnd(w, scale=1),
        }
    return state


def write_checkpoint(
    directory: Path,
    config: dict,
    towers: dict[str, dict[str, torch.Tensor]],
    fmt: str,
) -> Path:
    """Write ``config.json`` and the prefixed state dict as safetensors or a pickle."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    state = {f"{prefix}.{k}": v for prefix, tower in towers.items() for k, v in tower.items()}
    if fmt == "safetensors":
        save_file(
            {k: v.contiguous() for k, v in state.items()}, str(directory / "model.safetensors")
        )
    else:
        torch.save(state, directory / "pytorch_model.bin")
    return directory


def text_cfg(kind: str, **extra) -> dict:
    return {"type": kind, "model_id": "bert-base-uncased", **TINY_BERT, **extra}


def strip(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}


# --- independent reference forwards -----------------------------------------------------


def reference_text(
    tower: dict, kind: str, text: str, *, tokenizer, max_len: int, shift=999, norm=False
):
    """The published forward of one text tower, for one text (numpy ``[|V|]``)."""
    from transformers import BertConfig, BertModel

    key = id(tower["bert_model.embeddings.word_embeddings.weight"])
    if key not in _REFERENCE_BERTS:
        bert = BertModel(BertConfig(**TINY_BERT), add_pooling_layer=False).eval()
        bert.load_state_dict(strip(tower, "bert_model."), strict=True)
        _REFERENCE_BERTS[key] = bert
    bert = _REFERENCE_BERTS[key]
    # vdr pads to the batch's longest text (here: none); the cross-modal tower to max_len.
    padding = "max_length" if kind == "vdr_crossmodal_text" else False
    enc = tokenizer(
        [text], padding=padding, truncation=True, max_length=max_len, return_tensors="pt"
    )
    with torch.no_grad():
        h = bert(
            input_ids=enc["input_ids"],
            attention_mask=enc["attention_mask"],
            token_type_ids=torch.zeros_like(enc["input_ids"]),
        ).last_hidden_state[0]
    h = F.layer_norm(h, (32,), tower["ln.weight"], tower["ln.bias"], eps=1e-5)
    emb = tower["bert_model.embeddings.word_embeddings.weight"]
    if kind == "vdr":
        v = (F.elu(h @ emb[shift:].T) + 1).max(dim=0).values  # elu1p, then max over tokens
        if norm:
            v = v / v.norm()
    else:
        v = F.elu((h @ emb[REF_VALID_IDS].T).max(dim=0).values) + 1  # max, then elu1p
        v = v / v.norm()
    return v.numpy()


def reference_pixels(image: Image.Image, res: int) -> tuple[torch.Tensor, tuple[float, ...]]:
    """Shorter side to ``res`` (bicubic), centre crop, [0,1], CLIP mean/std."""
    w, h = image.size
    new = (res, int(res * h / w)) if w <= h else (int(res * w / h), res)
    resized = image.convert("RGB").resize(new, Image.Resampling.BICUBIC)
    left, top = round((new[0] - res) / 2), round((new[1] - res) / 2)
    crop = resized.crop((left, top, left + res, top + res))
    x = torch.tensor(np.asarray(crop, dtype=np.float32) / 255.0).permute(2, 0, 1)
    x = (x - torch.tensor(CLIP_MEAN).view(3, 1, 1)) / torch.tensor(CLIP_STD).view(3, 1, 1)
    box = (left / new[0], top / new[1], (left + res) / new[0], (top + res) / new[1])
    return x, box


def reference_vit(sd: dict, pixels: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Per-patch rows elu1p(ln_post(x) @ proj.T) and the pooled vector, plain tensor ops."""
    w, p, heads = TINY_VIT["width"], TINY_VIT["patch_size"], TINY_VIT["heads"]
    dh = w // heads

    def ln(x, name):
        return F.layer_norm(x, (w,), sd[name + ".weight"], sd[name + ".bias"], eps=1e-5)

    x = F.conv2d(pixels[None], sd["conv1.weight"], stride=p)[0]  # [w, g, g]
    x = x.reshape(w, -1).T  # [g*g, w], row-major patches
    x = ln(x + sd["positional_embedding"], "ln_pre")
    n = x.shape[0]
    for i in range(TINY_VIT["layers"]):
        b = f"transformer.resblocks.{i}."
        y = ln(x, b + "ln_1")
        q, k, v = (y @ sd[b + "attn.in_proj_weight"].T + sd[b + "attn.in_proj_bias"]).split(w, -1)
        q, k, v = (t.reshape(n, heads, dh).transpose(0, 1) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(1, 2) / dh**0.5, dim=-1)
        o = (att @ v).transpose(0, 1).reshape(n, w)
        x = x + o @ sd[b + "attn.out_proj.weight"].T + sd[b + "attn.out_proj.bias"]
        y = ln(x, b + "ln_2") @ sd[b + "mlp.c_fc.weight"].T + sd[b + "mlp.c_fc.bias"]
        y = y * torch.sigmoid(1.702 * y)
        x = x + y @ sd[b + "mlp.c_proj.weight"].T + sd[b + "mlp.c_proj.bias"]
    scores = ln(x, "ln_post") @ sd["proj"].T  # [g*g, 27623]
    pooled = F.elu(scores.max(dim=0).values) + 1
    return (F.elu(scores) + 1).numpy(), (pooled / pooled.norm()).numpy()


# --- text towers ------------------------------------------------------------------------

TEXT_CASES = [
    ("vdr", 999, False, "safetensors"),
    ("vdr", 1000, True, "bin"),
    ("vdr_crossmodal_text", None, True, "safetensors"),
    ("vdr_crossmodal_text", None, True, "bin"),
]


@pytest.mark.parametrize(("kind", "shift", "norm", "fmt"), TEXT_CASES)
def test_text_towers_match_published_forward(tmp_path, tokenizer, kind, shift, norm, fmt):
    q_tower, p_tower = bert_tower(1), bert_tower(2)
    extra = {"shift_vocab_num": shift, "norm": norm} if kind == "vdr" else {}
    config = {
        "encoder_q": text_cfg(kind, max_len=16, **extra),
        "encoder_p": text_cfg(kind, max_len=24, **extra),
        "shared_encoder": False,
        "max_len": 512,
    }
    path = write_checkpoint(
        tmp_path / f"{kind}-{fmt}", config, {"encoder_q": q_tower, "encoder_p": p_tower}, fmt
    )
    encoder = load_encoder(str(path), device="cpu")

    ref_ids = list(range(shift, 30522)) if kind == "vdr" else REF_VALID_IDS
    assert len(encoder.vocab) == len(ref_ids) == (30522 - shift if kind == "vdr" else 27623)
    assert encoder.vocab == tokenizer.convert_ids_to_tokens(ref_ids)
    assert encoder.modalities == frozenset({"text"})

    for side, tower, max_len in (("query", q_tower, 16), ("document", p_tower, 24)):
        encodings = encoder.encode_texts(TEXTS, side=side)  # one padded batch
        for text, enc in zip(TEXTS, encodings, strict=True):
            ref = reference_text(
                tower, kind, text, tokenizer=tokenizer, max_len=max_len, shift=shift, norm=norm
            )
            assert enc.weights.shape == ref.shape
            assert np.abs(enc.weights - ref).max() <= model_tolerance(np.abs(ref).max()), (
                side,
                text,
            )
            # Max-pooling the kept per-token rows gives the vector back.
            pooled = pool_units(enc.unit_weights, enc.normalization)
            assert np.abs(pooled - enc.weights).max() <= model_tolerance(np.abs(enc.weights).max())
            assert enc.normalization == ("l2" if norm else "none")
            assert len(enc.units) == len(enc.input_ids) == enc.unit_weights.shape[0]
        # The long text exceeds the query window (16 tokens) and is marked truncated.
        assert [e.truncated for e in encodings] == [False, side == "query", False]
        # Without per-token rows: the max on packed logits, then elu1p (same vector).
        pooled = encoder.encode_texts(TEXTS, side=side, keep_units=False)
        for full, fast in zip(encodings, pooled, strict=True):
            assert fast.unit_weights is None and fast.units == full.units
            assert np.abs(fast.weights - full.weights).max() <= model_tolerance(
                np.abs(full.weights).max()
            )

    # The two towers are really different: the side picks the tower.
    q = encoder.encode_texts(TEXTS[:1], side="query")[0].weights
    d = encoder.encode_texts(TEXTS[:1], side="document")[0].weights
    assert np.abs(q - d).max() > 1e-2


def test_crossmodal_text_padding_is_one_unit(tmp_path, tokenizer):
    config = {
        "encoder_q": text_cfg("vdr_crossmodal_text", max_len=16),
        "encoder_p": text_cfg("vdr_crossmodal_text"),
    }
    tower = bert_tower(3)
    path = write_checkpoint(
        tmp_path / "cm", config, {"encoder_q": tower, "encoder_p": bert_tower(4)}, "bin"
    )
    enc = load_encoder(str(path), device="cpu").encode_texts(["a cat"])[0]
    assert enc.units == ["[CLS]", "a", "cat", "[SEP]", "[PAD]"]
    # Without the padding rows the pooled vector would differ (they take part in the max).
    real = enc.unit_weights[:-1].max(axis=0)
    assert np.abs(real / np.linalg.norm(real) - enc.weights).max() > 1e-4
    assert any("padding" in n for n in enc.notes)
    # The pooled-only path keeps the [PAD] positions in the max.
    fast = load_encoder(str(path), device="cpu").encode_texts(["a cat"], keep_units=False)[0]
    assert fast.units == enc.units and fast.unit_weights is None
    assert np.abs(fast.weights - enc.weights).max() <= model_tolerance(np.abs(enc.weights).max())


# --- image tower ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_crossmodal_image_tower_matches_reference(tmp_path, tokenizer, fmt):
    q_tower, vit = bert_tower(5), vit_tower(6)
    config = {
        "encoder_q": text_cfg("vdr_crossmodal_text", max_len=16),
        "encoder_p": {
            "type": "vdr_crossmodal_image",
            "tokenizer_id": "bert-base-uncased",
            "topk": 768,
            **TINY_VIT,
        },
        "shared_encoder": False,
        "max_len": 512,
    }
    path = write_checkpoint(
        tmp_path / f"xm-{fmt}", config, {"encoder_q": q_tower, "encoder_p": vit}, fmt
    )
    encoder = load_encoder(str(path), device="cpu")
    assert encoder.modalities == frozenset({"text", "image"})
    assert encoder.vocab == tokenizer.convert_ids_to_tokens(REF_VALID_IDS)

    rng = np.random.default_rng(0)
    wide = Image.fromarray(rng.integers(0, 256, (80, 100, 3), dtype=np.uint8))  # 100 × 80
    tall = Image.fromarray(rng.integers(0, 256, (90, 70), dtype=np.uint8), mode="L")
    encodings = encoder.encode_images([wide, tall])
    g = TINY_VIT["resolution"] // TINY_VIT["patch_size"]
    for image, enc in zip([wide, tall], encodings, strict=True):
        pixels, box = reference_pixels(image, TINY_VIT["resolution"])
        rows, pooled = reference_vit(vit, pixels)
        assert enc.grid == (g, g)
        assert enc.units == [f"r{r}c{c}" for r in range(g) for c in range(g)]
        assert np.abs(enc.unit_weights - rows).max() <= model_tolerance(np.abs(rows).max())
        assert np.abs(enc.weights - pooled).max() <= model_tolerance(np.abs(pooled).max())
        assert np.allclose(enc.crop_box, box)
        assert enc.normalization == "l2"
        # Pooling over all patches gives back the image vector; a group gives its own.
        assert np.abs(pool_units(enc.unit_weights, "l2") - enc.weights).max() <= model_tolerance(
            np.abs(enc.weights).max()
        )
        left = [i for i in range(g * g) if i % g < g // 2]
        group = rows[left].max(axis=0)
        unit_group = group / np.linalg.norm(group)
        difference = np.abs(pool_units(enc.unit_weights[left], "l2") - unit_group).max()
        assert difference <= model_tolerance(unit_group.max())
    assert encodings[0].crop_box == pytest.approx((0.1, 0.0, 0.9, 1.0))

    # The text side of the same checkpoint, and the modality errors.
    text = encoder.encode_texts(["a red bus"], side="query")[0]
    ref = reference_text(
        q_tower, "vdr_crossmodal_text", "a red bus", tokenizer=tokenizer, max_len=16
    )
    assert np.abs(text.weights - ref).max() <= model_tolerance(np.abs(ref).max())
    with pytest.raises(ModalityError, match="images"):
        encoder.encode_texts(["a red bus"], side="document")


# --- shared encoder ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefixes", "fmt"),
    [
        (["encoder_q"], "safetensors"),
        (["encoder_p"], "safetensors"),
        (["encoder_q", "encoder_p"], "bin"),
    ],
)
def test_shared_encoder(tmp_path, tokenizer, prefixes, fmt):
    tower = bert_tower(7)
    config = {
        "encoder_q": text_cfg("vdr", max_len=12, norm=False),
        "encoder_p": text_cfg("vdr", max_len=20, norm=False),
        "shared_encoder": True,
        "max_len": 512,
    }
    path = write_checkpoint(tmp_path / "shared", config, {p: tower for p in prefixes}, fmt)
    encoder = load_encoder(str(path), device="cpu")
    # Published BiEncoder: one tower, with the longer max_len of the two.
    ref = reference_text(tower, "vdr", TEXTS[1], tokenizer=tokenizer, max_len=20)
    for side in ("query", "document"):
        enc = encoder.encode_texts([TEXTS[1]], side=side)[0]
        assert np.abs(enc.weights - ref).max() <= model_tolerance(np.abs(ref).max())


# --- bad input --------------------------------------------------------------------------


def _vdr_config() -> dict:
    return {"encoder_q": text_cfg("vdr"), "encoder_p": text_cfg("vdr"), "shared_encoder": False}


def test_directory_without_config(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(EncoderLoadError, match="no config.json"):
        load_encoder(str(tmp_path), device="cpu")


def test_wrong_shaped_tensor_names_key_and_shapes(tmp_path):
    tower, bad = bert_tower(8), bert_tower(9)
    key = "bert_model.encoder.layer.1.attention.self.query.weight"
    bad[key] = torch.randn(16, 32)
    path = write_checkpoint(
        tmp_path / "bad", _vdr_config(), {"encoder_q": tower, "encoder_p": bad}, "safetensors"
    )
    with pytest.raises(EncoderLoadError) as info:
        load_encoder(str(path), device="cpu")
    message = str(info.value)
    assert f"encoder_p.{key}" in message and "[16, 32]" in message and "[32, 32]" in message
    assert "model.safetensors" in message and "\n" not in message


def test_missing_tensor_names_key(tmp_path):
    tower = bert_tower(9)
    del tower["ln.bias"]
    path = write_checkpoint(
        tmp_path / "missing", _vdr_config(), {"encoder_q": tower, "encoder_p": bert_tower(1)}, "bin"
    )
    with pytest.raises(
        EncoderLoadError, match=r"pytorch_model\.bin: missing tensor encoder_q\.ln\.bias"
    ):
        load_encoder(str(path), device="cpu")


def test_config_describing_other_weights(tmp_path):
    config = _vdr_config()
    config["encoder_q"]["num_hidden_layers"] = 1  # the weights have 2 layers
    path = write_checkpoint(
        tmp_path / "extra", config, {"encoder_q": bert_tower(1), "encoder_p": bert_tower(2)}, "bin"
    )
    with pytest.raises(
        EncoderLoadError, match=r"unexpected tensor encoder_q\.bert_model\.encoder\.layer\.1\."
    ):
        load_encoder(str(path), device="cpu")


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        ([torch.zeros(3), torch.ones(2)], "holds a list, not a state dict"),
        (Counter(a=1), "refused: the pickle holds Python objects"),  # arbitrary unpickling
        ({"encoder_q.ln.weight": [1.0, 2.0]}, "not a tensor"),
    ],
)
def test_pickle_that_is_not_a_state_dict(tmp_path, payload, match):
    (tmp_path / "config.json").write_text(json.dumps(_vdr_config()))
    with open(tmp_path / "pytorch_model.bin", "wb") as fh:
        if isinstance(payload, Counter):
            pickle.dump(payload, fh)
        else:
            torch.save(payload, fh)
    with pytest.raises(EncoderLoadError, match=match) as info:
        load_encoder(str(tmp_path), device="cpu")
    assert "pytorch_model.bin" in str(info.value)


def test_missing_weights_file(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(_vdr_config()))
    with pytest.raises(EncoderLoadError) as info:
        load_encoder(str(tmp_path), device="cpu")
    message = str(info.value)
    assert (
        str(tmp_path) in message
        and "model.safetensors" in message
        and "pytorch_model.bin" in message
    )


def test_unknown_type_names_config_and_key(tmp_path):
    config = _vdr_config()
    config["encoder_p"]["type"] = "colbert"
    path = write_checkpoint(tmp_path / "unknown", config, {"encoder_q": bert_tower(1)}, "bin")
    with pytest.raises(EncoderLoadError, match=r"config\.json: encoder_p\.type is 'colbert'"):
        load_encoder(str(path), device="cpu")


def test_dpr_checkpoint_is_refused_clearly(tmp_path):
    config = {"encoder_q": {"type": "dpr"}, "encoder_p": {"type": "dpr"}, "shared_encoder": False}
    path = write_checkpoint(tmp_path / "dpr", config, {"encoder_q": bert_tower(1)}, "bin")
    with pytest.raises(EncoderLoadError, match="dense"):
        load_encoder(str(path), device="cpu")


def test_text_checkpoint_has_no_image_tower(tmp_path):
    path = write_checkpoint(
        tmp_path / "t",
        _vdr_config(),
        {"encoder_q": bert_tower(1), "encoder_p": bert_tower(2)},
        "bin",
    )
    encoder = load_encoder(str(path), device="cpu")
    with pytest.raises(ModalityError, match="no image tower"):
        encoder.encode_images([Image.new("RGB", (32, 32))])
    with pytest.raises(LexlensError, match="side"):
        encoder.encode_texts(["x"], side="passage")
    with pytest.raises(LexlensError, match="empty"):
        encoder.encode_texts([" "])


def test_elongated_and_tiny_images(tmp_path):
    config = {
        "encoder_q": text_cfg("vdr_crossmodal_text", max_len=16),
        "encoder_p": {"type": "vdr_crossmodal_image", **TINY_VIT},
    }
    vit = vit_tower(11)
    path = write_checkpoint(
        tmp_path / "xm", config, {"encoder_q": bert_tower(10), "encoder_p": vit}, "bin"
    )
    encoder = load_encoder(str(path), device="cpu")
    rng = np.random.default_rng(1)
    strip_image = Image.fromarray(rng.integers(0, 256, (12, 400, 3), dtype=np.uint8))  # 400 × 12
    rgba = Image.new("RGBA", (1, 1), (255, 0, 0, 128))
    strip_enc, tiny_enc = encoder.encode_images([strip_image, rgba])
    assert strip_enc.crop_box == pytest.approx((0.485, 0.0, 0.515, 1.0), abs=2e-3)
    # Only the crop's source box is resampled (the full resize would be 2133 × 64): the
    # pixels are those of resize-then-crop up to rare ±1 rounding, so the rows are close.
    rows, pooled = reference_vit(vit, reference_pixels(strip_image, TINY_VIT["resolution"])[0])
    assert np.abs(strip_enc.unit_weights - rows).max() < 0.05
    assert np.abs(strip_enc.weights - pooled).max() < 1e-3
    assert tiny_enc.crop_box == (0.0, 0.0, 1.0, 1.0)
    assert np.isfinite(tiny_enc.weights).all()


@pytest.mark.parametrize("size", [(400, 12), (3, 900), (100, 80)])
def test_centre_view_pixels_match_full_resize(size):
    from lexlens.models.vdr_preprocess import centre_view

    rng = np.random.default_rng(2)
    image = Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
    res = 64
    w, h = image.size
    new = (res, int(res * h / w)) if w <= h else (int(res * w / h), res)
    left, top = round((new[0] - res) / 2), round((new[1] - res) / 2)
    full = image.resize(new, Image.Resampling.BICUBIC).crop((left, top, left + res, top + res))
    crop, box = centre_view(image, res)
    diff = np.abs(np.asarray(full, dtype=int) - np.asarray(crop, dtype=int))
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-3
    assert box == pytest.approx(
        (left / new[0], top / new[1], (left + res) / new[0], (top + res) / new[1])
    )


def test_dense_document_tower_is_a_modality_error(tmp_path, tokenizer):
    config = {"encoder_q": text_cfg("vdr", max_len=16), "encoder_p": {"type": "dpr"}}
    tower = bert_tower(1)
    path = write_checkpoint(tmp_path / "mixed", config, {"encoder_q": tower}, "bin")
    encoder = load_encoder(str(path), device="cpu")
    enc = encoder.encode_texts([TEXTS[0]], side="query")[0]
    ref = reference_text(tower, "vdr", TEXTS[0], tokenizer=tokenizer, max_len=16)
    assert np.abs(enc.weights - ref).max() <= model_tolerance(np.abs(ref).max())
    with pytest.raises(ModalityError, match="dense DPR"):
        encoder.encode_texts([TEXTS[0]], side="document")


# --- weights and sizes checked before anything is allocated ------------------------------


@pytest.mark.parametrize(("fmt", "value"), [("safetensors", float("nan")), ("bin", float("inf"))])
def test_nan_or_inf_weight_is_refused_naming_file_and_key(tmp_path, fmt, value):
    bad = bert_tower(2)
    bad["ln.weight"] = bad["ln.weight"].clone()
    bad["ln.weight"][3] = value
    path = write_checkpoint(
        tmp_path / "nan", _vdr_config(), {"encoder_q": bert_tower(1), "encoder_p": bad}, fmt
    )
    name = "model.safetensors" if fmt == "safetensors" else "pytorch_model.bin"
    with pytest.raises(
        EncoderLoadError, match=rf"{name}: tensor 'encoder_p\.ln\.weight' holds NaN"
    ):
        load_encoder(str(path), device="cpu")


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("hidden_size", 1_000_000, r"encoder_q\.hidden_size = 1000000 is not a plausible size"),
        ("num_hidden_layers", 1e6, r"encoder_q\.num_hidden_layers = 1000000\.0 is not a plausible"),
        ("intermediate_size", -4, r"encoder_q\.intermediate_size = -4 is not a plausible size"),
    ],
)
def test_absurd_config_sizes_are_refused(tmp_path, field, value, match):
    config = _vdr_config()
    config["encoder_q"][field] = value
    path = write_checkpoint(
        tmp_path / "huge", config, {"encoder_q": bert_tower(1), "encoder_p": bert_tower(2)}, "bin"
    )
    with pytest.raises(EncoderLoadError, match=match):
        load_encoder(str(path), device="cpu")


def test_large_config_is_checked_against_the_header_before_allocating(tmp_path):
    """A plausible but large config (about 10 GB of weights) against tiny weights: refused
    from the safetensors header, naming the key and both shapes, before any tower is built."""
    config = _vdr_config()
    config["encoder_p"] |= {
        "hidden_size": 4096,
        "intermediate_size": 16384,
        "num_hidden_layers": 48,
    }
    config["encoder_p"]["num_attention_heads"] = 32
    path = write_checkpoint(
        tmp_path / "big",
        config,
        {"encoder_q": bert_tower(1), "encoder_p": bert_tower(2)},
        "safetensors",
    )
    with pytest.raises(EncoderLoadError) as info:
        load_encoder(str(path), device="cpu")
    message = str(info.value)
    assert "encoder_p.bert_model.embeddings.word_embeddings.weight" in message
    assert "[30522, 32]" in message and "[30522, 4096]" in message


@pytest.mark.parametrize(
    ("kind", "norm", "expected"),
    [
        ("vdr", False, False),  # conf/biencoder/vdr.yaml: norm False → binary
        ("vdr", True, True),  # build_bow_mask(..., norm=config.norm)
        ("vdr_crossmodal_text", True, False),  # build_bow_mask(ids, 30522): never normalised
    ],
)
def test_bow_normalize_follows_the_published_code(tmp_path, kind, norm, expected):
    config = {
        "encoder_q": text_cfg(kind, max_len=16, norm=norm),
        "encoder_p": text_cfg(kind, max_len=16, norm=norm),
    }
    path = write_checkpoint(
        tmp_path / f"bow-{kind}-{norm}",
        config,
        {"encoder_q": bert_tower(1), "encoder_p": bert_tower(2)},
        "bin",
    )
    assert load_encoder(str(path), device="cpu").bow_normalize is expected
