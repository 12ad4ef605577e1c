"""Published VDR checkpoints (github.com/jzhoubu/VDR, vsearch/* on the Hugging Face hub).

A checkpoint directory holds ``config.json`` and ``model.safetensors`` or
``pytorch_model.bin``: the state dict of a bi-encoder whose towers live under the prefixes
``encoder_q.`` (queries) and ``encoder_p.`` (documents / images). Each tower's dict in
``config.json`` names its ``type``. Forward passes, top to bottom (one row per unit):

``vdr`` (text, both towers of vsearch/vdr-nq)::

    h      = BertModel(tokens).last_hidden_state            # [T, d], no pooler
    rows   = elu1p(LayerNorm(h) @ E[shift:].T)              # E = tied word embeddings
    V(x)   = max over real tokens of rows  (L2-normalised if the tower's ``norm``)

    (the published code pads a batch to its longest text and max-pools the padding rows
    too, so its output depends on the batch; this is its output for a text encoded alone)

``vdr_crossmodal_text`` (the text tower of vsearch/vdr-cross-modal)::

    rows   = elu1p(LayerNorm(h) @ E[VALID_TOKEN_IDS].T)     # 27,623 dimensions
    V(x)   = l2norm(max over all max_len positions, [PAD] included, of rows)

    (the published code max-pools the logits, then applies elu1p; elu1p is monotonic,
    so elu1p-then-max gives the same vector and keeps per-token rows meaningful)

``vdr_crossmodal_image`` (CLIP-style ViT without a class token)::

    x      = conv1(pixels) → [g*g, width] + positional_embedding → ln_pre
    x      = resblocks (pre-LN: x + attn(ln_1 x); x + mlp(ln_2 x), QuickGELU)
    rows   = elu1p(ln_post(x) @ proj.T)                      # [g*g, 27623], one per patch
    V(x)   = l2norm(max over patches of rows)

Texts are cut at the tower's own ``max_len`` (default 256; a shared encoder uses the longer
of the two); the top-level ``max_len`` is not read by the published towers.
``elu1p(z) = elu(z) + 1``. ``V(x)`` is the ungated vector: the published ``embed`` keeps
the top-k (``topk``, 768) dimensions for retrieval; that gate belongs to the analysis layer.
``dpr`` towers are dense ([CLS] vectors), not lexical: Lexlens cannot read them.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lexlens.models.base import (
    Capability,
    Encoder,
    EncoderLoadError,
    InputError,
    LexicalEncoding,
    ModalityError,
    check_texts,
)
from lexlens.models.checkpoint import find_weights, read_state_dict
from lexlens.models.text_io import load_bert_tokenizer, tokenize_batch

if TYPE_CHECKING:
    from PIL import Image

TEXT_TYPES = ("vdr", "vdr_crossmodal_text")
IMAGE_TYPES = ("vdr_crossmodal_image",)
DENSE_TYPES = ("dpr",)
KNOWN_TYPES = TEXT_TYPES + IMAGE_TYPES + DENSE_TYPES
SIDES = {"query": "encoder_q", "document": "encoder_p"}

#: bert-base-uncased has 30,522 WordPiece ids; the tokenizer is not stored in checkpoints.
BERT_VOCAB_SIZE = 30522
#: Default of ``shift_vocab_num`` in the published ``VDREncoderConfig`` (drops ids 0..998:
#: [PAD], [unused*], [UNK], [CLS], [SEP], [MASK]); a tower dict may set another value (1000).
DEFAULT_SHIFT = 999
#: Default ``max_len`` of the published text encoder configs (the top-level ``max_len`` of
#: config.json is not read by the published towers).
DEFAULT_MAX_LEN = 256

# The 27,623 output dimensions of the cross-modal model: every bert-base-uncased id except
# 0-998 ([PAD], [unused*], [UNK], [CLS], [SEP], [MASK]), 1067-1995 (single non-ASCII
# characters), 29644-30521 (the ## forms of single characters) and 93 further ids.
_EXCLUDED_RANGES = ((0, 998), (1067, 1995), (29644, 30521))
_EXCLUDED_IDS = frozenset(
    (3186, 6362, 7030, 7737, 8157, 8229, 10260, 10325, 10701, 11622, 11722, 11871, 12744,
     13714, 14150, 14157, 14241, 14498, 14534, 14608, 15290, 15297, 15394, 15414, 15915,
     16177, 16198, 16415, 16856, 17004, 17110, 17149, 17432, 17499, 17814, 18107, 18199,
     18511, 18728, 18818, 18947, 19109, 19110, 19259, 19310, 19433, 19579, 19704, 19865,
     20190, 21853, 21932, 22192, 22543, 22646, 22919, 22972, 23305, 23432, 23483, 23673,
     23742, 23925, 24102, 24824, 24830, 24833, 24967, 25160, 25529, 25573, 25799, 26133,
     26306, 26444, 26789, 26812, 27392, 27432, 27688, 27708, 27807, 27813, 27904, 27944,
     28182, 28598, 28995, 29113, 29128, 29155, 29275, 29436)
)  # fmt: skip
VALID_TOKEN_IDS: tuple[int, ...] = tuple(
    i
    for i in range(BERT_VOCAB_SIZE)
    if i not in _EXCLUDED_IDS and not any(lo <= i <= hi for lo, hi in _EXCLUDED_RANGES)
)
assert len(_EXCLUDED_IDS) == 93 and len(VALID_TOKEN_IDS) == 27623

#: ``BertConfig`` fields a tower dict may carry (absent ones: bert-base-uncased).
BERT_FIELDS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "intermediate_size", "hidden_act", "max_position_embeddings", "type_vocab_size",
    "layer_norm_eps", "pad_token_id", "position_embedding_type",
)  # fmt: skip
#: Image fields and their ViT-B/32 @ 224 px defaults (``VDRImageEncoderConfig``).
VIT_DEFAULTS = {"resolution": 224, "patch_size": 32, "width": 768, "layers": 12, "heads": 12}
#: Tensors older transformers versions saved as buffers; harmless to ignore.
IGNORED_SUFFIXES = ("embeddings.position_ids", "embeddings.token_type_ids")

#: Longest resized side (in multiples of the ViT resolution) made in full before cropping.
MAX_RESIZE_SIDE = 8

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def elu1p(x: torch.Tensor) -> torch.Tensor:
    """``elu(x) + 1``: ``x + 1`` for ``x >= 0``, else ``exp(x)`` (always positive)."""
    return F.elu(x) + 1.0


# --- the towers -------------------------------------------------------------------------


class TextTower(nn.Module):
    """``ln`` + ``bert_model``: parameter names as in the published state dict."""

    def __init__(self, kind: str, bert_config: Any, *, shift: int, normalize: bool) -> None:
        from transformers import BertModel

        super().__init__()
        self.kind = kind
        self.bert_model = BertModel(bert_config, add_pooling_layer=False)
        self.ln = nn.LayerNorm(bert_config.hidden_size, eps=1e-5)
        self.shift = shift
        self.normalize = normalize

    def vocab_ids(self) -> list[int]:
        """bert-base-uncased id of each output dimension."""
        if self.kind == "vdr":
            return list(range(self.shift, self.bert_model.config.vocab_size))
        return list(VALID_TOKEN_IDS)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Per-token lexical rows ``[B, T, |V|]`` (every position, padding included)."""
        hidden = self.bert_model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=torch.zeros_like(input_ids),
        ).last_hidden_state
        word_embeddings = self.bert_model.embeddings.word_embeddings.weight
        if self.kind == "vdr":
            projection = word_embeddings[self.shift :]
        else:
            projection = word_embeddings[list(VALID_TOKEN_IDS)]
        return elu1p(self.ln(hidden) @ projection.T)


class QuickGELU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    """Pre-LN transformer block of the CLIP ViT."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_1 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            OrderedDict(
                [
                    ("c_fc", nn.Linear(width, width * 4)),
                    ("gelu", QuickGELU()),
                    ("c_proj", nn.Linear(width * 4, width)),
                ]
            )
        )
        self.ln_2 = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class _Transformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.resblocks = nn.ModuleList(ResidualAttentionBlock(width, heads) for _ in range(layers))


class ImageTower(nn.Module):
    """The published ``VDRImageEncoder``: a ViT without class token, projected on 27,623 ids."""

    kind = "vdr_crossmodal_image"

    def __init__(self, resolution: int, patch_size: int, width: int, layers: int, heads: int):
        super().__init__()
        self.resolution = resolution
        self.grid = resolution // patch_size
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch_size, stride=patch_size, bias=False)
        self.positional_embedding = nn.Parameter(torch.zeros(self.grid**2, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = _Transformer(width, layers, heads)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(torch.zeros(len(VALID_TOKEN_IDS), width))

    def vocab_ids(self) -> list[int]:
        return list(VALID_TOKEN_IDS)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """Per-patch lexical rows ``[B, g*g, 27623]``, patches in row-major order."""
        x = self.conv1(pixels)  # [B, width, g, g]
        x = x.flatten(2).transpose(1, 2)  # [B, g*g, width]
        x = self.ln_pre(x + self.positional_embedding)
        for block in self.transformer.resblocks:
            x = block(x)
        return elu1p(self.ln_post(x) @ self.proj.T)


# --- loading ------------------------------------------------------------------------------


@dataclass
class TowerSpec:
    """What config.json says about one tower."""

    prefix: str  # "encoder_q" or "encoder_p"
    kind: str
    fields: dict[str, Any]
    max_len: int = DEFAULT_MAX_LEN
    topk: int | None = None


@dataclass
class LoadedTowers:
    text: dict[str, TextTower] = field(default_factory=dict)  # side -> tower
    image: ImageTower | None = None
    dense_sides: list[str] = field(default_factory=list)


def _tower_specs(config: dict, config_file: Path) -> tuple[dict[str, TowerSpec], bool]:
    """Parse ``encoder_q`` / ``encoder_p`` of config.json; returns specs by side."""
    shared = bool(config.get("shared_encoder", False))
    specs: dict[str, TowerSpec] = {}
    for side, key in SIDES.items():
        entry = config.get(key)
        if entry is None and shared and side == "document":
            continue
        if not isinstance(entry, dict):
            raise EncoderLoadError(f"{config_file}: '{key}' must be an object with a 'type'")
        kind = entry.get("type")
        if kind not in KNOWN_TYPES:
            raise EncoderLoadError(
                f"{config_file}: {key}.type is {kind!r}, not a VDR encoder type "
                f"({', '.join(KNOWN_TYPES)})"
            )
        max_len = entry.get("max_len", DEFAULT_MAX_LEN)
        if not isinstance(max_len, int) or max_len < 2:
            raise EncoderLoadError(f"{config_file}: {key}.max_len must be an integer >= 2")
        topk = entry.get("topk")
        specs[side] = TowerSpec(key, kind, entry, max_len, topk if isinstance(topk, int) else None)
    if shared:
        # Published BiEncoder: encoder_p *is* encoder_q, with the longer of the two max_len.
        query = specs["query"]
        if "document" in specs:
            query.max_len = max(query.max_len, specs["document"].max_len)
        specs["document"] = query
    return specs, shared


def _tower_state(
    state: dict[str, torch.Tensor], spec: TowerSpec, shared: bool, file: Path
) -> tuple[str, dict[str, torch.Tensor]]:
    """This tower's prefix and tensors, prefix stripped (a shared encoder may use either)."""
    prefixes = [spec.prefix] + (
        ["encoder_p" if spec.prefix == "encoder_q" else "encoder_q"] if shared else []
    )
    for prefix in prefixes:
        sub = {k[len(prefix) + 1 :]: v for k, v in state.items() if k.startswith(prefix + ".")}
        if sub:
            return prefix, sub
    sample = ", ".join(list(state)[:3])
    raise EncoderLoadError(
        f"{file}: no tensor starts with '{' or '.join(p + '.' for p in prefixes)}' "
        f"(keys look like: {sample}): not a VDR bi-encoder state dict"
    )


def _load_strict(
    module: nn.Module, sub: dict[str, torch.Tensor], prefix: str, file: Path, skip: tuple[str, ...]
) -> None:
    """Load ``sub`` into ``module``; any missing, unexpected or mis-shaped key is an error."""
    expected = module.state_dict()
    for key, param in expected.items():
        if key not in sub:
            raise EncoderLoadError(
                f"{file}: missing tensor {prefix}.{key} (shape {list(param.shape)} expected "
                "from config.json)"
            )
        if tuple(sub[key].shape) != tuple(param.shape):
            raise EncoderLoadError(
                f"{file}: {prefix}.{key} has shape {list(sub[key].shape)}, but config.json "
                f"implies {list(param.shape)}"
            )
    extra = [k for k in sub if k not in expected and not k.endswith(skip)]
    if extra:
        raise EncoderLoadError(
            f"{file}: unexpected tensor {prefix}.{extra[0]} for a {getattr(module, 'kind', '')} "
            f"tower ({len(extra)} such keys): does config.json describe these weights?"
        )
    # assign: the towers were built without initialising (or on the meta device).
    module.load_state_dict({k: sub[k].float() for k in expected}, strict=True, assign=True)


def _no_init() -> contextlib.AbstractContextManager:
    """transformers' context that skips random initialisation (loading fills every weight)."""
    try:
        from transformers.initialization import no_init_weights
    except ImportError:
        try:
            from transformers.modeling_utils import no_init_weights
        except ImportError:
            return contextlib.nullcontext()
    return no_init_weights()


def _build_text_tower(spec: TowerSpec, config_file: Path) -> TextTower:
    from transformers import BertConfig

    fields = {k: spec.fields[k] for k in BERT_FIELDS if k in spec.fields}
    try:
        bert_config = BertConfig(**fields)
    except Exception as exc:
        raise EncoderLoadError(f"{config_file}: bad BERT fields in {spec.prefix} ({exc})") from None
    pooling = spec.fields.get("pooling", "max")
    if pooling not in ("max", None):
        raise EncoderLoadError(
            f"{config_file}: {spec.prefix}.pooling is {pooling!r}; Lexlens reads max-pooled "
            "VDR towers only"
        )
    shift = spec.fields.get("shift_vocab_num", DEFAULT_SHIFT)
    if spec.kind == "vdr" and (
        not isinstance(shift, int) or not 0 <= shift < bert_config.vocab_size
    ):
        raise EncoderLoadError(f"{config_file}: {spec.prefix}.shift_vocab_num {shift!r} is invalid")
    if bert_config.vocab_size != BERT_VOCAB_SIZE:
        raise EncoderLoadError(
            f"{config_file}: {spec.prefix}.vocab_size is {bert_config.vocab_size}; VDR checkpoints "
            f"use the bert-base-uncased vocabulary ({BERT_VOCAB_SIZE} ids)"
        )
    normalize = spec.kind == "vdr_crossmodal_text" or bool(spec.fields.get("norm", False))
    try:
        with _no_init():  # every parameter is then loaded from the checkpoint
            return TextTower(spec.kind, bert_config, shift=shift, normalize=normalize)
    except (ValueError, TypeError) as exc:  # e.g. hidden_size not a multiple of the heads
        raise EncoderLoadError(f"{config_file}: bad BERT fields in {spec.prefix} ({exc})") from None


def _build_image_tower(spec: TowerSpec, config_file: Path) -> ImageTower:
    values = {k: spec.fields.get(k, default) for k, default in VIT_DEFAULTS.items()}
    for key, value in values.items():
        if not isinstance(value, int) or value <= 0:
            raise EncoderLoadError(f"{config_file}: {spec.prefix}.{key} must be a positive integer")
    if values["resolution"] % values["patch_size"] or values["width"] % values["heads"]:
        raise EncoderLoadError(
            f"{config_file}: {spec.prefix}: resolution must be a multiple of patch_size and "
            "width a multiple of heads"
        )
    with torch.device("meta"):  # no buffers: every tensor comes from the checkpoint
        return ImageTower(**values)


def load_vdr_checkpoint(path: Path, config: dict, *, device: str) -> Encoder:
    """Load a published VDR checkpoint directory as one :class:`VDREncoder`."""
    path = Path(path)
    config_file = path / "config.json"
    specs, shared = _tower_specs(config, config_file)
    if all(s.kind in DENSE_TYPES for s in specs.values()):
        raise EncoderLoadError(
            f"{config_file}: both towers are 'dpr' (dense [CLS] vectors): not a lexical VDR "
            "model, so Lexlens has no vocabulary weights to show"
        )
    file = find_weights(path)
    state = read_state_dict(file)
    towers = LoadedTowers()
    built: dict[int, nn.Module] = {}  # a shared encoder is built once
    for side, spec in specs.items():
        if spec.kind in DENSE_TYPES:
            towers.dense_sides.append(side)
            continue
        if id(spec) not in built:
            if spec.kind in TEXT_TYPES:
                module = _build_text_tower(spec, config_file)
                skip = IGNORED_SUFFIXES
            else:
                module = _build_image_tower(spec, config_file)
                skip = ()
            prefix, sub = _tower_state(state, spec, shared, file)
            _load_strict(module, sub, prefix, file, skip)
            built[id(spec)] = module.to(device).eval()
        module = built[id(spec)]
        if isinstance(module, ImageTower):
            if towers.image is not None and towers.image is not module:
                raise EncoderLoadError(
                    f"{config_file}: two different image towers are not supported"
                )
            towers.image = module
        else:
            towers.text[side] = module  # type: ignore[assignment]
    return VDREncoder(towers, specs, device=device, name=path.name, source=str(path))


def centre_view(image: Image.Image, size: int) -> tuple[Image.Image, tuple[float, ...]]:
    """The published view: shorter side to ``size`` (bicubic), centre ``size × size`` crop.

    Returns the crop and the ``(x0, y0, x1, y1)`` fractions of ``image`` it shows. A very
    elongated image (a 1 × 20,000 strip would resize to 224 × 4.5 M pixels) resamples only
    the crop's source box at the scale of the full resize: the same pixels up to a rare
    ±1 rounding difference.
    """
    from PIL import Image as PILImage

    from lexlens.models.images import resize_center_crop, to_rgb

    image = to_rgb(image)
    width, height = image.size
    if width <= height:
        new_w, new_h = size, int(size * height / width)
    else:
        new_w, new_h = int(size * width / height), size
    if max(new_w, new_h) <= MAX_RESIZE_SIDE * size:
        return resize_center_crop(image, size)
    left, top = round((new_w - size) / 2), round((new_h - size) / 2)
    sx, sy = width / new_w, height / new_h
    box = (left * sx, top * sy, (left + size) * sx, (top + size) * sy)
    # Horizontal pass, then vertical, as Pillow orders the full resize (bicubic overshoot is
    # clipped to 0..255 between the passes, so the order changes pixels).
    bicubic = PILImage.Resampling.BICUBIC
    rows = image.resize((size, height), bicubic, box=(box[0], 0, box[2], height))
    crop = rows.resize((size, size), bicubic, box=(0, box[1], size, box[3]))
    return crop, (box[0] / width, box[1] / height, box[2] / width, box[3] / height)


# --- the encoder ------------------------------------------------------------------------


class VDREncoder(Encoder):
    """A VDR bi-encoder: query and document text towers, or a text + image pair."""

    def __init__(
        self,
        towers: LoadedTowers,
        specs: dict[str, TowerSpec],
        *,
        device: str,
        name: str,
        source: str,
    ) -> None:
        self.towers = towers
        self.specs = specs
        self.device = device
        self.name = name
        self.source = source
        self.batch_size = 32
        self.image_batch_size = 16
        modules: list[nn.Module] = [*towers.text.values()] + (
            [towers.image] if towers.image else []
        )
        vocab_ids = [m.vocab_ids() for m in modules]  # type: ignore[operator]
        if any(ids != vocab_ids[0] for ids in vocab_ids):
            raise EncoderLoadError(
                f"{source}: the two towers output different vocabularies (e.g. different "
                "shift_vocab_num): they cannot be compared as one encoder"
            )
        #: bert-base-uncased id of each output dimension (``vocab[i]`` is its token).
        self.vocab_ids: list[int] = vocab_ids[0]
        self.tokenizer = load_bert_tokenizer()
        self.vocab = self.tokenizer.convert_ids_to_tokens(self.vocab_ids)
        self.capabilities = frozenset(
            ([Capability.TEXT_LEXICAL] if towers.text else [])
            + ([Capability.IMAGE_LEXICAL] if towers.image else [])
        )
        self.max_length = max(
            [self._text_max_len(side) for side in towers.text] or [DEFAULT_MAX_LEN]
        )
        #: The published retrieval gate (top-k dimensions kept), per side, for reference.
        self.topk = {side: spec.topk for side, spec in specs.items()}

    def _text_max_len(self, side: str) -> int:
        tower = self.towers.text[side]
        return min(self.specs[side].max_len, int(tower.bert_model.config.max_position_embeddings))

    def _text_tower(self, side: str) -> TextTower:
        if side not in SIDES:
            raise InputError(f"side must be 'query' or 'document', not {side!r}")
        if side in self.towers.text:
            return self.towers.text[side]
        if side in self.towers.dense_sides:
            raise ModalityError(
                f"the {side} tower of {self.name!r} is a dense DPR tower: it has no vocabulary "
                "weights for Lexlens to show"
            )
        raise ModalityError(
            f"the {side} tower of {self.name!r} encodes images, not text: use it on images"
        )

    @torch.inference_mode()
    def encode_texts(
        self, texts: list[str], side: str = "query", *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        """Encode with the query (``encoder_q``) or document (``encoder_p``) text tower."""
        tower = self._text_tower(side)
        check_texts(texts)
        max_len = self._text_max_len(side)
        # The published cross-modal text tower pads every text to max_len and max-pools
        # over all positions, [PAD] included; the vdr tower's single-text forward has no
        # padding, so padding rows are left out there.
        pad_to_max = tower.kind == "vdr_crossmodal_text"
        normalization = "l2" if tower.normalize else "none"
        out: list[LexicalEncoding] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            batch = tokenize_batch(self.tokenizer, chunk, max_len)
            ids, mask = batch.input_ids, batch.attention_mask
            if pad_to_max and ids.shape[1] < max_len:
                extra = max_len - ids.shape[1]
                ids = F.pad(ids, (0, extra), value=int(self.tokenizer.pad_token_id or 0))
                mask = F.pad(mask, (0, extra), value=0)
            rows = tower(ids.to(self.device), mask.to(self.device)).float()  # [B, T, |V|]
            for b in range(len(chunk)):
                n = int(mask[b].sum())
                token_ids = ids[b, :n].tolist()
                units = self.tokenizer.convert_ids_to_tokens(token_ids)
                unit_rows = rows[b, :n]
                notes: tuple[str, ...] = ()
                if pad_to_max and n < max_len:
                    # All padding positions as one unit: their elementwise max.
                    unit_rows = torch.cat([unit_rows, rows[b, n:].amax(dim=0, keepdim=True)])
                    units = [*units, "[PAD]"]
                    token_ids = [*token_ids, int(self.tokenizer.pad_token_id or 0)]
                    notes = (
                        f"{max_len - n} padding positions take part in the max pool (as in "
                        "the published cross-modal text tower); they are the unit '[PAD]'",
                    )
                out.append(
                    self._encoding(
                        unit_rows,
                        keep_units,
                        units=units,
                        normalization=normalization,
                        input_ids=token_ids,
                        truncated=batch.truncated[b],
                        notes=notes,
                    )
                )
        return out

    @torch.inference_mode()
    def encode_images(
        self, images: list[Image.Image], *, keep_units: bool = True
    ) -> list[LexicalEncoding]:
        """Encode with the image tower: shorter side to ``resolution``, centre crop, ViT."""
        from lexlens.models.images import image_notes, to_tensor

        tower = self.towers.image
        if tower is None:
            raise ModalityError(f"encoder {self.name!r} has no image tower (text-only checkpoint)")
        if isinstance(images, (str, bytes)) or not hasattr(images, "__len__"):
            raise InputError("pass a list of PIL images")
        if len(images) == 0:
            raise InputError("no images given")
        g = tower.grid
        units = [f"r{r}c{c}" for r in range(g) for c in range(g)]
        out: list[LexicalEncoding] = []
        for start in range(0, len(images), self.image_batch_size):
            chunk = images[start : start + self.image_batch_size]
            pixels, boxes = [], []
            for image in chunk:
                crop, box = centre_view(image, tower.resolution)
                pixels.append(to_tensor(crop, CLIP_MEAN, CLIP_STD))
                boxes.append(box)
            rows = tower(torch.stack(pixels).to(self.device)).float()  # [B, g*g, 27623]
            for b, image in enumerate(chunk):
                notes = image_notes(image)
                if boxes[b] != (0.0, 0.0, 1.0, 1.0):
                    notes = (*notes, "the VDR ViT sees only the centre square of the image")
                out.append(
                    self._encoding(
                        rows[b],
                        keep_units,
                        units=units,
                        normalization="l2",
                        grid=(g, g),
                        crop_box=boxes[b],
                        notes=notes,
                    )
                )
        return out

    @staticmethod
    def _encoding(
        rows: torch.Tensor, keep_units: bool, *, normalization: str, **kwargs: Any
    ) -> LexicalEncoding:
        pooled = rows.amax(dim=0)
        if normalization == "l2":
            pooled = F.normalize(pooled, dim=0)
        return LexicalEncoding(
            weights=pooled.cpu().numpy().astype(np.float32, copy=False),
            unit_weights=rows.cpu().numpy().astype(np.float32, copy=False) if keep_units else None,
            normalization=normalization,
            **kwargs,
        )
