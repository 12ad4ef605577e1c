"""Which family a checkpoint folder holds: told by its configuration first, its file names
second. No weights are read (for a legacy D2S ``model.pt``, its header only).

Both the loader (:func:`lexlens.models.registry.load_directory`) and the list of cached hub
models (:func:`lexlens.models.hub.cached_models`) ask this module. The order:

1. **Configuration.** Each configuration file says what the folder holds, by its content:

   - ``config.json`` (the model's Hugging Face configuration), the first rule that matches:
     ``model_type`` "d2s" or a ``D2SModel`` architecture → a D2S head; ``encoder_q`` /
     ``encoder_p`` → a VDR checkpoint; an ``architectures`` entry ``*ForMaskedLM`` → a
     masked LM, read as SPLADE; one ending in ``Model`` (``BertModel``) → a dense encoder;
   - ``lexlens_dense_pq.json`` → a dense model + product quantiser;
   - ``modules.json`` beside a config.json (sentence-transformers' module list) → SPLADE for
     a sparse encoder (``MLMTransformer`` / ``SpladePooling``), else a dense encoder.

   The files that speak must agree (a codebook's ``lexlens_dense_pq.json`` may sit beside
   the dense model it is for); otherwise the folder is refused in one line naming each file
   and what it says.
2. **A configuration default.** A config.json that names no family but is a BERT's without
   ``architectures`` (older transformers did not record them): a masked LM, read as SPLADE.
3. **File names**, only when no configuration decides: a ``model.pt`` holding a D2S head's
   tensors (lsr-multimodal's code before ``save_pretrained``) → a D2S head.
4. Nothing decides: one line saying what was looked for.

This module reads the families' configuration modules only (``vdr_config``,
``dense_config``, ``d2s_config``), never their modeling code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lexlens.models.base import Capability, EncoderLoadError
from lexlens.models.config_files import find_weights, read_config
from lexlens.models.d2s_config import (
    LEGACY_WEIGHTS,
    find_d2s_weights,
    holds_d2s_tensors,
    is_d2s_config,
)
from lexlens.models.dense_config import META_FILE, MODULES_FILE, modules_family, read_modules
from lexlens.models.vdr_config import IMAGE_TYPES, TEXT_TYPES
from lexlens.models.wordpiece import BERT_UNCASED_VOCAB

CONFIG_FILE = "config.json"

#: How each family reads in messages.
FAMILY_TEXT = {
    "dense-pq": "a dense model + product quantiser",
    "vdr": "a VDR checkpoint",
    "d2s": "a D2S head",
    "splade": "a masked LM (SPLADE)",
    "dense": "a dense encoder",
}


@dataclass(frozen=True)
class DirectoryKind:
    """What a checkpoint directory holds, told from its files alone (no weights read)."""

    family: str  # "dense-pq" | "vdr" | "d2s" | "splade" | "dense"
    capabilities: frozenset[Capability]
    description: str
    vocab_size: int | None = None
    config: dict | None = None
    #: The files that decided (``config.json + modules.json``, ``model.pt`` …).
    decided_by: str = ""


@dataclass(frozen=True)
class Claim:
    """What one configuration file says a folder holds, and why."""

    file: str
    family: str
    because: str


_DENSE = frozenset({Capability.DENSE})
_QUANTISED = frozenset({Capability.DENSE, Capability.QUANTISED, Capability.DIFFERENTIABLE})
_FEATURES = frozenset({Capability.FEATURE_LEXICAL})


def detect_directory(path: Path, *, check_weights: bool = False) -> DirectoryKind:
    """The family of a checkpoint directory, in the order of the module docstring.

    ``check_weights``: also require the weight file to be present (the app's list of
    cached hub models offers only what can load). Raises ``EncoderLoadError`` in one line
    when the configuration files disagree or nothing tells the family.
    """
    path = Path(path)
    config_path = path / CONFIG_FILE
    config = read_config(config_path) if config_path.exists() else None
    claims = configuration_claims(path, config)
    family = agreed_family(path, claims)
    decided_by = " + ".join(c.file for c in claims)
    if family is None and config is not None and _is_bert_without_architectures(config):
        family, decided_by = "splade", f"{CONFIG_FILE} (a BERT without architectures)"
    if family is None and _holds_legacy_d2s(path):
        family, decided_by = "d2s", LEGACY_WEIGHTS
    if family is None:
        if config is None:
            raise EncoderLoadError(
                f"{path} has no config.json: not a VDR, SPLADE, D2S or dense+PQ checkpoint"
            )
        raise EncoderLoadError(
            f"{config_path}: cannot tell the model family (no 'encoder_q'/'encoder_p' for VDR, "
            "no '*ForMaskedLM' architecture for SPLADE, no model_type 'd2s', no modules.json "
            "or '*Model' for a dense model)"
        )
    if check_weights:
        _check_weights(path, family)
    return _kind(family, config, claims, decided_by)


def configuration_claims(path: Path, config: dict | None) -> list[Claim]:
    """What each configuration file of ``path`` says it holds (step 1), in the order listed."""
    claims = []
    if config is not None:
        claim = config_json_claim(config, path / CONFIG_FILE)
        if claim is not None:
            claims.append(claim)
    if (path / META_FILE).exists():
        claims.append(Claim(META_FILE, "dense-pq", "a codebook for a dense model"))
    if config is not None and (path / MODULES_FILE).exists():
        modules = read_modules(path)
        claims.append(
            Claim(MODULES_FILE, modules_family(modules), "modules " + " → ".join(modules))
        )
    return claims


def config_json_claim(config: dict, config_path: Path) -> Claim | None:
    """What ``config.json`` says: the first of its rules that matches, or ``None``."""
    if is_d2s_config(config):
        field = "model_type 'd2s'" if config.get("model_type") == "d2s" else "D2SModel"
        return Claim(CONFIG_FILE, "d2s", field)
    if "encoder_q" in config or "encoder_p" in config:
        return Claim(CONFIG_FILE, "vdr", "encoder_q/encoder_p")
    architectures = _architectures(config, config_path)
    masked = [a for a in architectures if "MaskedLM" in a]
    if masked:
        return Claim(CONFIG_FILE, "splade", f"architectures {masked[0]}")
    encoders = [a for a in architectures if a.endswith("Model")]
    if encoders:
        return Claim(CONFIG_FILE, "dense", f"architectures {encoders[0]}")
    return None


def agreed_family(path: Path, claims: list[Claim]) -> str | None:
    """The family every claim names (a dense model + its codebook: ``dense-pq``), or ``None``
    without claims; claims that disagree are refused in one line."""
    families = {c.family for c in claims}
    if families == {"dense", "dense-pq"}:
        return "dense-pq"
    if len(families) <= 1:
        return next(iter(families), None)
    said = "; ".join(f"{c.file} says {FAMILY_TEXT[c.family]} ({c.because})" for c in claims)
    raise EncoderLoadError(
        f"{path}: its configuration files disagree ({said}): remove the one that does not "
        "describe these weights"
    )


def _architectures(config: dict, config_path: Path) -> list[str]:
    """config.json's ``architectures`` (absent: none); anything but class names is refused."""
    architectures = config.get("architectures")
    if architectures is not None and (
        not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures)
    ):
        raise EncoderLoadError(
            f"{config_path}: 'architectures' must be a list of class names, got {architectures!r}"
        )
    return architectures or []


def _is_bert_without_architectures(config: dict) -> bool:
    return config.get("model_type") == "bert" and not config.get("architectures")


def _holds_legacy_d2s(path: Path) -> bool:
    """A ``model.pt`` whose header names a D2S head's tensors (step 3)."""
    weights = path / LEGACY_WEIGHTS
    if not weights.is_file():
        return False
    from lexlens.models.checkpoint import tensor_shapes  # heavy: loads torch

    try:
        return holds_d2s_tensors(tensor_shapes(weights))
    except EncoderLoadError:
        return False


def _check_weights(path: Path, family: str) -> None:
    """The family's weight file is present (a dense + PQ folder names its model elsewhere)."""
    if family == "d2s":
        if find_d2s_weights(path) is None:
            raise EncoderLoadError(f"{path} has no D2S weights file")
    elif family != "dense-pq":
        find_weights(path)


def _kind(family: str, config: dict | None, claims: list[Claim], decided_by: str) -> DirectoryKind:
    """The detected family's capabilities, description and vocabulary size."""
    if family == "dense-pq":
        description = "dense model + product quantiser"
        return DirectoryKind(family, _QUANTISED, description, decided_by=decided_by)
    if family == "d2s":
        legacy = decided_by == LEGACY_WEIGHTS
        description = "D2S head" if legacy else "D2S head (dense features → vocabulary)"
        return DirectoryKind(family, _FEATURES, description, BERT_UNCASED_VOCAB, config, decided_by)
    config = config or {}
    if family == "vdr":
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
        return DirectoryKind(family, frozenset(caps), "VDR checkpoint", None, config, decided_by)
    if family == "splade":
        vocab = config.get("vocab_size")
        caps = frozenset({Capability.TEXT_LEXICAL})
        vocab_size = vocab if isinstance(vocab, int) else None
        description = "masked LM read as SPLADE"
        return DirectoryKind(family, caps, description, vocab_size, config, decided_by)
    if any(c.file == MODULES_FILE for c in claims):
        description = "sentence-transformers model"
    else:
        description = "transformers encoder (mean pooling)"
    return DirectoryKind(family, _DENSE, description, None, config, decided_by)
