"""Strict, header-first loading of a published VDR checkpoint's towers.

Checked before memory is allocated: sizes within ``checkpoint.SIZE_LIMITS``
(:func:`lexlens.models.vdr_config.tower_specs`); every tower built on the meta device and
compared key by key with the weight file's header (missing, unexpected or mis-shaped
tensors are refused, naming file, key and both shapes); then the tensors are read (NaN/Inf
refused) and the towers built for real.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from lexlens.models.base import EncoderLoadError
from lexlens.models.checkpoint import no_init, read_state_dict, tensor_shapes
from lexlens.models.config_files import find_weights
from lexlens.models.imports import HEAVY_IMPORTS
from lexlens.models.vdr_config import (
    BERT_FIELDS,
    DEFAULT_SHIFT,
    DENSE_TYPES,
    IMAGE_TYPES,
    TEXT_TYPES,
    VIT_DEFAULTS,
    TowerSpec,
    tower_specs,
)
from lexlens.models.vdr_towers import ImageTower, TextTower
from lexlens.models.wordpiece import BERT_UNCASED_VOCAB

#: Tensors older transformers versions saved as buffers; harmless to ignore.
IGNORED_SUFFIXES = ("embeddings.position_ids", "embeddings.token_type_ids")


@dataclass
class LoadedTowers:
    """The loaded towers of a checkpoint: text towers by side, the image tower, dense sides."""

    text: dict[str, TextTower] = field(default_factory=dict)  # side -> tower
    image: ImageTower | None = None
    dense_sides: list[str] = field(default_factory=list)


def load_towers(
    path: Path, config: dict, *, device: str
) -> tuple[LoadedTowers, dict[str, TowerSpec]]:
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
    with HEAVY_IMPORTS:
        from transformers import BertConfig  # heavy: transformers, under HEAVY_IMPORTS

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
    if bert_config.vocab_size != BERT_UNCASED_VOCAB:
        raise EncoderLoadError(
            f"{config_file}: {spec.prefix}.vocab_size is {bert_config.vocab_size}; VDR checkpoints "
            f"use the bert-base-uncased vocabulary ({BERT_UNCASED_VOCAB} ids)"
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
