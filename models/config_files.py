"""Reading a checkpoint folder's configuration files, without torch.

The first two checks of a checkpoint (:mod:`lexlens.models.checkpoint` lists them all) need
only JSON: ``config.json`` readable and a JSON object (:func:`read_config`), and no absurd
size in it (:func:`check_sizes`: a hidden size of a million would allocate terabytes). The
configuration modules of each family (``vdr_config``, ``dense_config``, ``d2s_config``) and
the detection of a folder's family (``detect``) read their files through this module, so
none of them imports torch, transformers or faiss.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lexlens.models.base import EncoderLoadError

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")

#: Largest plausible value of each size field of a (BERT-family / ViT) config. Real retrieval
#: encoders are far below (BERT-large: 1024 hidden, 24 layers, 4096 intermediate).
SIZE_LIMITS = {
    "hidden_size": 16_384,
    "num_hidden_layers": 256,
    "num_attention_heads": 512,
    "intermediate_size": 131_072,
    "vocab_size": 1_000_000,
    "max_position_embeddings": 131_072,
    "type_vocab_size": 1_024,
    "dim": 16_384,  # DistilBERT
    "hidden_dim": 131_072,
    "n_layers": 256,
    "n_heads": 512,
    "resolution": 4_096,  # VDR image tower
    "patch_size": 1_024,
    "width": 16_384,
    "layers": 256,
    "heads": 512,
}


def find_weights(directory: Path) -> Path:
    """The weights file of a checkpoint directory (safetensors preferred)."""
    for name in WEIGHT_FILES:
        if (directory / name).is_file():
            return directory / name
    raise EncoderLoadError(
        f"{directory} has no weights file (expected one of: {', '.join(WEIGHT_FILES)})"
    )


def first_line(exc: BaseException, limit: int = 160) -> str:
    """The first line of an exception's message (libraries write long, multi-line ones)."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:limit]


def read_json(path: Path) -> Any:
    """A JSON file's value; unreadable or invalid content is one clear line naming the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EncoderLoadError(f"{path} not found") from None
    except OSError as exc:  # PermissionError, a directory, an I/O error …
        raise EncoderLoadError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise EncoderLoadError(f"{path} is not valid JSON: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise EncoderLoadError(f"{path} is not valid JSON: {exc}") from None


def read_config(path: Path) -> dict[str, Any]:
    """config.json as a dict; unreadable, invalid or non-object content is one clear line."""
    config = read_json(path)
    if not isinstance(config, dict):
        raise EncoderLoadError(f"{path} must hold a JSON object, not a {type(config).__name__}")
    return config


def check_sizes(fields: dict[str, Any], source: Path, where: str = "") -> None:
    """Refuse a size field that is not a positive integer within :data:`SIZE_LIMITS`."""
    for key, limit in SIZE_LIMITS.items():
        if key not in fields or fields[key] is None:
            continue
        value = fields[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
            raise EncoderLoadError(
                f"{source}: {where}{key} = {value!r} is not a plausible size "
                f"(a positive integer up to {limit:,})"
            )
