"""Strict, header-first loading of a dense model, and of what a dense + PQ spec names.

The base model (:func:`load_base`), checked before memory is allocated: config.json
readable with plausible sizes (:func:`lexlens.models.config_files.check_sizes`), the weight
file's tensor shapes against a meta-device build of the config; then sentence-transformers
loads it from local files only, and no weight may be NaN or Inf. Its modules must be
Transformer → Pooling [→ Dense] [→ Normalize] (:data:`lexlens.models.dense_config.HEAD_MODULES`):
a transformers model first, so Integrated Gradients can enter at its word embeddings.

A saved codebook (:func:`load_saved_codebook`) and a corpus to fit one on
(:func:`read_corpus`) are what ``lexlens_dense_pq.json`` may name
(:func:`lexlens.models.dense_config.read_spec`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from lexlens.models.base import EncoderLoadError
from lexlens.models.checkpoint import check_finite, check_header, tensor_shapes
from lexlens.models.config_files import check_sizes, find_weights, first_line, read_config
from lexlens.models.dense_config import HEAD_MODULES, META_FILE, MODULES_FILE
from lexlens.models.files import read_bytes
from lexlens.models.imports import HEAVY_IMPORTS
from lexlens.models.pq import ProductQuantizer


def load_base(base_dir: Path, device: str) -> tuple[Any, tuple[str, ...]]:
    """Load a local sentence-transformers (or plain transformers) encoder directory.

    Returns the ``SentenceTransformer`` and the notes about how it was read.
    """
    base_dir = Path(base_dir)
    if not base_dir.is_dir():
        raise EncoderLoadError(f"{base_dir} is not a directory with a dense model")
    config_file = base_dir / "config.json"
    if not config_file.exists():
        raise EncoderLoadError(f"{base_dir} has no config.json: not a transformers model")
    check_sizes(read_config(config_file), config_file)
    weights = find_weights(base_dir)
    _check_weights_header(base_dir, weights)
    st, notes = _load_sentence_transformer(base_dir, device)
    check_finite(st.state_dict().items(), weights)
    return st, notes


def _check_weights_header(base_dir: Path, weights: Path) -> None:
    """The weight file's shapes against a meta-device build of config.json (no allocation)."""
    with HEAVY_IMPORTS:
        from transformers import AutoConfig, AutoModel  # heavy: transformers, under HEAVY_IMPORTS

    try:
        config = AutoConfig.from_pretrained(str(base_dir), local_files_only=True)
        with torch.device("meta"):
            skeleton = AutoModel.from_config(config)
    except Exception as exc:  # transformers raises many types for a bad config
        raise EncoderLoadError(
            f"{base_dir / 'config.json'}: not a usable model config ({first_line(exc)})"
        ) from None
    shapes = tensor_shapes(weights)
    prefix = f"{skeleton.base_model_prefix}."
    if prefix != "." and all(k.startswith(prefix) for k in shapes if "." in k):
        shapes = {k[len(prefix) :]: v for k, v in shapes.items()}
    check_header(skeleton, shapes, weights, optional=("position_ids", "token_type_ids"))


def _load_sentence_transformer(base_dir: Path, device: str) -> tuple[Any, tuple[str, ...]]:
    """``SentenceTransformer(base_dir)`` from local files, quietly; checks its modules."""
    with HEAVY_IMPORTS:
        import transformers  # heavy: transformers, under HEAVY_IMPORTS

    transformers.utils.logging.disable_progress_bar()
    st_log = logging.getLogger("sentence_transformers")
    level = st_log.level
    st_log.setLevel(logging.ERROR)  # e.g. "creating a new one with mean pooling": noted below
    try:
        with HEAVY_IMPORTS:
            # heavy: sentence_transformers, under HEAVY_IMPORTS
            from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(base_dir), device=device, local_files_only=True)
    except Exception as exc:
        raise EncoderLoadError(
            f"{base_dir}: cannot load the dense model ({first_line(exc)})"
        ) from None
    finally:
        st_log.setLevel(level)
    modules = list(st)
    kinds = [type(mod).__name__ for mod in modules]
    if not modules or kinds[0] != "Transformer" or not hasattr(modules[0], "auto_model"):
        raise EncoderLoadError(
            f"{base_dir}: the first sentence-transformers module is {kinds[:1]}, not a "
            "Transformer: Lexlens needs a transformers model to attribute words"
        )
    other = [k for k in kinds[1:] if k not in HEAD_MODULES]
    if other or "Pooling" not in kinds:
        raise EncoderLoadError(
            f"{base_dir}: modules {' → '.join(kinds)}; Lexlens reads Transformer → Pooling "
            "[→ Dense] [→ Normalize]"
        )
    if st.max_seq_length is None:
        st.max_seq_length = min(int(modules[0].auto_model.config.max_position_embeddings), 512)
    notes: tuple[str, ...] = ()
    if not (base_dir / MODULES_FILE).exists():
        notes = ("no sentence-transformers modules.json: mean pooling over the tokens",)
    return st, notes


def load_saved_codebook(path: Path, spec: dict[str, Any]) -> ProductQuantizer:
    """``codebook.safetensors`` beside ``lexlens_dense_pq.json``, its M checked against the spec."""
    pq = ProductQuantizer.load(path, notes=tuple(spec["notes"]), meta=spec["provenance"])
    if "m" in spec and int(spec["m"]) != pq.m:
        raise EncoderLoadError(f"{path / META_FILE}: m={spec['m']} but the codebook has M={pq.m}")
    return pq


def read_corpus(path: Path) -> list[str]:
    """One text per non-empty line of a UTF-8 file: a regular file of at most
    :data:`~lexlens.models.files.MAX_TEXT_FILE_BYTES` (a device or a FIFO is refused before
    it is opened, so ``/dev/zero`` never fills memory)."""
    data, _ = read_bytes(path, f"corpus {path}", advice="fit the codebooks on fewer texts")
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise EncoderLoadError(f"{path}: the corpus is not UTF-8 text") from None
    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        raise EncoderLoadError(f"{path}: the corpus has no text")
    return texts
