"""Published VDR checkpoints: what ``config.json`` says, and strict loading of the towers.

A checkpoint directory holds ``config.json`` and ``model.safetensors`` or
``pytorch_model.bin``: the state dict of a bi-encoder whose towers live under the prefixes
``encoder_q.`` (queries) and ``encoder_p.`` (documents / images). Each tower's dict in
``config.json`` names its ``type`` and may carry BERT fields (``hidden_size``, …) or image
fields (``resolution``, ``patch_size``, ``width``, ``layers``, ``heads``); absent ones are
bert-base-uncased and ViT-B/32 at 224 px.

Loading is strict and checked before memory is allocated: sizes within
``checkpoint.SIZE_LIMITS``; every tower built on the meta device and compared key by key
with the weight file's header (missing, unexpected or mis-shaped tensors are refused,
naming file, key and both shapes); then the tensors are read (NaN/Inf refused) and the
towers built for real.

Texts are cut at the tower's own ``max_len`` (default 256; a shared encoder uses the longer
of the two); the top-level ``max_len`` is not read by the published towers. ``dpr`` towers
are dense ([CLS] vectors), not lexical: Lexlens cannot read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from lexlens.models.base import EncoderLoadError
from lexlens.models.checkpoint import (
    check_sizes,
    find_weights,
    no_init,
    read_state_dict,
    tensor_shapes,
)

if TYPE_CHECKING:
    from lexlens.models.vdr_towers import ImageTower, TextTower

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


@dataclass
class TowerSpec:
    """What config.json says about one tower."""

    prefix: str  # "encoder_q" or "encoder_p"
    kind: str
    fields: dict[str, Any]
    max_len: int = DEFAULT_MAX_LEN
    topk: int | None = None

    @property
    def norm(self) -> bool:
        """The tower dict's ``norm`` (``VDREncoderConfig.norm``, default False)."""
        return bool(self.fields.get("norm", False))


@dataclass
class LoadedTowers:
    text: dict[str, TextTower] = field(default_factory=dict)  # side -> tower
    image: ImageTower | None = None
    dense_sides: list[str] = field(default_factory=list)


def tower_specs(config: dict, config_file: Path) -> tuple[dict[str, TowerSpec], bool]:
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
        if isinstance(max_len, bool) or not isinstance(max_len, int) or not 2 <= max_len <= 8192:
            raise EncoderLoadError(f"{config_file}: {key}.max_len must be an integer in 2..8192")
        check_sizes(entry, config_file, f"{key}.")
        topk = entry.get("topk")
        specs[side] = TowerSpec(key, kind, entry, max_len, topk if isinstance(topk, int) else None)
    if shared:
        # Published BiEncoder: encoder_p *is* encoder_q, with the longer of the two max_len.
        query = specs["query"]
        if "document" in specs:
            query.max_len = max(query.max_len, specs["document"].max_len)
        specs["document"] = query
    return specs, shared


def load_towers(path: Path, config: dict, *, device: str) -> tuple[LoadedTowers, dict]:
    """Build and strictly load every lexical tower of a checkpoint directory."""
    config_file = path / "config.json"
    specs, shared = tower_specs(config, config_file)
    if all(s.kind in DENSE_TYPES for s in specs.values()):
        raise EncoderLoadError(
            f"{config_file}: both towers are 'dpr' (dense [CLS] vectors): not a lexical VDR "
            "model, so Lexlens has no vocabulary weights to show"
        )
    file = find_weights(path)
    shapes = tensor_shapes(file)  # the header only
    unique = {id(s): s for s in specs.values() if s.kind not in DENSE_TYPES}
    prefixes: dict[int, str] = {}
    for key, spec in unique.items():  # checked on the meta device: nothing allocated yet
        with torch.device("meta"):
            skeleton = _build(spec, config_file)
        prefix, sub = _tower_keys(shapes, spec, shared, file)
        _check_strict(skeleton, sub, prefix, file)
        prefixes[key] = prefix
    state = read_state_dict(file)
    towers = LoadedTowers()
    built: dict[int, nn.Module] = {}  # a shared encoder is built once
    for side, spec in specs.items():
        if spec.kind in DENSE_TYPES:
            towers.dense_sides.append(side)
            continue
        if id(spec) not in built:
            module = _build(spec, config_file, real=True)
            prefix = prefixes[id(spec)]
            sub = {k[len(prefix) + 1 :]: v for k, v in state.items() if k.startswith(prefix + ".")}
            # assign: the towers were built without initialising (or on the meta device).
            expected = module.state_dict()
            module.load_state_dict({k: sub[k].float() for k in expected}, strict=True, assign=True)
            built[id(spec)] = module.to(device).eval()
        module = built[id(spec)]
        if spec.kind in IMAGE_TYPES:
            if towers.image is not None and towers.image is not module:
                raise EncoderLoadError(
                    f"{config_file}: two different image towers are not supported"
                )
            towers.image = module  # type: ignore[assignment]
        else:
            towers.text[side] = module  # type: ignore[assignment]
    return towers, specs


def _tower_keys(
    shapes: dict[str, tuple[int, ...]], spec: TowerSpec, shared: bool, file: Path
) -> tuple[str, dict[str, tuple[int, ...]]]:
    """This tower's prefix and tensor shapes, prefix stripped (a shared encoder may use either)."""
    prefixes = [spec.prefix] + (
        ["encoder_p" if spec.prefix == "encoder_q" else "encoder_q"] if shared else []
    )
    for prefix in prefixes:
        sub = {k[len(prefix) + 1 :]: v for k, v in shapes.items() if k.startswith(prefix + ".")}
        if sub:
            return prefix, sub
    sample = ", ".join(list(shapes)[:3])
    raise EncoderLoadError(
        f"{file}: no tensor starts with '{' or '.join(p + '.' for p in prefixes)}' "
        f"(keys look like: {sample}): not a VDR bi-encoder state dict"
    )


def _check_strict(
    module: nn.Module, shapes: dict[str, tuple[int, ...]], prefix: str, file: Path
) -> None:
    """Every tensor of ``module`` in ``shapes`` with its shape; nothing unexpected."""
    expected = module.state_dict()
    for key, param in expected.items():
        if key not in shapes:
            raise EncoderLoadError(
                f"{file}: missing tensor {prefix}.{key} (shape {list(param.shape)} expected "
                "from config.json)"
            )
        if tuple(shapes[key]) != tuple(param.shape):
            raise EncoderLoadError(
                f"{file}: {prefix}.{key} has shape {list(shapes[key])}, but config.json "
                f"implies {list(param.shape)}"
            )
    skip = IGNORED_SUFFIXES if getattr(module, "kind", "") in TEXT_TYPES else ()
    extra = [k for k in shapes if k not in expected and not k.endswith(skip)]
    if extra:
        raise EncoderLoadError(
            f"{file}: unexpected tensor {prefix}.{extra[0]} for a {getattr(module, 'kind', '')} "
            f"tower ({len(extra)} such keys): does config.json describe these weights?"
        )


def _build(spec: TowerSpec, config_file: Path, *, real: bool = False) -> nn.Module:
    if spec.kind in TEXT_TYPES:
        return _build_text_tower(spec, config_file, real=real)
    return _build_image_tower(spec, config_file)


def _build_text_tower(spec: TowerSpec, config_file: Path, *, real: bool) -> TextTower:
    from transformers import BertConfig

    from lexlens.models.vdr_towers import TextTower

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
    normalize = spec.kind == "vdr_crossmodal_text" or spec.norm
    try:
        if real:
            with no_init():  # every parameter is then loaded from the checkpoint
                return TextTower(spec.kind, bert_config, shift=shift, normalize=normalize)
        return TextTower(spec.kind, bert_config, shift=shift, normalize=normalize)
    except (ValueError, TypeError) as exc:  # e.g. hidden_size not a multiple of the heads
        raise EncoderLoadError(f"{config_file}: bad BERT fields in {spec.prefix} ({exc})") from None


def _build_image_tower(spec: TowerSpec, config_file: Path) -> ImageTower:
    from lexlens.models.vdr_towers import ImageTower

    values = {k: spec.fields.get(k, default) for k, default in VIT_DEFAULTS.items()}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise EncoderLoadError(f"{config_file}: {spec.prefix}.{key} must be a positive integer")
    if values["resolution"] % values["patch_size"] or values["width"] % values["heads"]:
        raise EncoderLoadError(
            f"{config_file}: {spec.prefix}: resolution must be a multiple of patch_size and "
            "width a multiple of heads"
        )
    with torch.device("meta"):  # no buffers: every tensor comes from the checkpoint
        return ImageTower(**values)
