"""D2S heads (github.com/thongnt99/lsr-multimodal): what their files say.

On disk (``save_pretrained``): ``config.json`` with ``"model_type": "d2s"`` (and the
architecture ``D2SModel``), ``dense_size`` and ``mlm_head``, and ``model.safetensors`` or
``pytorch_model.bin`` (older code: ``model.pt``, a plain state dict, and no config.json)
holding ``proj.{weight,bias}``, ``vocab_layer_norm.{weight,bias}`` and
``vocab_projector.{weight,bias}``. The sizes are read from the weight file's header
(hidden = 768 for the published heads); the config's ``dense_size``, when present, must
agree with ``proj.weight``.

This module only reads configuration (as Hugging Face's ``configuration_*`` modules never
import ``modeling_*``): the head and its encoder are in :mod:`lexlens.models.d2s`.
"""

from __future__ import annotations

from pathlib import Path

from lexlens.models.base import EncoderLoadError
from lexlens.models.config_files import check_sizes
from lexlens.models.wordpiece import BERT_UNCASED_VOCAB

#: Weight files of a D2S head directory, in the order they are looked for.
D2S_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.pt")
#: The weight file of lsr-multimodal's code before ``save_pretrained`` (no config.json).
LEGACY_WEIGHTS = "model.pt"
#: Tensors every D2S head holds (what tells a legacy ``model.pt`` apart).
D2S_KEYS = frozenset({"proj.weight", "vocab_projector.weight"})
#: The published heads: DistilBERT's MLM head (hidden 768) on 256-d BLIP/ALBEF features.
DEFAULT_HIDDEN = 768
DEFAULT_DENSE = 256
#: ``mlm_head`` values whose vocabulary is bert-base-uncased (the typo is from an early
#: default in lsr-multimodal, fixed in commit bc4a212).
UNCASED_HEADS = ("distilbert-base-uncased", "distilbert-based-uncased", "bert-base-uncased")


def is_d2s_config(config: dict) -> bool:
    """``config.json`` of a D2S head (``model_type`` "d2s" or a ``D2SModel`` architecture)."""
    architectures = config.get("architectures") or []
    return config.get("model_type") == "d2s" or (
        isinstance(architectures, list) and "D2SModel" in architectures
    )


def find_d2s_weights(directory: Path) -> Path | None:
    """The weight file of a D2S head directory (:data:`D2S_WEIGHT_FILES` order), or ``None``."""
    for name in D2S_WEIGHT_FILES:
        if (directory / name).is_file():
            return directory / name
    return None


def strip_prefix(state: dict) -> dict:
    """Drop a prefix every key shares (``module.`` from DataParallel, ``model.``)."""
    for prefix in ("module.", "model."):
        if state and all(k.startswith(prefix) for k in state):
            return {k[len(prefix) :]: v for k, v in state.items()}
    return state


def holds_d2s_tensors(shapes: dict) -> bool:
    """Whether a weight file's tensor names (a shared prefix dropped) are a D2S head's."""
    return set(strip_prefix(shapes)) >= D2S_KEYS


def head_sizes(
    config: dict, shapes: dict[str, tuple[int, ...]], config_file: Path, weights: Path
) -> tuple[int, int, int]:
    """``(dense_size, hidden, vocab)`` from the header, checked against config.json."""
    dense_cfg = config.get("dense_size")
    if dense_cfg is not None and (
        isinstance(dense_cfg, bool) or not isinstance(dense_cfg, int) or not 1 <= dense_cfg <= 65536
    ):
        raise EncoderLoadError(
            f"{config_file}: dense_size = {dense_cfg!r} is not a plausible size (a positive integer)"
        )
    proj = shapes.get("proj.weight")
    if proj is not None and len(proj) != 2:
        raise EncoderLoadError(f"{weights}: tensor 'proj.weight' has shape {proj}, expected 2-D")
    hidden = int(proj[0]) if proj else DEFAULT_HIDDEN
    dense = int(proj[1]) if proj else int(dense_cfg or DEFAULT_DENSE)
    if proj and dense_cfg is not None and dense != dense_cfg:
        raise EncoderLoadError(
            f"{weights}: tensor 'proj.weight' has shape {tuple(proj)}, but {config_file.name} "
            f"says dense_size = {dense_cfg}"
        )
    check_sizes({"hidden_size": hidden, "dim": dense}, weights, "proj.weight: ")
    projector = shapes.get("vocab_projector.weight")
    vocab_size = int(projector[0]) if projector and len(projector) == 2 else BERT_UNCASED_VOCAB
    if vocab_size != BERT_UNCASED_VOCAB:
        raise EncoderLoadError(
            f"{weights}: tensor 'vocab_projector.weight' has {vocab_size} rows; a D2S head "
            f"outputs the bert-base-uncased vocabulary ({BERT_UNCASED_VOCAB:,} tokens)"
        )
    return dense, hidden, vocab_size


def vocabulary_notes(config: dict) -> tuple[str, ...]:
    """A notice when ``mlm_head`` names another head than a bert-base-uncased one."""
    mlm_head = config.get("mlm_head")
    if isinstance(mlm_head, str) and mlm_head not in UNCASED_HEADS:
        return (
            f"mlm_head is {mlm_head!r}: outputs are decoded with the bert-base-uncased "
            "vocabulary (30,522 WordPiece tokens), which its vocabulary size matches",
        )
    return ()
