"""What a checkpoint directory holds, told from its files alone (no weights are read).

Both the loader (:func:`lexlens.models.registry.load_directory`) and the list of cached
hub models (:func:`lexlens.models.hub.cached_models`) ask this module which family a
directory is: a dense model + product quantiser, a VDR checkpoint, a D2S head, a masked
LM read as SPLADE, or a dense sentence-transformers / transformers encoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lexlens.models.base import Capability, EncoderLoadError
from lexlens.models.wordpiece import BERT_UNCASED_VOCAB


@dataclass(frozen=True)
class DirectoryKind:
    """What a checkpoint directory holds, told from its files alone (no weights read)."""

    family: str  # "dense-pq" | "vdr" | "d2s" | "splade" | "dense"
    capabilities: frozenset[Capability]
    description: str
    vocab_size: int | None = None
    config: dict | None = None


_DENSE = frozenset({Capability.DENSE})
_QUANTISED = frozenset({Capability.DENSE, Capability.QUANTISED, Capability.DIFFERENTIABLE})


def detect_directory(path: Path, *, check_weights: bool = False) -> DirectoryKind:
    """Detect a checkpoint directory's family from its files alone.

    What each family needs is listed in :func:`lexlens.models.registry.load_directory`.

    ``check_weights``: also require the weight file to be present (the app's list of
    cached hub models offers only what can load). Raises ``EncoderLoadError`` when the
    family cannot be told.
    """
    from lexlens.models.config_files import find_weights, read_config
    from lexlens.models.d2s import find_d2s_weights, is_d2s_config, is_legacy_d2s_dir

    path = Path(path)
    if (path / "lexlens_dense_pq.json").exists():
        return DirectoryKind("dense-pq", _QUANTISED, "dense model + product quantiser")
    config_path = path / "config.json"
    if not config_path.exists():
        if is_legacy_d2s_dir(path):
            return DirectoryKind(
                "d2s", frozenset({Capability.FEATURE_LEXICAL}), "D2S head", BERT_UNCASED_VOCAB
            )
        raise EncoderLoadError(
            f"{path} has no config.json: not a VDR, SPLADE, D2S or dense+PQ checkpoint"
        )
    config = read_config(config_path)
    if is_d2s_config(config):
        if check_weights and find_d2s_weights(path) is None:
            raise EncoderLoadError(f"{path} has no D2S weights file")
        return DirectoryKind(
            "d2s",
            frozenset({Capability.FEATURE_LEXICAL}),
            "D2S head (dense features → vocabulary)",
            BERT_UNCASED_VOCAB,
            config,
        )
    if check_weights:
        find_weights(path)
    if "encoder_q" in config or "encoder_p" in config:
        from lexlens.models.vdr_config import IMAGE_TYPES, TEXT_TYPES

        types = {
            str(config[side].get("type"))
            for side in ("encoder_q", "encoder_p")
            if isinstance(config.get(side), dict)
        }
        caps = set()
        if types & set(TEXT_TYPES):
            caps.add(Capability.TEXT_LEXICAL)
        if types & set(IMAGE_TYPES):
            caps.add(Capability.IMAGE_LEXICAL)
        return DirectoryKind("vdr", frozenset(caps), "VDR checkpoint", None, config)
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
        return DirectoryKind("dense", _DENSE, "sentence-transformers model", None, config)
    if masked_lm or (config.get("model_type") == "bert" and not architectures):
        vocab = config.get("vocab_size")
        return DirectoryKind(
            "splade",
            frozenset({Capability.TEXT_LEXICAL}),
            "masked LM read as SPLADE",
            vocab if isinstance(vocab, int) else None,
            config,
        )
    if any(a.endswith("Model") for a in architectures):
        return DirectoryKind("dense", _DENSE, "transformers encoder (mean pooling)", None, config)
    raise EncoderLoadError(
        f"{config_path}: cannot tell the model family (no 'encoder_q'/'encoder_p' for VDR, "
        "no '*ForMaskedLM' architecture for SPLADE, no model_type 'd2s', no modules.json or "
        "'*Model' for a dense model)"
    )
